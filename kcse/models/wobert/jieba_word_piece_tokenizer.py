"""The WoBERT / RoFormer tokenizer: jieba words, then BERT word pieces."""

import functools
import itertools
import re

import keras
import numpy as np
from kcse.foundation import compat
from kcse.foundation import optional_packages
from kcse.models import word_piece_rule
from kcse.models.google_checkpoint.families import JIEBA_FEATURE
from kcse.models.google_word_piece_tokenizer import GoogleWordPieceTokenizer


def jieba():
    """The jieba module, imported when a tokenizer first needs it."""
    return optional_packages.require("jieba", JIEBA_FEATURE)


@keras.saving.register_keras_serializable(package="kcse")
class JiebaWordPieceTokenizer(GoogleWordPieceTokenizer):
    """The WoBERT / RoFormer tokenizer: jieba words, then BERT word pieces.

    Chinese word-level BERTs from ZhuiyiTechnology (WoBERT, WoBERT+,
    WoNEZHA, RoFormer; Su Jianlin) tokenise with bert4keras'
    `Tokenizer(vocab, do_lower_case=True,
    pre_tokenize=lambda s: jieba.cut(s, HMM=False))`. This layer implements
    exactly that rule as a `GoogleWordPieceTokenizer` whose words come from
    jieba:

    1. lowercase the text and strip accents (NFD, drop category Mn), as
       bert4keras' `do_lower_case` does, on the whole text;
    2. segment it with `jieba.cut(text, HMM=False)` (the global jieba
       tokenizer, so words added with `jieba.add_word` /
       `jieba.load_userdict` are honoured);
    3. a segment that is in the vocabulary is one token; any other segment is
       tokenised by bert4keras' BERT rule: split on whitespace, punctuation
       and CJK characters, drop NUL, U+FFFD and categories Cc/Cf (unlike
       Google's BERT, other `C*` characters such as private-use ones are
       kept), then greedy longest-match word pieces with `##` continuations.
       A word that cannot be covered by pieces, or is longer than
       `word_maxlen` (200) characters, stays whole, i.e. becomes the unknown
       token (Hugging Face's `BertTokenizer` and keras-hub cap words at 100
       characters / bytes).

    Like `BertTokenizer`, `tokenize` adds no `[CLS]`/`[SEP]`: a
    `keras_hub.models.BertTextEmbedderPreprocessor` (or any BERT
    preprocessor) built on this tokenizer packs `[CLS] ... [SEP]`.
    Vocabulary handling, special tokens, `id_to_token`, `detokenize`,
    `get_config` and saving the vocabulary as an asset are inherited.

    It runs eagerly on a string, a list of strings or a string tensor, and
    inside `tf.data` (`dataset.map(tokenizer)` or a preprocessor mapped over
    a dataset), where the Python rule runs through `tf.numpy_function` and
    comes back as a `tf.RaggedTensor`. Because jieba is Python, the tokenizer
    cannot live inside an exported SavedModel / TF Serving graph: an
    exported model must take token ids, with tokenisation done beforehand.
    Results are cached per jieba segment, so after warm-up the cost is
    essentially jieba's. In `tf.data`, batch before mapping: each call is one
    trip into Python, so mapping single strings is ~3x slower.

    Args:
        vocabulary: a list of tokens or the path of a `vocab.txt` (one token
            a line). Must contain `[UNK]`, `[CLS]`, `[SEP]`, `[PAD]`,
            `[MASK]`.
        lowercase: bert4keras' `do_lower_case`. Defaults to `True`, as for
            WoBERT and RoFormer.
        strip_accents: whether to strip accents; `None` (default) means "same
            as `lowercase`", which is bert4keras' behaviour.
        word_maxlen: bert4keras' `word_maxlen`: longer words (in characters)
            are not split into pieces. Defaults to 200.
        jieba_hmm: the `HMM` argument of `jieba.cut`. Defaults to `False`
            (WoBERT's choice).
        **kwargs: passed to `GoogleWordPieceTokenizer` / `BertTokenizer`
            (`sequence_length`, `dtype`,
            `special_tokens_in_strings`, `oov_token`, `suffix_indicator`, ...).
            With `special_tokens_in_strings=True`, the special tokens found
            in a text (before lowercasing) map to their ids and the text
            between them is tokenised as above (bert4keras has no such
            option).

    Example:
    ```python
    import keras_hub
    import tensorflow as tf
    from kcse.models.wobert.jieba_word_piece_tokenizer import (
        JiebaWordPieceTokenizer,
    )

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += ["今", "天", "气", "不错", "我", "喜欢", "，", "。"]
    vocab += ["the", "app", "##le"]
    tokenizer = JiebaWordPieceTokenizer(vocabulary=vocab)
    # jieba: 今天天气 / 不错 / 。 ; "今天天气" is not in the vocabulary, so
    # it falls back to characters.
    assert list(tokenizer("今天天气不错。")) == [5, 6, 6, 7, 8, 12]
    # jieba: 我 / 喜欢 / apple / ， and the / " " / 橘子 (unknown characters).
    tokens = tokenizer(["我喜欢Apple，", "The 橘子"])
    assert tokens == [[9, 10, 14, 15, 11], [13, 1, 1]]
    assert tokenizer.detokenize([5, 6, 7, 12]) == "今 天 气 。"

    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        tokenizer, sequence_length=8
    )
    preprocessor(["我喜欢Apple"])["token_ids"]  # [[2, 9, 10, 14, 15, 3, 0, 0]]

    ds = tf.data.Dataset.from_tensor_slices(["今天天气不错。", "我喜欢"])
    ds = ds.batch(2).map(preprocessor)  # dicts of (2, 8) tensors
    assert next(iter(ds))["token_ids"].shape == (2, 8)
    ```
    """

    # jieba is Python: no exported graph can hold this tokenizer.
    runs_in_graph = False

    def __init__(self, vocabulary=None, lowercase=True, strip_accents=None,
                 word_maxlen=word_piece_rule.WORD_MAXLEN, jieba_hmm=False, **kwargs):
        self.jieba_hmm = bool(jieba_hmm)
        super().__init__(vocabulary=vocabulary, lowercase=lowercase,
                         strip_accents=strip_accents, word_maxlen=word_maxlen, **kwargs)

    def _build_rule(self, token_to_id):
        special_tokens = self._special_tokens_for_splitting()
        special_pattern = None
        if special_tokens:
            # Longest first, so that a special token containing another wins.
            tokens = sorted(set(special_tokens), key=len, reverse=True)
            special_pattern = re.compile("(" + "|".join(re.escape(t) for t in tokens) + ")")
        return super()._build_rule(
            token_to_id,
            pre_tokenize=functools.partial(jieba().cut, HMM=self.jieba_hmm),
            special_pattern=special_pattern,
        )

    def _numpy_tokenize(self, flat_texts):
        """`tf.numpy_function` body: byte strings -> (values, row lengths)."""
        rows = [self._rule.encode(text.decode("utf-8")) for text in flat_texts.reshape(-1)]
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        flat = itertools.chain.from_iterable(rows)
        if compat.is_int_dtype(self.compute_dtype):
            values = np.fromiter(
                flat, dtype=self.compute_dtype, count=int(lengths.sum())
            )
        else:
            vocabulary = self.vocabulary
            values = np.array(
                [vocabulary[i].encode("utf-8") for i in flat], dtype=object
            ).reshape(-1)
        return values, lengths

    def _tokenize_flat_tf(self, flat_texts):
        """Rank-1 string tensor -> `tf.RaggedTensor` of tokens."""
        import tensorflow as tf

        out_dtype = tf.as_dtype(self.compute_dtype)
        values, lengths = tf.numpy_function(
            self._numpy_tokenize,
            [flat_texts],
            [out_dtype, tf.int64],
            name="jieba_word_piece_tokenize",
        )
        values.set_shape([None])
        lengths.set_shape(flat_texts.shape)
        return tf.RaggedTensor.from_row_lengths(values, lengths, validate=False)

    def _tokenize_batch_tf(self, inputs):
        import tensorflow as tf

        if isinstance(inputs, tf.RaggedTensor):
            return inputs.with_flat_values(self._tokenize_flat_tf(inputs.flat_values))
        if inputs.shape.rank == 1:
            return self._tokenize_flat_tf(inputs)
        inputs = tf.RaggedTensor.from_tensor(inputs)
        return inputs.with_flat_values(self._tokenize_flat_tf(inputs.flat_values))

    def get_config(self):
        config = super().get_config()
        config["jieba_hmm"] = self.jieba_hmm
        return config
