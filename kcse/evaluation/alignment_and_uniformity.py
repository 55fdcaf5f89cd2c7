"""Alignment and uniformity (Wang & Isola, 2020), as SimCSE reports them on STS-B.

Sources: SsnL/align_uniform `align_uniform/__init__.py` (`align_loss`,
`uniform_loss`); princeton-nlp/SimCSE releases no code for its
alignment/uniformity plot (its paper, Section 5, defines the pairs).
"""

import math
import numbers

import numpy as np

from kcse.evaluation.sts import as_sentence_pairs
from kcse.foundation.validation import check_count

# Rows per block of `uniformity`'s pairwise distances (float64).
UNIFORMITY_CHUNK = 1024


def alignment(x, y, alpha=2, normalize=True):
    """Alignment of positive pairs: mean of ||x_i - y_i||^alpha.

    Wang & Isola (2020), SsnL/align_uniform `align_uniform/__init__.py`,
    `align_loss(x, y, alpha=2)`: `(x - y).norm(p=2, dim=1).pow(alpha).mean()`.
    The metric is defined on the unit hypersphere: rows are L2-normalised
    first (as `torch.nn.functional.normalize`, norms clamped at 1e-12)
    unless `normalize=False`. Lower is better aligned (0 to 4 for
    `alpha=2`). Computed in float64.

    Args:
        x, y: arrays `(n, dim)`, row i of each a positive pair; n >= 1.
        alpha: positive number.
        normalize: bool. L2-normalise rows first.

    Returns:
        A float.

    Raises:
        ValueError: shapes differ or are not 2-D with a row; a value is not
            finite; `alpha` is not positive.

    Example:
    ```python
    import numpy as np
    import kcse

    x = np.array([[1.0, 0.0], [0.0, 2.0]])
    y = np.array([[0.0, 1.0], [0.0, 1.0]])
    kcse.evaluation.alignment(x, y)  # 1.0: distances^2 are 2 and 0
    ```
    """
    x = _check_vectors(x, "x")
    y = _check_vectors(y, "y")
    if x.shape != y.shape:
        raise ValueError(f"x and y must have one shape; got {x.shape} and {y.shape}.")
    alpha = _positive(alpha, "alpha")
    if normalize:
        x, y = _normalized(x), _normalized(y)
    return float(np.mean(np.linalg.norm(x - y, axis=1) ** alpha))


def uniformity(x, t=2, normalize=True):
    """Uniformity: log of the mean of exp(-t ||x_i - x_j||^2) over pairs i < j.

    Wang & Isola (2020), SsnL/align_uniform `align_uniform/__init__.py`,
    `uniform_loss(x, t=2)`:
    `torch.pdist(x, p=2).pow(2).mul(-t).exp().mean().log()`, every
    distinct pair once. Rows are L2-normalised first unless
    `normalize=False`. Lower is more uniform (about -4 for `t=2` and many
    points spread evenly on a high-dimensional sphere). Computed in float64
    blocks of `UNIFORMITY_CHUNK` rows with a running log-sum-exp, so
    memory is flat in n and nothing underflows.

    Args:
        x: array `(n, dim)`, n >= 2.
        t: positive number.
        normalize: bool. L2-normalise rows first.

    Returns:
        A float.

    Raises:
        ValueError: `x` is not 2-D with at least 2 rows, a value is not
            finite, or `t` is not positive.

    Example:
    ```python
    import numpy as np
    import kcse

    x = np.array([[1.0, 0.0], [-1.0, 0.0]])  # antipodal: distance^2 is 4
    kcse.evaluation.uniformity(x)  # -8.0
    ```
    """
    x = _check_vectors(x, "x")
    if len(x) < 2:
        raise ValueError(f"uniformity needs at least 2 vectors; got {len(x)}.")
    t = _positive(t, "t")
    if normalize:
        x = _normalized(x)
    squares = (x * x).sum(axis=1)
    peak, total, pairs = -math.inf, 0.0, 0
    for start in range(0, len(x) - 1, UNIFORMITY_CHUNK):
        stop = min(start + UNIFORMITY_CHUNK, len(x))
        block = x[start:stop]
        distances = squares[start:stop, None] + squares[None, start:] - 2 * block @ x[start:].T
        upper = np.arange(start, len(x))[None, :] > np.arange(start, stop)[:, None]
        exponents = -t * np.maximum(distances[upper], 0.0)
        if not len(exponents):
            continue
        block_peak = exponents.max()
        if block_peak > peak:
            total *= math.exp(peak - block_peak) if total else 0.0
            peak = block_peak
        total += float(np.exp(exponents - peak).sum())
        pairs += len(exponents)
    return float(peak + math.log(total / pairs))


