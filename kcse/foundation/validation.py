"""Argument checks shared by kcse's Python API (imports nothing heavy).

Bad arguments raise `TypeError` or `ValueError` naming the argument (and,
for a list, the index of the bad element) before any work starts, rather
than failing deep inside NumPy, TensorFlow or Keras.
"""

import math
import numbers
import os
import sys

# kcse/ (this module is in kcse/foundation/).
_PACKAGE_FOLDER = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# The shortest token length that tells sentences apart: [CLS], a token and
# [SEP]. keras-hub's preprocessors always keep the two special tokens, so
# at 2 every sentence is `[CLS] [SEP]` (one vector for all), and at 1 they
# still emit 2 tokens, more than the length they say.
MIN_SEQUENCE_LENGTH = 3


class _DefaultPrompt:
    """The `prompt_name` of `encode` when none is given: the encoder's default."""

    def __repr__(self):
        return "DEFAULT_PROMPT"


# `encode(prompt_name=DEFAULT_PROMPT)`, the default: the `default_prompt_name`
# (`kcse.SentenceEncoder.encode`, `kcse.OnnxEncoder.encode`).
DEFAULT_PROMPT = _DefaultPrompt()


class TruncationWarning(UserWarning):
    """Some sentences were longer than the preprocessor's maximum length.

    They were cut to it (`sequence_length`, special tokens included). Raise
    the preprocessor's `sequence_length` to keep them whole. Silence it with
    `warnings.filterwarnings("ignore", category=TruncationWarning)`.

    Example:
    ```python
    import warnings

    import keras_hub
    import kcse

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                  "a", "cat", "dog", "sat", "ran", "the"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        encoder.encode(["the cat sat", "the cat sat and the dog ran and a cat sat"])
    [warning] = [w for w in caught if w.category is kcse.TruncationWarning]
    str(warning.message)  # '1 of 2 sentences are longer than the maximum length 8 tokens and were truncated; ...'
    ```
    """


def check_texts(texts, name="texts"):
    """`texts` as a list of str; a str is one text.

    Raises:
        TypeError: `texts` is neither a str nor an iterable of str (the
            message names `name`), or an element is not a str (it names
            `name[i]` and the element's type).
    """
    if isinstance(texts, str):
        return [texts]
    if isinstance(texts, (bytes, dict)) or not _is_iterable(texts):
        raise TypeError(
            f"{name} must be a str or an iterable of str; got "
            f"{type(texts).__name__}."
        )
    texts = list(texts)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(
                f"{name}[{index}] must be a str; got {type(text).__name__} "
                f"({_short_repr(text)})."
            )
    return texts


