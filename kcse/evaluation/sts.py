"""Semantic textual similarity evaluation: Spearman of cosine vs gold."""

import os

import numpy as np
import scipy.stats

from kcse.data.sentence_pairs import SentencePairs
from kcse.data.sentence_pairs import read_pairs


def as_sentence_pairs(pairs_or_path):
    """A `SentencePairs` from a path, a `SentencePairs`, or a tuple.

    The tuple is `(sentences1, sentences2, scores)`.
    """
    if isinstance(pairs_or_path, SentencePairs):
        return pairs_or_path
    if isinstance(pairs_or_path, (str, os.PathLike)):
        return read_pairs(pairs_or_path)
    sentences1, sentences2, scores = pairs_or_path
    if not len(sentences1) == len(sentences2) == len(scores):
        raise ValueError(
            f"sentences1, sentences2 and scores differ in length: "
            f"{len(sentences1)}, {len(sentences2)}, {len(scores)}."
        )
    return SentencePairs(
        list(sentences1), list(sentences2), np.asarray(scores, "float64")
    )


def cosine_scores(vectors1, vectors2):
    """Row-wise cosine similarity of two `(n, dim)` arrays."""
    vectors1 = np.asarray(vectors1, "float64")
    vectors2 = np.asarray(vectors2, "float64")
    norms = np.linalg.norm(vectors1, axis=1) * np.linalg.norm(vectors2, axis=1)
    return (vectors1 * vectors2).sum(axis=1) / np.maximum(norms, 1e-12)


def sts_correlations(gold, predicted):
    """Spearman and Pearson correlations, both ×100, and the pair count."""
    if len(gold) < 2:
        raise ValueError(f"STS evaluation needs at least 2 pairs; got {len(gold)}.")
    return {
        "spearman": 100.0 * float(scipy.stats.spearmanr(gold, predicted)[0]),
        "pearson": 100.0 * float(scipy.stats.pearsonr(gold, predicted)[0]),
        "n": int(len(gold)),
    }


def evaluate_sts(encoder, pairs_or_path, batch_size=64):
    """Scores `encoder` on labelled sentence pairs.

    Both sides are encoded with `encoder.encode`, compared by cosine
    similarity, and correlated with the gold scores.

    Args:
        encoder: anything with `encode(list_of_str, batch_size=...)`, such
            as `kcse.SentenceEncoder`.
        pairs_or_path: a file path (any layout `kcse.data.read_pairs` reads),
            a `kcse.data.SentencePairs`, or `(sentences1, sentences2, scores)`.
        batch_size: int. Sentences per encoding batch.

    Returns:
        A dict: `"spearman"` and `"pearson"` correlations multiplied by 100
        (the convention of SimCSE papers and Su Jianlin's tables: 82.03
        means ρ = 0.8203), and `"n"`, the number of pairs.

    Example:
    ```python
    result = kcse.evaluation.evaluate_sts(encoder, "STS-B/STS-B.test.data")
    print(f"{result['spearman']:.2f} on {result['n']} pairs")
    ```
    """
    pairs = as_sentence_pairs(pairs_or_path)
    count = len(pairs)
    vectors = encoder.encode(
        pairs.sentences1 + pairs.sentences2, batch_size=batch_size
    )
    predicted = cosine_scores(vectors[:count], vectors[count:])
    return sts_correlations(pairs.scores, predicted)
