"""A keras-hub TransformerEncoder whose attention uses relative positions."""

import keras
import keras_hub

from kcse.models.relative_position.relative_position_attention import RelativePositionAttention
from kcse.foundation import compat


@keras.saving.register_keras_serializable(package="kcse")
class RelativeTransformerEncoder(keras_hub.layers.TransformerEncoder):
    """`keras_hub.layers.TransformerEncoder` with `RelativePositionAttention`.

    Everything but the attention is keras-hub's block (post-LayerNorm as in
    BERT, feed-forward, dropouts, weight names), so NEZHA and RoFormer
    checkpoints map onto it exactly as BERT's do.

    Args:
        position_encoding: `"relative"` (NEZHA) or `"rotary"` (RoFormer).
        max_relative_position: clipping distance for `"relative"`.
        **kwargs: as `keras_hub.layers.TransformerEncoder`.

    Example:
    ```python
    import numpy as np
    import kcse
    block = kcse.models.relative_position.RelativeTransformerEncoder(
        intermediate_dim=16, num_heads=2, position_encoding="relative"
    )
    y = block(np.random.rand(1, 5, 8).astype("float32"))  # (1, 5, 8)
    assert y.shape == (1, 5, 8)
    ```
    """

    def __init__(
        self, position_encoding="relative", max_relative_position=64, **kwargs
    ):
        super().__init__(**kwargs)
        self.position_encoding = position_encoding
        self.max_relative_position = max_relative_position

    def build(self, inputs_shape):
        super().build(inputs_shape)
        # Swap keras-hub's attention for ours, with the same name and shapes.
        attention = compat.transformer_block_parts(self)["attention"]
        settings = attention.get_config()
        relative_attention = RelativePositionAttention(
            num_heads=self.num_heads,
            key_dim=attention.key_dim,
            position_encoding=self.position_encoding,
            max_relative_position=self.max_relative_position,
            dropout=self.dropout,
            kernel_initializer=keras.initializers.get(settings["kernel_initializer"]),
            bias_initializer=keras.initializers.get(settings["bias_initializer"]),
            dtype=self.dtype_policy,
            name="self_attention_layer",
        )
        relative_attention.build(query_shape=inputs_shape, value_shape=inputs_shape)
        compat.replace_self_attention(self, relative_attention)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "position_encoding": self.position_encoding,
                "max_relative_position": self.max_relative_position,
            }
        )
        return config
