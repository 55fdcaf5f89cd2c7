"""The WoBERT / RoFormer tokenizer: jieba words, then BERT word pieces."""

import itertools
import re
import unicodedata

import jieba
import keras
import keras_hub
import numpy as np
from kcse import compat

try:
    import tensorflow as tf
except ImportError:  # pragma: no cover - the TF path is then unavailable.
    tf = None

# Entries kept in the per-segment cache before it is emptied (a bound on
# memory for endless streams of new numbers, URLs, ...).
_CACHE_LIMIT = 1 << 20


def _is_punctuation_or_cjk(ch):
    """bert4keras `Tokenizer._is_punctuation(ch) or _is_cjk_character(ch)`."""
    code = ord(ch)
    return (
        33 <= code <= 47
        or 58 <= code <= 64
        or 91 <= code <= 96
        or 123 <= code <= 126
        or unicodedata.category(ch).startswith("P")
        or 0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F
        or 0x2B740 <= code <= 0x2B81F
        or 0x2B820 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


class _BasicCharMap(dict):
    """`str.translate` table for bert4keras' basic (pre-word-piece) split.

    Maps a code point to what bert4keras' `_tokenize` puts in its `spaced`
    string: punctuation and CJK characters get a space on both sides,
    whitespace (space, `\\n`, `\\r`, `\\t`, category Zs) becomes a space, NUL,
    U+FFFD and categories Cc/Cf are dropped, anything else is kept. Entries
    are computed on first use, so the table only holds characters seen.
    """

    def __missing__(self, code):
        ch = chr(code)
        if _is_punctuation_or_cjk(ch):
            out = f" {ch} "
        elif ch in " \n\r\t" or unicodedata.category(ch) == "Zs":
            out = " "
        elif code == 0 or code == 0xFFFD or unicodedata.category(ch) in ("Cc", "Cf"):
            out = ""
        else:
            out = ch
        self[code] = out
        return out


_BASIC_CHAR_MAP = _BasicCharMap()


def _strip_accents(text):
    text = unicodedata.normalize("NFD", text)
    return "".join([ch for ch in text if unicodedata.category(ch) != "Mn"])


class _JiebaBertRule:
    """The tokenisation rule, in plain Python (no Keras attribute tracking).

    Holds the token -> id map and a per-segment cache: for every jieba
    segment seen, the ids it produces (one id if the segment is in the
    vocabulary, else its BERT word pieces).
    """

    def __init__(
        self,
        token_to_id,
        oov_id,
        lowercase,
        strip_accents,
        suffix_indicator,
        word_maxlen,
        jieba_hmm,
        special_tokens=None,
    ):
        self.token_to_id = token_to_id
        self.oov_id = oov_id
        self.lowercase = lowercase
        self.strip_accents = strip_accents
        self.suffix = suffix_indicator
        self.word_maxlen = word_maxlen
        self.jieba_hmm = jieba_hmm
        self.cache = {}
        self.special_pattern = None
        if special_tokens:
            # Longest first, so that a special token containing another wins.
            tokens = sorted(set(special_tokens), key=len, reverse=True)
            self.special_pattern = re.compile(
                "(" + "|".join(re.escape(t) for t in tokens) + ")"
            )

    def normalize(self, text):
        # bert4keras (do_lower_case): `text.lower()`, then NFD and drop the
        # combining marks (category Mn), on the whole text before jieba.
        if self.lowercase:
            text = text.lower()
        if self.strip_accents and not text.isascii():
            text = _strip_accents(text)
        return text

    def word_pieces(self, word):
        """bert4keras `_word_piece_tokenize`, as ids.

        Greedy longest match with `##` continuations. A word longer than
        `word_maxlen` characters, or with a part no piece matches, stays one
        token: the whole word, i.e. the unknown token (unless, when too long,
        the word itself is in the vocabulary).
        """
        vocab = self.token_to_id
        if len(word) > self.word_maxlen:
            return [vocab.get(word, self.oov_id)]
        ids = []
        start, n = 0, len(word)
        while start < n:
            for end in range(n, start, -1):
                piece = word[start:end]
                piece_id = vocab.get(piece if start == 0 else self.suffix + piece)
                if piece_id is not None:
                    break
            else:
                return [vocab.get(word, self.oov_id)]
            ids.append(piece_id)
            start = end
        return ids

    def segment_ids(self, segment):
        """Ids of one jieba segment (computed once, then cached)."""
        token_id = self.token_to_id.get(segment)
        if token_id is not None:
            ids = (token_id,)
        else:
            # bert4keras `_tokenize(segment, pre_tokenize=False)`: normalise
            # again, split on whitespace / punctuation / CJK characters (dropping
            # control characters), then word pieces.
            spaced = self.normalize(segment).translate(_BASIC_CHAR_MAP)
            ids = []
            for word in spaced.split():
                ids.extend(self.word_pieces(word))
            ids = tuple(ids)
        if len(self.cache) >= _CACHE_LIMIT:
            self.cache.clear()
        self.cache[segment] = ids
        return ids

    def encode_text(self, text, out):
        """Appends the ids of `text` (no special tokens added) to `out`."""
        cache = self.cache
        for segment in jieba.cut(self.normalize(text), HMM=self.jieba_hmm):
            ids = cache.get(segment)
            if ids is None:
                ids = self.segment_ids(segment)
            out.extend(ids)
        return out

    def encode(self, text):
        """The ids of `text` as a list."""
        if self.special_pattern is None:
            return self.encode_text(text, [])
        out = []
        for i, part in enumerate(self.special_pattern.split(text)):
            if i % 2:
                out.append(self.token_to_id[part])
            elif part:
                self.encode_text(part, out)
        return out


@keras.saving.register_keras_serializable(package="kcse")
class JiebaWordPieceTokenizer(keras_hub.models.BertTokenizer):
    """The WoBERT / RoFormer tokenizer: jieba words, then BERT word pieces.

    Chinese word-level BERTs from ZhuiyiTechnology (WoBERT, WoBERT+,
    WoNEZHA, RoFormer; Su Jianlin) tokenise with bert4keras'
    `Tokenizer(vocab, do_lower_case=True,
    pre_tokenize=lambda s: jieba.cut(s, HMM=False))`. This layer implements
    exactly that rule as a `keras_hub.models.BertTokenizer`:

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
       token (Google's BERT / keras-hub cap words at 100 characters / bytes).

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
        **kwargs: passed to `BertTokenizer` (`sequence_length`, `dtype`,
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

    def __init__(
        self,
        vocabulary=None,
        lowercase=True,
        strip_accents=None,
        word_maxlen=200,
        jieba_hmm=False,
        split=True,
        **kwargs,
    ):
        if not split:
            raise ValueError(
                "JiebaWordPieceTokenizer always splits its input (jieba, then "
                f"the BERT rule); `split=False` is not supported. Got {split!r}."
            )
        kwargs.pop("split_on_cjk", None)  # Always on, as in bert4keras.
        self.word_maxlen = int(word_maxlen)
        self.jieba_hmm = bool(jieba_hmm)
        self._rule = None
        super().__init__(
            vocabulary=vocabulary,
            lowercase=lowercase,
            strip_accents=lowercase if strip_accents is None else strip_accents,
            split=True,
            **kwargs,
        )

    def set_vocabulary(self, vocabulary):
        super().set_vocabulary(vocabulary)
        if self.vocabulary is None:
            self._rule = None
            return
        token_to_id = dict(self._token_to_id_map)
        self._rule = _JiebaBertRule(
            token_to_id=token_to_id,
            oov_id=token_to_id[self.oov_token],
            lowercase=self.lowercase,
            strip_accents=self.strip_accents,
            suffix_indicator=self.suffix_indicator,
            word_maxlen=self.word_maxlen,
            jieba_hmm=self.jieba_hmm,
            special_tokens=self._special_tokens_for_splitting(),
        )

    def _encode(self, text):
        """Ids of one text (no [CLS]/[SEP]), as a list of Python ints."""
        return self._rule.encode(text)

    def tokenize(self, inputs):
        self._check_vocabulary()
        if self._use_tf_workflow():
            return self._tokenize_tf(inputs)
        return self._tokenize_python(inputs)

    def _ids_to_output(self, ids):
        if compat.is_int_dtype(self.compute_dtype):
            return ids
        vocabulary = self.vocabulary
        return [vocabulary[i] for i in ids]

    def _tokenize_python(self, inputs):
        texts, batched, outer_shape = compat.canonicalize_python_string_inputs(inputs)
        batched_tokens = [self._ids_to_output(self._encode(text)) for text in texts]
        int_output = compat.is_int_dtype(self.compute_dtype)
        if self.sequence_length:
            pad_value = 0 if int_output else ""
            length = self.sequence_length
            batched_tokens = [
                tokens[:length] + [pad_value] * (length - len(tokens))
                for tokens in batched_tokens
            ]
            if int_output:
                batched_tokens = np.array(batched_tokens, dtype=self.compute_dtype)
        if outer_shape is not None:
            return compat.restore_outer_shape(batched_tokens, outer_shape)
        if not batched:
            batched_tokens = batched_tokens[0]
            if not self.sequence_length and int_output:
                batched_tokens = np.array(batched_tokens, dtype=self.compute_dtype)
        return batched_tokens

    def _numpy_tokenize(self, flat_texts):
        """`tf.numpy_function` body: byte strings -> (values, row lengths)."""
        rows = [self._encode(text.decode("utf-8")) for text in flat_texts.reshape(-1)]
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

    @compat.preprocessing_function
    def _tokenize_tf(self, inputs):
        if not isinstance(inputs, tf.RaggedTensor):
            inputs = tf.convert_to_tensor(inputs)
        if inputs.dtype != tf.string:
            raise ValueError(
                f"Inputs must be strings. Received: dtype={inputs.dtype}."
            )
        unbatched = inputs.shape.rank == 0
        if unbatched:
            inputs = tf.expand_dims(inputs, 0)
        if isinstance(inputs, tf.RaggedTensor):
            tokens = inputs.with_flat_values(
                self._tokenize_flat_tf(inputs.flat_values)
            )
        elif inputs.shape.rank == 1:
            tokens = self._tokenize_flat_tf(inputs)
        else:
            inputs = tf.RaggedTensor.from_tensor(inputs)
            tokens = inputs.with_flat_values(
                self._tokenize_flat_tf(inputs.flat_values)
            )
        if self.sequence_length:
            output_shape = tokens.shape.as_list()
            output_shape[-1] = self.sequence_length
            tokens = tokens.to_tensor(shape=output_shape)
        if unbatched:
            tokens = tf.squeeze(tokens, 0)
            tokens = tf.ensure_shape(tokens, shape=[self.sequence_length])
        return tokens

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "word_maxlen": self.word_maxlen,
                "jieba_hmm": self.jieba_hmm,
            }
        )
        return config
