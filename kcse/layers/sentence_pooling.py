"""Pooling of per-layer token states into one vector per sentence."""

import keras
from keras import ops

# The pooling names are Keras-free, in pooling_rules (the commands check
# --pooling with them before TensorFlow starts).
from kcse.layers.pooling_rules import resolve_pooling
from kcse.layers.wk_pooling import wk_pool


def masked_mean(states, padding_mask):
    """Mean over the real tokens of `states` (batch, length, dim).

    A row with no real token averages to zeros.
    """
    mask = ops.cast(ops.expand_dims(padding_mask, -1), states.dtype)
    total = ops.sum(states * mask, axis=1)
    count = ops.maximum(ops.sum(mask, axis=1), 1.0)
    return total / count


def masked_max(states, padding_mask):
    """Feature-wise max over the real tokens of `states`.

    Padding never wins: padded positions are replaced by a value near the
    dtype's lowest, which is what a row with no real token gives.
    """
    mask = ops.expand_dims(ops.cast(padding_mask, "bool"), -1)
    lowest = -65504.0 if states.dtype == "float16" else -3.0e38
    lowest = ops.cast(lowest, states.dtype)
    return ops.max(ops.where(mask, states, lowest), axis=1)


@keras.saving.register_keras_serializable(package="kcse")
class SentencePooling(keras.layers.Layer):
    """Pools the hidden states of a transformer into sentence vectors.

    The layer takes the list of per-layer states of a BERT-style backbone,
    `hidden_states[0]` being the embedding output and `hidden_states[i]` the
    output of transformer block `i`, and the padding mask. Padding never
    counts in averages or maxima.

    Modes:
    - `"cls"` (P1): the last layer's first token.
    - `"last_avg"` (P3): mean of the last layer over real tokens.
    - `"first_last_avg"` (P4): mean of the averaged outputs of transformer
      block 1 (not the embeddings) and of the last block.
    - `"last2avg"`: mean of the averaged outputs of the last two blocks.
    - `"max"`: feature-wise max of the last layer over real tokens.
    - `"wk"`: SBERT-WK (Wang & Kuo 2020) with the authors' defaults, layers
      from hidden state 4 on and a context window of 2 layers: see
      `kcse.layers.WKPooling` (needs at least 7 hidden states, 6 blocks).

    `"pooler"` (P2) needs the backbone's pretrained pooler weights and is
    applied by `kcse.SentenceEncoder`, not by this layer.

    Args:
        mode: str. One of the modes above or an alias `"P1"`, `"P3"`, `"P4"`.

    Example:
    ```python
    import numpy as np
    import kcse
    pooling = kcse.layers.SentencePooling("first_last_avg")
    states = [np.random.rand(2, 5, 8).astype("float32") for _ in range(3)]
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    vectors = pooling(states, mask)
    assert vectors.shape == (2, 8)
    ```
    """

    def __init__(self, mode="cls", **kwargs):
        kwargs.setdefault("dtype", "float32")  # Sums in float32 under mixed precision.
        super().__init__(**kwargs)
        self.mode = resolve_pooling(mode)
        if self.mode == "pooler":
            raise ValueError(
                "SentencePooling does not apply the pretrained pooler; use "
                "kcse.SentenceEncoder(pooling='pooler')."
            )

    def call(self, hidden_states, padding_mask):
        last = hidden_states[-1]
        if self.mode == "cls":
            return last[:, 0, :]
        if self.mode == "last_avg":
            return masked_mean(last, padding_mask)
        if self.mode == "max":
            return masked_max(last, padding_mask)
        if self.mode == "wk":
            return wk_pool(hidden_states, padding_mask)
        if len(hidden_states) < 3:
            raise ValueError(
                f"Pooling {self.mode!r} needs at least two transformer "
                f"blocks; got {len(hidden_states) - 1}."
            )
        if self.mode == "first_last_avg":
            first = hidden_states[1]
        else:  # last2avg
            first = hidden_states[-2]
        return (
            masked_mean(first, padding_mask) + masked_mean(last, padding_mask)
        ) / 2.0

    def compute_output_shape(self, hidden_states_shape, padding_mask_shape):
        last = hidden_states_shape[-1]
        return (last[0], last[-1])

    def get_config(self):
        config = super().get_config()
        config.update({"mode": self.mode})
        return config
