"""WordPiece as Google's BERT release and bert4keras cut text."""


import keras
import keras_hub
import numpy as np
from kcse.foundation import compat
from kcse.models import word_piece_rule

# Step 3 of `word_piece_rule`, in RE2 (the graph's regexes): what separates
# words (Python's `str.split` after bert4keras' map: space, tab, newlines,
# Zs, and the line and paragraph separators Zl, Zp), and what is dropped.
WHITESPACE_REGEX = r"[\t\n\r\p{Zs}\p{Zl}\p{Zp}]"
DROPPED_REGEX = r"[\p{Cc}\p{Cf}\x{FFFD}]"


@keras.saving.register_keras_serializable(package="kcse")
class GoogleWordPieceTokenizer(keras_hub.models.BertTokenizer):
    """WordPiece as Google's BERT release and bert4keras cut text.

    The tokenizer of kcse's Google-format checkpoints (BERT, RoBERTa-wwm,
    SimBERT, NEZHA): bert4keras 0.11.5's `Tokenizer(vocab,
    do_lower_case=...)`, the tokenizer of Su Jianlin's scripts, which
    follows Google's `tokenization.py` (see `kcse.models.word_piece_rule`).
    With `lowercase`, it lowercases and strips accents and folds nothing
    else, where keras-hub's `BertTokenizer(lowercase=True)` folds each word
    with NFKC case folding: full-width "，" "？" "２" "Ａ" keep their own ids
    here, as in the checkpoints' pre-training. Control and format characters
    are dropped (a zero-width space joins the halves of a word), and words
    of up to 200 characters are cut into pieces (keras-hub: 100 bytes).

    It runs in the graph (a SavedModel's strings signature, `tf.data`) with
    TensorFlow Text, and in plain Python otherwise (eager calls, no
    TensorFlow): both give bert4keras' ids. Characters that Python 3.11's
    Unicode tables leave unassigned and later Unicode versions make
    punctuation or combining marks (79 code points, none in kcse's data
    sets) may be cut otherwise in the graph.

    Args:
        vocabulary: a list of tokens or the path of a `vocab.txt` (one token
            a line), with `[UNK]`, `[CLS]`, `[SEP]`, `[PAD]`, `[MASK]`.
        lowercase: bert4keras' `do_lower_case` (`bert_config.json`'s
            `do_lower_case`, else True, as Chinese checkpoints are uncased).
        strip_accents: strip accents after lowercasing; `None` (default):
            the same as `lowercase`, as bert4keras does.
        word_maxlen: longer words (in characters) are one unknown token.
            Defaults to 200, bert4keras' and Google's; at most 1,000.
        **kwargs: passed to `BertTokenizer` (`sequence_length`, `dtype`,
            `oov_token`, `suffix_indicator`, ...). `special_tokens_in_strings`
            must stay False: bert4keras cuts a typed "[CLS]" as text.

    Example:
    ```python
    import keras
    import keras_hub
    from kcse.models.google_word_piece_tokenizer import GoogleWordPieceTokenizer

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    vocab += ["一", "个", "女", "孩", "，", ",", "？", "?", "２", "2", "a", "##b"]
    tokenizer = GoogleWordPieceTokenizer(vocabulary=vocab)
    # Full-width punctuation and digits keep their own ids.
    assert list(tokenizer("一个女孩，２？")) == [5, 6, 7, 8, 9, 13, 11]
    assert tokenizer(["AB", "a\u200bb"]) == [[15, 16], [15, 16]]

    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        tokenizer, sequence_length=6)
    token_ids = preprocessor(["一个，"])["token_ids"]
    assert keras.ops.convert_to_numpy(token_ids).tolist() == [[2, 5, 6, 9, 3, 0]]
    ```
    """

    # The graph below runs in a SavedModel's strings signature.
    runs_in_graph = True

    def __init__(self, vocabulary=None, lowercase=True, strip_accents=None,
                 word_maxlen=word_piece_rule.WORD_MAXLEN, split=True, **kwargs):
        if not split or not kwargs.pop("split_on_cjk", True):
            raise ValueError(f"{type(self).__name__} splits words and CJK characters "
                             "as Google's BERT does; split=False and split_on_cjk=False "
                             "are not supported.")
        if kwargs.get("special_tokens_in_strings") and self.runs_in_graph:
            raise ValueError(f"{type(self).__name__} cuts a typed special token such as "
                             '"[CLS]" as text, as bert4keras does: '
                             "special_tokens_in_strings=True is not supported.")
        if not 0 < int(word_maxlen) <= 1000:
            raise ValueError(f"word_maxlen must be in 1..1000; got {word_maxlen!r}.")
        self.word_maxlen = int(word_maxlen)
        self._rule = None
        super().__init__(
            vocabulary=vocabulary,
            lowercase=bool(lowercase),
            strip_accents=bool(lowercase if strip_accents is None else strip_accents),
            split=True,
            **kwargs,
        )

    def set_vocabulary(self, vocabulary):
        super().set_vocabulary(vocabulary)
        if self.vocabulary is None:
            self._rule = None
            return
        self._rule = self._build_rule(dict(self._token_to_id_map))

    def _build_rule(self, token_to_id, **options):
        """The plain-Python rule; `options` are `WordPieceRule`'s others."""
        return word_piece_rule.WordPieceRule(
            token_to_id,
            oov_id=token_to_id[self.oov_token],
            lowercase=self.lowercase,
            strip_accents=self.strip_accents,
            suffix_indicator=self.suffix_indicator,
            word_maxlen=self.word_maxlen,
            **options,
        )

    def _set_vocabulary_tf(self):
        import tensorflow_text as tf_text

        # Words are limited in characters below, not in bytes.
        self._fast_word_piece = tf_text.FastWordpieceTokenizer(
            vocab=self.vocabulary,
            token_out_type=self.compute_dtype,
            suffix_indicator=self.suffix_indicator,
            unknown_token=self.oov_token,
            max_bytes_per_word=4 * self.word_maxlen,
            no_pretokenization=True,
            support_detokenization=True,
        )

    def _normalize_tf(self, text):
        """Steps 1 and 3's character rules (lower, accents, spaces, drops)."""
        import tensorflow as tf
        import tensorflow_text as tf_text

        # ICU's lowercasing and NFD end a string at NUL, which bert4keras drops.
        text = tf.strings.regex_replace(text, r"\x00", "")
        if self.lowercase:
            text = tf.strings.lower(text, encoding="utf-8")
        if self.strip_accents:
            text = tf_text.normalize_utf8(text, "NFD")
            text = tf.strings.regex_replace(text, r"\p{Mn}", "")
        text = tf.strings.regex_replace(text, WHITESPACE_REGEX, " ")
        return tf.strings.regex_replace(text, DROPPED_REGEX, "")

    @compat.preprocessing_function
    def _tokenize_tf(self, inputs):
        import tensorflow as tf

        if not isinstance(inputs, tf.RaggedTensor):
            inputs = tf.convert_to_tensor(inputs)
        if inputs.dtype != tf.string:
            raise ValueError(f"Inputs must be strings. Received: dtype={inputs.dtype}.")
        unbatched = inputs.shape.rank == 0
        if unbatched:
            inputs = tf.expand_dims(inputs, 0)
        tokens = self._tokenize_batch_tf(inputs)
        if self.sequence_length:
            output_shape = tokens.shape.as_list()
            output_shape[-1] = self.sequence_length
            tokens = tokens.to_tensor(shape=output_shape)
        if unbatched:
            tokens = tf.squeeze(tokens, 0)
            if self.sequence_length:
                tokens = tf.ensure_shape(tokens, shape=[self.sequence_length])
        return tokens

    def _tokenize_batch_tf(self, inputs):
        """A string tensor of rank >= 1 -> a `tf.RaggedTensor` of tokens."""
        import tensorflow as tf

        self._maybe_initialized_tf()
        text = tf.ragged.map_flat_values(self._normalize_tf, inputs)
        words = compat.pretokenize(text, lowercase=False, strip_accents=False,
                                   split=True, split_on_cjk=True)
        # bert4keras: a word longer than word_maxlen characters is one token.
        too_long = tf.strings.length(words, unit="UTF8_CHAR") > self.word_maxlen
        words = tf.where(too_long, self.oov_token, words)
        return self._fast_word_piece.tokenize(words).merge_dims(-2, -1)

    def _ids_to_output(self, ids):
        if compat.is_int_dtype(self.compute_dtype):
            return ids
        vocabulary = self.vocabulary
        return [vocabulary[i] for i in ids]

    def _tokenize_python(self, inputs):
        texts, batched, outer_shape = compat.canonicalize_python_string_inputs(inputs)
        batched_tokens = [self._ids_to_output(self._rule.encode(text)) for text in texts]
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

    def get_config(self):
        config = super().get_config()
        config["word_maxlen"] = self.word_maxlen
        return config
