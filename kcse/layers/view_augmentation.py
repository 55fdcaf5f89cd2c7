"""ConSERT's embedding-level views: shuffle, cutoffs, dropout, adversarial.

Every augmentation is active only in training and the identity otherwise,
touches only real tokens (`padding_mask` true), and draws its randomness
from its own `keras.random.SeedGenerator`, so a layer built with a fixed
`seed` makes the same views again. `TokenShuffle` acts before the embeddings
(it returns position ids); the others act on the embedding output (after
LayerNorm and dropout) and return `(embeddings, padding_mask)`, the mask
changed only by `SpanCutoff`; `AdversarialPerturbation` also takes the
gradient of a supervised loss. Counts are ConSERT's, rounded as its Python
code rounds them (yym6472/ConSERT `transformers/modeling_bert.py`):
`int(n · rate)` of the n real tokens, `int(dim · rate)` features,
`int(n · dim · rate)` elements.
"""

import functools

import keras
import numpy as np
from keras import ops

from kcse.foundation.validation import check_number
from kcse.foundation.validation import check_rate

# Added before flooring counts when the row length is not static: `int(n *
# rate)` computed in float32 must not lose one to rounding (10 * 0.7 =
# 6.9999995).
_COUNT_EPSILON = 1e-4


def _real_tokens(padding_mask):
    return ops.cast(padding_mask, "bool")


def _rank_of_random_keys(mask, seed_generator):
    """Per row, a random order of the real tokens: their ranks 0..n-1.

    Padding ranks after every real token.
    """
    keys = keras.random.uniform(ops.shape(mask), seed=seed_generator)
    keys = ops.where(mask, keys, 2.0)
    return ops.argsort(ops.argsort(keys, axis=-1), axis=-1)


@functools.lru_cache(maxsize=None)
def _count_table(size, rate):
    """`int(k * rate)` for k = 0..size, in Python floats as ConSERT computes it.

    (90 * 0.7 is 62.99999999999999 in float64, so ConSERT cuts 62 of 90.)
    """
    return np.array([int(k * rate) for k in range(size + 1)], "int32")


def _count(real, rate):
    """`int(n · rate)` per row, n the number of real tokens: (batch, 1)."""
    n = ops.sum(ops.cast(real, "int32"), axis=-1, keepdims=True)
    size = real.shape[-1]
    if size is None:
        scaled = ops.cast(n, "float32") * rate + _COUNT_EPSILON
        return ops.cast(ops.floor(scaled), "int32")
    return ops.take(_count_table(size, float(rate)), n)


class ViewAugmentation(keras.layers.Layer):
    """Base of the augmentations: a rate, a seed and a training switch."""

    def __init__(self, rate=0.1, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = check_rate(rate, f"{type(self).__name__} rate")
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, embeddings, padding_mask, training=None):
        if not training:
            return embeddings, padding_mask
        return self.augment(embeddings, _real_tokens(padding_mask), padding_mask)

    def augment(self, embeddings, real, padding_mask):
        raise NotImplementedError

    def get_config(self):
        config = super().get_config()
        config.update({"rate": self.rate, "seed": self.seed})
        return config


@keras.saving.register_keras_serializable(package="kcse")
class TokenShuffle(keras.layers.Layer):
    """Shuffles the position ids of the real tokens (ConSERT token shuffle).

    Token ids keep their order; the positions they are embedded at are
    permuted among the real tokens ([CLS] and [SEP] included), padding keeps
    its own. Called on the padding mask, it returns position ids
    `(batch, length)`: `0..length-1` when not training. Needs a backbone with
    absolute position embeddings (BERT, RoBERTa, XLM-R, E5).

    Args:
        seed: int or None. Seed of the permutations.

    Example:
    ```python
    import numpy as np
    import kcse
    shuffle = kcse.layers.TokenShuffle(seed=1)
    positions = shuffle(np.array([[1, 1, 1, 1, 0, 0]]), training=True)
    # e.g. [[2, 0, 3, 1, 4, 5]]
    positions = np.asarray(positions)
    assert sorted(positions[0, :4]) == [0, 1, 2, 3]  # real tokens permuted
    assert list(positions[0, 4:]) == [4, 5]  # padding keeps its positions
    ```
    """

    def __init__(self, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)

    def call(self, padding_mask, training=None):
        real = _real_tokens(padding_mask)
        length = ops.shape(real)[1]
        positions = ops.broadcast_to(
            ops.arange(length, dtype="int32")[None, :], ops.shape(real)
        )
        if not training:
            return positions
        # Real slots in index order, then padding; and in a random order.
        in_order = ops.argsort(ops.where(real, positions, positions + length), axis=-1)
        shuffled = ops.argsort(
            ops.where(
                real,
                keras.random.uniform(ops.shape(real), seed=self.seed_generator),
                2.0 + ops.cast(positions, "float32"),
            ),
            axis=-1,
        )
        # The k-th real slot (in index order) takes the k-th shuffled one.
        rank = ops.argsort(in_order, axis=-1)
        return ops.cast(ops.take_along_axis(shuffled, rank, axis=-1), "int32")

    def get_config(self):
        config = super().get_config()
        config.update({"seed": self.seed})
        return config


