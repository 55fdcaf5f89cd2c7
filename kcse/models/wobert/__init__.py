"""WoBERT's (and RoFormer's) tokenizer: jieba words first, then WordPiece."""

from kcse.foundation.lazy_exports import lazy_exports

_EXPORTS = {
    "JiebaWordPieceTokenizer": "kcse.models.wobert.jieba_word_piece_tokenizer",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
