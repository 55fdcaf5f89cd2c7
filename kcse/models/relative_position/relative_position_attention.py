"""Multi-head attention with NEZHA's relative or RoFormer's rotary positions."""

import math

import keras
import numpy as np
from keras import ops
from kcse.foundation import compat

POSITION_ENCODINGS = ("relative", "rotary")


def sinusoidal_table(rows, depth):
    """`table[p, 2i] = sin(p / 10000^(2i/depth))`, `table[p, 2i+1] = cos(...)`.

    The fixed sinusoid of NEZHA's relative positions (bert4keras'
    `Sinusoidal` initializer, HF `RelativePositionsEncoding`).
    """
    positions = np.arange(rows, dtype="float64")[:, None]
    frequencies = np.power(10000.0, -np.arange(0, depth, 2) / depth)
    table = np.zeros((rows, depth))
    table[:, 0::2] = np.sin(positions * frequencies)
    table[:, 1::2] = np.cos(positions * frequencies[: depth // 2])
    return table


@keras.saving.register_keras_serializable(package="kcse")
class RelativePositionAttention(keras.layers.MultiHeadAttention):
    """Self-attention that sees positions only through the attention itself.

    A `keras.layers.MultiHeadAttention` (same projections and weights, so it
    loads BERT-layout checkpoints the same way) with one of two position
    encodings, neither of which has trainable weights:

    - `"relative"` (NEZHA, functional relative positions): with
      `r_ij = S[clip(j - i, -m, m) + m]`, `S` a fixed sinusoid table of
      `2m + 1` rows and head width, the logits are
      `(q_i·k_j + q_i·r_ij) / sqrt(d)` and the output
      `o_i = Σ_j a_ij (v_j + r_ij)` (Shaw et al.; NEZHA uses m = 64).
    - `"rotary"` (RoFormer v1, Su Jianlin): queries and keys are rotated pair
      by pair, `(x_2i, x_2i+1)` by the angle `p / 10000^(2i/d)` at position p,
      so `q_i·k_j` depends on `j - i` only.

    Args:
        num_heads, key_dim, dropout, ...: as `keras.layers.MultiHeadAttention`.
        position_encoding: `"relative"` or `"rotary"`.
        max_relative_position: int. Clipping distance m of `"relative"`.

    Example:
    ```python
    import numpy as np
    import kcse
    attention = kcse.models.relative_position.RelativePositionAttention(
        num_heads=2, key_dim=4, position_encoding="rotary"
    )
    x = np.random.rand(1, 5, 8).astype("float32")
    y = attention(x, x)  # shape (1, 5, 8)
    assert y.shape == (1, 5, 8)
    ```
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        position_encoding="relative",
        max_relative_position=64,
        **kwargs,
    ):
        super().__init__(num_heads=num_heads, key_dim=key_dim, **kwargs)
        if position_encoding not in POSITION_ENCODINGS:
            raise ValueError(
                f"position_encoding must be one of {POSITION_ENCODINGS}; got "
                f"{position_encoding!r}."
            )
        if position_encoding == "rotary" and key_dim % 2:
            raise ValueError(f"rotary positions need an even key_dim; got {key_dim}.")
        self.position_encoding = position_encoding
        self.max_relative_position = max_relative_position
        self._relative_table = sinusoidal_table(
            2 * max_relative_position + 1, key_dim
        ).astype("float32")

    def _relative_embeddings(self, query_length, key_length):
        """`r[i, j]` for every query i and key j: (query, key, key_dim)."""
        distance = ops.expand_dims(ops.arange(key_length), 0) - ops.expand_dims(
            ops.arange(query_length), 1
        )
        limit = self.max_relative_position
        index = ops.clip(distance, -limit, limit) + limit
        table = ops.cast(self._relative_table, self.compute_dtype)
        return ops.take(table, index, axis=0)

    def _rotate(self, x):
        """Rotary positions on (batch, length, heads, key_dim) tensors."""
        length, depth = ops.shape(x)[1], self.key_dim
        positions = ops.cast(ops.arange(length), "float32")[:, None]
        frequencies = ops.power(
            10000.0, -ops.cast(ops.arange(0, depth, 2), "float32") / depth
        )
        angles = ops.repeat(positions * frequencies, 2, axis=-1)
        sin = ops.cast(ops.sin(angles), x.dtype)[None, :, None, :]
        cos = ops.cast(ops.cos(angles), x.dtype)[None, :, None, :]
        even, odd = x[..., 0::2], x[..., 1::2]
        rotated = ops.reshape(
            ops.stack([-odd, even], axis=-1), ops.shape(x)
        )
        return x * cos + rotated * sin

    def _compute_attention(
        self,
        query,
        key,
        value,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
        **kwargs,
    ):
        if self.position_encoding == "rotary":
            query, key = self._rotate(query), self._rotate(key)
        scores = ops.einsum("btnh,bsnh->bnts", query, key)
        if self.position_encoding == "relative":
            relative = self._relative_embeddings(
                ops.shape(query)[1], ops.shape(key)[1]
            )
            scores = scores + ops.einsum("btnh,tsh->bnts", query, relative)
        scores = scores / ops.cast(math.sqrt(self.key_dim), scores.dtype)
        scores = compat.masked_softmax(self, scores, attention_mask)
        probabilities = compat.attention_probability_dropout(self)(scores, training=training)
        output = ops.einsum("bnts,bsnh->btnh", probabilities, value)
        if self.position_encoding == "relative":
            output = output + ops.einsum(
                "bnts,tsh->btnh", probabilities, relative
            )
        return output, scores

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "position_encoding": self.position_encoding,
                "max_relative_position": self.max_relative_position,
            }
        )
        return config