@keras.saving.register_keras_serializable(package="kcse")
class TokenCutoff(ViewAugmentation):
    """Zeroes `int(n · rate)` whole token rows among the n real tokens.

    Example:
    ```python
    import numpy as np
    import kcse
    cutoff = kcse.layers.TokenCutoff(rate=0.25, seed=1)
    x = np.ones((1, 6, 4), "float32")
    y, mask = cutoff(x, np.array([[1, 1, 1, 1, 0, 0]]), training=True)
    # one of the first four rows of y is zero
    zero_rows = np.all(np.asarray(y)[0] == 0, axis=-1)
    assert zero_rows[:4].sum() == 1 and not zero_rows[4:].any()
    ```
    """

    def augment(self, embeddings, real, padding_mask):
        ranks = _rank_of_random_keys(real, self.seed_generator)
        cut = ranks < _count(real, self.rate)
        keep = ops.cast(ops.logical_not(cut), embeddings.dtype)[..., None]
        return embeddings * keep, padding_mask


@keras.saving.register_keras_serializable(package="kcse")
class FeatureCutoff(ViewAugmentation):
    """Zeroes `int(dim · rate)` feature columns of each sentence's real tokens.

    Each sentence draws its own columns (ConSERT's default view pairs
    feature cutoff 0.2 with token shuffle).

    Example:
    ```python
    import numpy as np
    import kcse
    cutoff = kcse.layers.FeatureCutoff(rate=0.25, seed=1)
    x = np.ones((1, 3, 8), "float32")
    y, mask = cutoff(x, np.array([[1, 1, 0]]), training=True)
    # two of the 8 columns are zero in the first two rows
    zeros = (np.asarray(y)[0] == 0).sum(axis=-1)
    assert list(zeros) == [2, 2, 0]
    ```
    """

    def augment(self, embeddings, real, padding_mask):
        batch, dim = ops.shape(embeddings)[0], embeddings.shape[-1]
        keys = keras.random.uniform((batch, dim), seed=self.seed_generator)
        ranks = ops.argsort(ops.argsort(keys, axis=-1), axis=-1)
        cut_columns = ranks < int(dim * self.rate)
        cut = ops.logical_and(real[:, :, None], cut_columns[:, None, :])
        return embeddings * ops.cast(ops.logical_not(cut), embeddings.dtype), padding_mask


@keras.saving.register_keras_serializable(package="kcse")
class SpanCutoff(ViewAugmentation):
    """Keeps one contiguous span of `max(int(n · (1 − rate)), 1)` real tokens.

    The span starts at a uniformly drawn real token; every other token is
    zeroed and masked out of attention and pooling (the returned mask).

    Example:
    ```python
    import numpy as np
    import kcse
    cutoff = kcse.layers.SpanCutoff(rate=0.5, seed=1)
    x = np.ones((1, 6, 4), "float32")
    y, mask = cutoff(x, np.array([[1, 1, 1, 1, 0, 0]]), training=True)
    # mask holds two adjacent ones among the first four, e.g. [[0, 0, 1, 1, 0, 0]]
    kept = np.flatnonzero(np.asarray(mask)[0])
    assert len(kept) == 2 and kept[1] == kept[0] + 1 and kept[1] < 4
    ```
    """

    def augment(self, embeddings, real, padding_mask):
        n = ops.sum(ops.cast(real, "int32"), axis=-1, keepdims=True)
        span = ops.maximum(_count(real, 1.0 - self.rate), 1)
        room = ops.cast(ops.maximum(n - span + 1, 1), "float32")
        draw = keras.random.uniform(ops.shape(n), seed=self.seed_generator)
        start = ops.minimum(ops.cast(ops.floor(draw * room), "int32"), n - span)
        # Index of each real token among the real tokens of its row.
        index = ops.cumsum(ops.cast(real, "int32"), axis=-1) - 1
        kept = ops.logical_and(real, ops.logical_and(index >= start, index < start + span))
        cut = ops.logical_and(real, ops.logical_not(kept))
        keep = ops.cast(ops.logical_not(cut), embeddings.dtype)[..., None]
        return embeddings * keep, ops.cast(kept, padding_mask.dtype)


