"""Counting the texts a preprocessor cuts to its `sequence_length`, and warning of them."""

import warnings

import numpy as np
from keras import ops

from kcse.foundation.validation import TruncationWarning
from kcse.foundation.validation import user_stacklevel


def text_tokens(preprocessor, texts):
    """Each text's token count and the distinct token ids of all, in one pass.

    Counts are of the preprocessor's tokenizer output (special tokens not
    included); the ids, those a keras-hub preprocessor's token arrays can
    hold: its tokenizer's output and the special tokens it adds (start, end,
    padding). One pass of the tokenizer over the distinct texts.
    Returns `(counts, ids)`, or `(None, None)` for a preprocessor without
    `tokenizer` or for no texts.
    """
    tokenizer = getattr(preprocessor, "tokenizer", None)
    if tokenizer is None or len(texts) == 0:
        return None, None
    unique, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
    tokens = tokenizer(list(unique))
    if hasattr(tokens, "row_lengths"):  # A tf.RaggedTensor.
        counts = np.asarray(tokens.row_lengths())
        ids = np.asarray(tokens.flat_values)
    else:
        counts = np.array([len(row) for row in tokens])
        ids = np.concatenate([np.ravel(np.asarray(row)) for row in tokens])
    specials = ops.convert_to_numpy(preprocessor([""])["token_ids"])
    return counts[inverse.reshape(-1)], np.union1d(ids, specials)


def truncated_texts(preprocessor, texts, counts=None):
    """Whether `preprocessor` cuts each of `texts`: a bool array.

    A text is cut when its tokens plus the preprocessor's special tokens
    (counted on an empty text) exceed its `sequence_length`. `counts` are
    the texts' token counts if known (`text_tokens`); else one pass of the
    preprocessor's tokenizer over the distinct texts counts them. A
    preprocessor without `tokenizer` or `sequence_length` cuts nothing.
    """
    length = getattr(preprocessor, "sequence_length", None)
    if counts is None and length:
        counts, _ = text_tokens(preprocessor, texts)
    if not length or counts is None:
        return np.zeros(len(texts), bool)
    specials = int(np.sum(ops.convert_to_numpy(preprocessor([""])["padding_mask"])))
    return counts + specials > length


def warn_if_truncated(count, total, length, outcome="were truncated"):
    """One `TruncationWarning` that `count` of `total` sentences were cut.

    Nothing when `count` is 0. The warning points at the first caller
    outside kcse.
    """
    if count:
        warnings.warn(
            TruncationWarning(
                f"{count} of {total} sentences are longer than the maximum "
                f"length {length} tokens and {outcome}; raise "
                "the preprocessor's sequence_length to keep them whole."
            ),
            stacklevel=user_stacklevel(),
        )