def check_count(value, name, minimum=1):
    """`value` as an int >= `minimum` (bools are not counts).

    Raises:
        TypeError: `value` is not an int (the message names `name`).
        ValueError: `value` is below `minimum` (it names `name`).
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{name} must be an int >= {minimum}; got {type(value).__name__} "
            f"{_short_repr(value)}."
        )
    if value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}; got {value}.")
    return int(value)


def check_number(value, name, minimum=None, above=None, below=None, maximum=None):
    """`value` as a finite float with `minimum <= value <= maximum` and
    `above < value < below` (each bound optional; bools are not numbers).

    Raises:
        TypeError: `value` is not a real number (the message names `name`).
        ValueError: `value` is NaN, infinite or out of range (it names `name`).
    """
    bounds = [(minimum, ">="), (above, ">"), (below, "<"), (maximum, "<=")]
    words = " and ".join(f"{sign} {bound:g}" for bound, sign in bounds if bound is not None)
    wanted = f"a finite number{' ' + words if words else ''}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be {wanted}; got {type(value).__name__} "
                        f"{_short_repr(value)}.")
    value = float(value)
    if not (math.isfinite(value)
            and (minimum is None or value >= minimum) and (above is None or value > above)
            and (below is None or value < below) and (maximum is None or value <= maximum)):
        raise ValueError(f"{name} must be {wanted}; got {value:g}.")
    return value


def check_rate(value, name):
    """A dropout or cutoff rate: a finite number in [0, 1) (1 drops everything)."""
    return check_number(value, name, minimum=0, below=1)


def check_bool(value, name):
    """`value`, a bool (numpy's included); else `TypeError` naming `name`."""
    if type(value).__name__ not in ("bool", "bool_"):
        raise TypeError(f"{name} must be True or False; got {type(value).__name__} "
                        f"{_short_repr(value)}.")
    return bool(value)


def check_sequence_length(value, name="sequence_length"):
    """A token length: an int >= `MIN_SEQUENCE_LENGTH` ([CLS], a token, [SEP]).

    Raises:
        TypeError: not an int (the message names `name`).
        ValueError: below 3, where every sentence gets the same tokens.
    """
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and (
            value < MIN_SEQUENCE_LENGTH):
        raise ValueError(
            f"{name} must be an int >= {MIN_SEQUENCE_LENGTH} ([CLS], at least one "
            f"token and [SEP]); got {value}: every sentence would be [CLS] [SEP], "
            "one vector for all.")
    return check_count(value, name, minimum=MIN_SEQUENCE_LENGTH)


def check_preprocessor_length(preprocessor, what):
    """The `sequence_length` of `preprocessor` (None: none), checked when
    used: it may have been set after the encoder was built. `what` names
    the caller, e.g. `"encode"`."""
    length = getattr(preprocessor, "sequence_length", None)
    if length is None:
        return None
    return check_sequence_length(length, f"{what}: the preprocessor's sequence_length")


def check_prompt(value, name="prompt"):
    """A prompt: a str (`""`: none); else `TypeError` naming `name`.

    Bytes are not decoded, nor numbers turned into text: `b"x"` would be
    prepended as `"b'x'"`.
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str; got {type(value).__name__} "
                        f"{_short_repr(value)}.")
    return value


def check_prompts(prompts, name="prompts"):
    """`prompts` as a dict of non-empty str names to str texts (None: empty).

    Raises:
        TypeError: not a dict, or a name or text that is not a str (the
            message names `name[key]`).
        ValueError: an empty name.
    """
    if prompts is None:
        return {}
    if not isinstance(prompts, dict):
        raise TypeError(f"{name} must be a dict of str to str; got "
                        f"{type(prompts).__name__} {_short_repr(prompts)}.")
    for key, text in prompts.items():
        if not isinstance(key, str):
            raise TypeError(f"{name} must be a dict of str to str; the name "
                            f"{_short_repr(key)} is a {type(key).__name__}.")
        if not key:
            raise ValueError(f"{name}: a prompt's name is the empty string.")
        check_prompt(text, f"{name}[{key!r}]")
    return dict(prompts)


def check_finite(vectors, what, first_row=0, streamed=False):
    """Raises `ValueError` if the 2-D numpy array `vectors` holds NaN or inf.

    One pass (`np.isfinite`) when all is well; the count and the position
    are only worked out for the error. `what` names the caller (e.g.
    `"Whitening.adapt"`). For one batch of a stream, `first_row` is the row
    of the whole stream that `vectors[0]` is, and `streamed` makes the
    message say which rows the count is of (a stream is not read past the
    batch).

    Raises:
        ValueError: `vectors` holds NaN or infinite values. The message
            says how many (NaN and inf apart) and the (row, column) of the
            first in row-major order, e.g. "Whitening.adapt: 3 non-finite
            values in the vectors (2 NaN, 1 inf), the first at row 5,
            column 2".
    """
    import numpy as np

    finite = np.isfinite(vectors)
    if finite.all():
        return
    bad = ~finite
    count = int(bad.sum())
    nans = int(np.isnan(vectors).sum())
    row, column = np.unravel_index(int(np.argmax(bad)), bad.shape)
    where = "in the vectors"
    if streamed:
        where = (
            f"in rows {first_row} to {first_row + len(vectors) - 1} of the "
            f"vectors"
        )
    raise ValueError(
        f"{what}: {count} non-finite value{'s' if count != 1 else ''} "
        f"{where} ({nans} NaN, {count - nans} inf), the first at row "
        f"{first_row + int(row)}, column {int(column)}."
    )


def largest_magnitude(vectors):
    """`(|value|, row, column)` of the largest magnitude in a 2-D numpy
    array of finite values (the first such in row-major order)."""
    import numpy as np

    magnitudes = np.abs(vectors)
    row, column = np.unravel_index(int(np.argmax(magnitudes)), vectors.shape)
    return float(magnitudes[row, column]), int(row), int(column)


def check_dtype_available(dtype, what):
    """Raises `ValueError` if the backend cannot compute in `dtype`.

    JAX computes float64 only with its 64-bit mode on (`jax_enable_x64`);
    without it each float64 array becomes float32 (with a warning), so a
    layer asked for float64 would give other numbers on JAX than on
    TensorFlow. `what` names the caller (e.g. `"Whitening"`).
    """
    import keras

    if keras.backend.standardize_dtype(dtype) != "float64" or keras.backend.backend() != "jax":
        return
    import jax

    if not jax.config.jax_enable_x64:
        raise ValueError(
            f"{what}(dtype=\"float64\") needs JAX's 64-bit mode "
            f"(JAX_ENABLE_X64=1 or jax.config.update(\"jax_enable_x64\", True)); "
            f"without it JAX computes in float32."
        )


def user_stacklevel():
    """The `warnings.warn` stacklevel of the first caller outside kcse.

    Called from the function that warns; the warning then points at the
    user's line rather than at kcse's internals.
    """
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_FOLDER):
        frame, level = frame.f_back, level + 1
    return level


def _is_iterable(value):
    try:
        iter(value)
    except TypeError:
        return False
    return True


def _short_repr(value, limit=40):
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