@keras.saving.register_keras_serializable(package="kcse")
class EmbeddingDropout(ViewAugmentation):
    """Zeroes `int(n · dim · rate)` elements of the n real tokens' embeddings.

    ConSERT's "dropout" view (`_cutoff_embeddings` with direction
    `"random"` in yym6472/ConSERT's `transformers/modeling_bert.py`): of the
    `n · dim` elements of a sentence's real tokens, exactly
    `int(n · dim · rate)` drawn without replacement are zeroed, and the kept
    values are not rescaled (unlike `keras.layers.Dropout`, which zeroes
    each element independently and rescales).

    Example:
    ```python
    import numpy as np
    import kcse
    dropout = kcse.layers.EmbeddingDropout(rate=0.1, seed=1)
    y, mask = dropout(np.ones((2, 4, 8), "float32"), np.ones((2, 4)), training=True)
    y = np.asarray(y)  # shape (2, 4, 8): 3 zeros per sentence, the rest stay 1
    assert list((y == 0).sum(axis=(1, 2))) == [3, 3]  # int(4 · 8 · 0.1)
    ```
    """

    def augment(self, embeddings, real, padding_mask):
        batch, length, dim = (
            ops.shape(embeddings)[0], ops.shape(embeddings)[1], embeddings.shape[-1]
        )
        elements = ops.broadcast_to(real[..., None], ops.shape(embeddings))
        elements = ops.reshape(elements, (batch, length * dim))
        ranks = _rank_of_random_keys(elements, self.seed_generator)
        cut = ranks < _count(elements, self.rate)
        cut = ops.reshape(cut, ops.shape(embeddings))
        return embeddings * ops.cast(ops.logical_not(cut), embeddings.dtype), padding_mask


@keras.saving.register_keras_serializable(package="kcse")
class AdversarialPerturbation(keras.layers.Layer):
    """ConSERT's adversarial view: embeddings + ε · g / (‖g‖ + 1e-10), token by token.

    g is the gradient of the supervised (NLI) loss with respect to the
    embedding output (fast gradient value), so this view needs labels:
    `kcse.ConSERT` computes g in its `"joint"` mode and passes it as
    `gradient`; the noise is not differentiated through (ConSERT's
    `AdvCLSoftmaxLoss.forward` detaches g and normalises it this way).
    Padding is never perturbed. Identity when not training.

    Args:
        noise_norm: float. ε, the L2 norm of each token's noise.

    Example:
    ```python
    import numpy as np
    import kcse
    view = kcse.layers.AdversarialPerturbation(noise_norm=0.5)
    x = np.ones((1, 3, 4), "float32")
    gradient = np.random.rand(1, 3, 4).astype("float32")
    y, mask = view(x, np.array([[1, 1, 0]]), gradient=gradient, training=True)
    noise = np.linalg.norm(np.asarray(y) - x, axis=-1)  # [[0.5, 0.5, 0.0]]
    assert np.allclose(noise, [[0.5, 0.5, 0.0]], atol=1e-5)
    ```
    """

    def __init__(self, noise_norm=1.0, **kwargs):
        super().__init__(**kwargs)
        self.noise_norm = check_number(noise_norm, "noise_norm", above=0)

    def call(self, embeddings, padding_mask, gradient=None, training=None):
        if not training:
            return embeddings, padding_mask
        if gradient is None:
            raise ValueError(
                "AdversarialPerturbation needs the gradient of a supervised "
                "loss: use it in kcse.ConSERT with mode='joint' and NLI labels."
            )
        real = ops.cast(padding_mask, embeddings.dtype)[..., None]
        # ConSERT's g / (‖g‖ + 1e-10) (`AdvCLSoftmaxLoss.forward`), in
        # float32, where 1e-10 is not 0 and a padding row's 0 / 1e-10 is 0.
        gradient = ops.cast(ops.stop_gradient(gradient), "float32")
        direction = gradient / (ops.norm(gradient, axis=-1, keepdims=True) + 1e-10)
        noise = self.noise_norm * ops.cast(direction, embeddings.dtype)
        return embeddings + noise * real, padding_mask

    def get_config(self):
        config = super().get_config()
        config.update({"noise_norm": self.noise_norm})
        return config
