"""What the grid's columns share to score a cell: encoding the pairs of
every split at once, cosine Spearman per split, a summary over seeds, and
BERT-whitening fitted in float64 (columns b and c+w)."""

import keras
import numpy as np

from kcse.batched_prediction import predict_in_length_order
from kcse.evaluation.sts import cosine_scores
from kcse.evaluation.sts import sts_correlations
from kcse.experiments.protocols import SPLITS
from kcse.layers.whitening import whitening_kernel
from kcse.layers.whitening import whitening_statistics


def encode_splits(model, preprocessor, data, prefix, batch_size, splits=SPLITS):
    """Vectors of both sides of every pair of `splits`: `{split: (v1, v2)}`.

    A split the task does not have (`data[split]` is None) is left out.
    All sentences go through `predict_in_length_order` at once, so one
    sentence shared by several pairs or splits is encoded once. A model with
    a dict of outputs gives `{output: {split: (v1, v2)}}`.
    """
    texts, spans = [], {}
    for split in splits:
        pairs = data[split]
        if pairs is None:
            continue
        spans[split] = (len(texts), len(pairs))
        texts += [prefix + s for s in pairs.sentences1 + pairs.sentences2]
    vectors = predict_in_length_order(model, preprocessor, texts, batch_size)

    def by_split(array):
        return {
            split: (array[start : start + n], array[start + n : start + 2 * n])
            for split, (start, n) in spans.items()
        }

    if isinstance(vectors, dict):
        return {key: by_split(array) for key, array in vectors.items()}
    return by_split(vectors)


class EveryPooling(keras.Model):
    """One pass of a backbone, the vectors of several encoders' poolings.

    The encoders share the backbone; the output is `{pooling: vectors}`.
    The raw vectors of all poolings of a cell group cost one encoding.
    """

    def __init__(self, encoders, **kwargs):
        super().__init__(**kwargs)
        self.encoders = encoders

    def call(self, inputs):
        first = next(iter(self.encoders.values()))
        states = first.hidden_states(inputs)["hidden_states"]
        return {
            pooling: encoder.pool(states, inputs["padding_mask"])
            for pooling, encoder in self.encoders.items()
        }


def score_splits(data, vectors, transform=None):
    """`{split: {"spearman", "pearson", "n"}}` of cosine vs gold."""
    scores = {}
    for split, (v1, v2) in vectors.items():
        if transform is not None:
            v1, v2 = transform(v1), transform(v2)
        scores[split] = sts_correlations(data[split].scores, cosine_scores(v1, v2))
    return scores


def trained_summary(runs, scores="scores"):
    """Column c over seeds: per split, the mean and sample std of each score.

    The std is numpy's with `ddof=1` (None for a single run); `runs` is how
    many seeds it is over. `scores` names the runs' field summarised:
    `"scores"` (c) or `"whitened_scores"` (c+w).
    """
    summary = {}
    for split in runs[0][scores]:
        entry = {"n": runs[0][scores][split]["n"], "runs": len(runs)}
        for score in ("spearman", "pearson"):
            values = np.array([run[scores][split][score] for run in runs], "float64")
            entry[score] = float(values.mean())
            entry[f"{score}_std"] = float(values.std(ddof=1)) if len(runs) > 1 else None
        summary[split] = entry
    return summary


def whitening_vectors(vectors, splits):
    """Both sides of `splits` of `vectors` (`{split: (v1, v2)}`) in one
    array, the vectors a whitening is adapted on; None when `vectors` has
    none of the splits."""
    parts = [np.concatenate(vectors[split]) for split in splits if split in vectors]
    return np.concatenate(parts) if parts else None


def adapted_whitening(vectors):
    """BERT-whitening fitted on `vectors`, `(mean, kernel)`: `Whitening`'s
    statistics and kernel, in float64 with numpy as bojone's, on every
    backend (`whitened` applies them, also in numpy).

    LayerNorm'd vectors (P1, P3) have a direction of float-noise variance,
    which `Whitening` zeroes instead of scaling the noise up (its
    docstring), so the scores do not move with float precision or batch
    order; `null_directions(kernel)` says how many there were.
    """
    mean, covariance, _, _ = whitening_statistics(vectors)
    return mean, whitening_kernel(covariance)


def whitened(whitening):
    """A `score_splits` transform: `(v - mean) @ kernel` in float64."""
    mean, kernel = whitening
    return lambda v: (np.asarray(v, "float64") - mean) @ kernel