def alignment_uniformity(
    encoder_or_vectors, pairs_or_path, threshold=4.0, alpha=2, t=2, batch_size=64
):
    """SimCSE's alignment and uniformity of an encoder on labelled pairs.

    Gao et al. (2021), Section 5: alignment over the positive pairs, the
    pairs whose gold score is above `threshold` (4 on STS-B's 0-5 scale),
    and uniformity over all the sentences (each distinct sentence once;
    SimCSE's repository has no code for it). Vectors are L2-normalised
    (`alignment`, `uniformity`).

    Args:
        encoder_or_vectors: anything with `encode(list_of_str,
            batch_size=...)` such as `kcse.SentenceEncoder`; or a pair of
            arrays `(vectors1, vectors2)`, the pairs' vectors in order (then
            uniformity is over their rows, duplicates included).
        pairs_or_path: a file path, a `kcse.data.SentencePairs` or
            `(sentences1, sentences2, scores)`.
        threshold: number. Pairs scored strictly above it are positives.
        alpha, t: the exponents of `alignment` and `uniformity`.
        batch_size: int >= 1. Sentences per encoding batch.

    Returns:
        A dict: `"alignment"` (None when no pair is above `threshold`),
        `"uniformity"`, `"positive_pairs"`, `"sentences"` (vectors in the
        uniformity).

    Raises:
        ValueError: sides and scores differ in length, vectors are not
            finite or do not match the pairs, fewer than 2 sentences.

    Example:
    ```python
    import keras_hub
    import kcse

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                  "a", "cat", "dog", "sat", "ran", "the"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="last_avg")
    pairs = (["the cat sat", "a dog ran", "the cat ran"],
             ["a cat sat", "the dog ran", "a dog sat"], [5, 4, 1])
    result = kcse.evaluation.alignment_uniformity(encoder, pairs)
    result["positive_pairs"], result["sentences"]  # (1, 6)
    ```
    """
    pairs = as_sentence_pairs(pairs_or_path)
    threshold = float(threshold)
    positive = pairs.scores > threshold
    if isinstance(encoder_or_vectors, (tuple, list)) and len(encoder_or_vectors) == 2:
        vectors1 = _check_vectors(encoder_or_vectors[0], "vectors1")
        vectors2 = _check_vectors(encoder_or_vectors[1], "vectors2")
        if len(vectors1) != len(pairs) or vectors1.shape != vectors2.shape:
            raise ValueError(
                f"The vectors {vectors1.shape} and {vectors2.shape} must have one row "
                f"per pair ({len(pairs)})."
            )
        everything = np.concatenate([vectors1, vectors2])
    else:
        batch_size = check_count(batch_size, "batch_size")
        unique, inverse = np.unique(
            np.asarray(pairs.sentences1 + pairs.sentences2, dtype=object), return_inverse=True
        )
        everything = _check_vectors(
            encoder_or_vectors.encode(list(unique), batch_size=batch_size), "encoded vectors"
        )
        inverse = inverse.reshape(-1)
        vectors1 = everything[inverse[: len(pairs)]]
        vectors2 = everything[inverse[len(pairs) :]]
    return {
        "alignment": (
            alignment(vectors1[positive], vectors2[positive], alpha=alpha)
            if positive.any() else None
        ),
        "uniformity": uniformity(everything, t=t),
        "positive_pairs": int(positive.sum()),
        "sentences": int(len(everything)),
    }


def _check_vectors(vectors, name):
    vectors = np.asarray(vectors, dtype="float64")
    if vectors.ndim != 2 or len(vectors) == 0:
        raise ValueError(f"{name} must be a 2-D array with a row; got shape {vectors.shape}.")
    if not np.all(np.isfinite(vectors)):
        raise ValueError(f"{name} has non-finite values (NaN or infinite).")
    return vectors


def _positive(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name} must be a positive number; got {value!r}.")
    return float(value)


def _normalized(x):
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
