"""Token frequencies: how often each token id occurs in a corpus, and the ranking they give.

The diagnostics rank tokens by these counts (`embedding_statistics.py`,
`top_k_removal.py`). Counted as ConSERT counts (yym6472/ConSERT,
`analysis_rep_space.py`: `save_stsb_info` keeps every `input_id` but
padding, `compute_token_features` counts them).
"""

from collections.abc import Mapping

import numpy as np
from keras import ops

from kcse.foundation.validation import check_texts

# Texts the preprocessor packs at a time in `token_frequencies`.
COUNT_CHUNK_SIZE = 256


def token_frequencies(preprocessor_or_tokenizer, sentences, special_tokens=True):
    """How often each token id occurs in `sentences`: counts per id.

    With a keras-hub preprocessor (anything returning `token_ids` and
    `padding_mask`, such as `kcse.SentenceEncoder.preprocessor`), the tokens
    counted are those the encoder sees: the preprocessor's output under its
    padding mask, so cut to its `sequence_length`, and with the special
    tokens it adds ([CLS]/[SEP], <s>/</s>) unless `special_tokens=False`
    (then every position holding a token id the preprocessor adds to an
    empty text is left out). Padding never counts. This is how ConSERT
    counts (yym6472/ConSERT, `analysis_rep_space.py`: `save_stsb_info` keeps
    every `input_id` but padding, `compute_token_features` counts them), so
    its [CLS] and [SEP], one per sentence, are among the most frequent
    tokens. With a bare tokenizer, its output is counted (no special
    tokens). A sentence repeated n times counts n times.

    Args:
        preprocessor_or_tokenizer: a keras-hub text preprocessor or tokenizer
            (a preprocessor is recognised by its `tokenizer` attribute).
        sentences: a str or an iterable of str.
        special_tokens: bool. With a preprocessor, count the special tokens
            it adds.

    Returns:
        A numpy int64 array: entry `i` counts token id `i`; its length is the
        tokenizer's `vocabulary_size()` (longer if an id reaches beyond).

    Raises:
        TypeError: `sentences` is not a str or an iterable of str.

    Example:
    ```python
    import keras_hub
    import kcse

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                  "a", "cat", "dog", "sat", "ran", "the"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    counts = kcse.evaluation.token_frequencies(preprocessor, ["the cat sat", "the dog"])
    counts.tolist()  # [0, 0, 2, 2, 0, 0, 1, 1, 1, 0, 2]: [CLS], [SEP] and "the" twice
    kcse.evaluation.token_frequencies(
        preprocessor, ["the cat sat", "the dog"], special_tokens=False)[2]  # 0
    ```
    """
    sentences = check_texts(sentences, "sentences")
    tool = preprocessor_or_tokenizer
    tokenizer = getattr(tool, "tokenizer", None)
    size = _vocabulary_size(tokenizer if tokenizer is not None else tool)
    counts = np.zeros(size, "int64")
    specials = None
    if tokenizer is not None and not special_tokens:
        specials = special_ids(tool)
    for start in range(0, len(sentences), COUNT_CHUNK_SIZE):
        chunk = sentences[start : start + COUNT_CHUNK_SIZE]
        if tokenizer is not None:
            features = tool(chunk)
            ids = ops.convert_to_numpy(features["token_ids"])
            ids = ids[ops.convert_to_numpy(features["padding_mask"]).astype(bool)]
            if specials is not None:
                ids = ids[~np.isin(ids, specials)]
        else:
            ids = _flat_ids(tool(chunk))
        ids = ids.astype("int64")
        if len(ids) and ids.max() >= len(counts):
            counts = np.concatenate([counts, np.zeros(ids.max() + 1 - len(counts), "int64")])
        counts += np.bincount(ids, minlength=len(counts))
    return counts


def ranked_ids(counts):
    """Ids with a count, most frequent first, ties by smaller id."""
    ids = np.flatnonzero(counts > 0)
    return ids[np.argsort(-counts[ids], kind="stable")]


def as_counts(frequencies, name):
    """`frequencies` (an array or a mapping `{id: count}`) as a float64 count
    per id, checked."""
    if isinstance(frequencies, Mapping):
        if not frequencies:
            return np.zeros(0)
        ids = np.fromiter((int(i) for i in frequencies), "int64", len(frequencies))
        if ids.min() < 0:
            raise ValueError(f"{name} has a negative token id ({ids.min()}).")
        counts = np.zeros(ids.max() + 1)
        counts[ids] = [float(frequencies[i]) for i in frequencies]
    else:
        counts = np.asarray(frequencies, dtype="float64")
    if counts.ndim != 1:
        raise ValueError(f"{name} must be 1-D, a count per token id; got shape {counts.shape}.")
    if not np.all(np.isfinite(counts)) or np.any(counts < 0):
        raise ValueError(f"{name} must be finite and non-negative.")
    return counts


def special_ids(preprocessor):
    """The token ids `preprocessor` adds to an empty text (padding aside)."""
    empty = preprocessor([""])
    ids = ops.convert_to_numpy(empty["token_ids"])
    return np.unique(ids[ops.convert_to_numpy(empty["padding_mask"]).astype(bool)])


def _vocabulary_size(tokenizer):
    size = getattr(tokenizer, "vocabulary_size", None)
    return int(size()) if callable(size) else 0


def _flat_ids(tokens):
    if hasattr(tokens, "flat_values"):  # A tf.RaggedTensor.
        return np.asarray(tokens.flat_values).reshape(-1)
    tokens = ops.convert_to_numpy(tokens) if not isinstance(tokens, list) else tokens
    parts = [np.ravel(np.asarray(row)) for row in tokens]
    return np.concatenate(parts) if parts else np.zeros(0, "int64")
