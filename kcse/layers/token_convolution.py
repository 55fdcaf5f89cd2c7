"""IS-BERT's CNN over token states: parallel 1-D convolutions, concatenated."""

import math

import keras
from keras import ops


def torch_uniform(fan_in, seed=None):
    """PyTorch's default `nn.Conv1d` / `nn.Linear` draw for both weight and
    bias: U(−1/√fan_in, 1/√fan_in) (`kaiming_uniform_(a=√5)`)."""
    bound = 1.0 / math.sqrt(fan_in)
    return keras.initializers.RandomUniform(-bound, bound, seed=seed)


@keras.saving.register_keras_serializable(package="kcse")
class TokenConvolution(keras.layers.Layer):
    """Per-token features from 1-D convolutions of widths `kernel_sizes`
    over the sequence, `filters` each, concatenated in that order.

    IS-BERT's CNN (Zhang et al., EMNLP 2020; yanzhangnlp/IS-BERT
    `sentence_transformers/models/CNN.py`): `nn.Conv1d(hidden, 256, k,
    padding=(k − 1) / 2)` for k = 1, 3, 5, no activation, no dropout, their
    outputs concatenated on the feature axis; each weight and bias drawn as
    PyTorch draws them, U(±1/√(hidden · k)). Its output has the sequence's
    length and `filters · len(kernel_sizes)` features.

    Called with a `padding_mask`, as `kcse.SentenceEncoder(token_layer=...)`
    calls it, the states of [PAD] positions are zeros to the convolutions:
    a sentence's features are those of the sentence alone, whatever its
    batch's padding. IS-BERT's code convolves over the [PAD] states too
    (each batch padded to its longest sentence), so there the last two
    tokens' features depend on the batch; called without a mask, the
    layer does that.

    Args:
        filters: int. Output channels of each convolution.
        kernel_sizes: odd ints. The convolutions' widths.
        seed: int or None. Seeds the weights' draw (each convolution's
            kernel and bias from its own offset of it).

    Example:
    ```python
    import numpy as np
    import kcse
    layer = kcse.layers.TokenConvolution(filters=4, kernel_sizes=(1, 3, 5))
    states = np.random.rand(2, 7, 8).astype("float32")
    assert layer(states).shape == (2, 7, 12)
    mask = np.array([[True] * 7, [True] * 4 + [False] * 3])
    alone = layer(states[1:, :4])  # the second sentence without its padding
    np.testing.assert_allclose(layer(states, mask)[1, :4], alone[0], atol=1e-5)
    ```
    """

    def __init__(self, filters=256, kernel_sizes=(1, 3, 5), seed=None, **kwargs):
        super().__init__(**kwargs)
        kernel_sizes = tuple(int(size) for size in kernel_sizes)
        if not kernel_sizes or any(size < 1 or size % 2 == 0 for size in kernel_sizes):
            raise ValueError(f"kernel_sizes must be odd positive ints; got {kernel_sizes}.")
        self.filters = int(filters)
        self.kernel_sizes = kernel_sizes
        self.seed = None if seed is None else int(seed)
        self.convolutions = []

    def build(self, input_shape):
        hidden = input_shape[-1]
        self.convolutions = [
            keras.layers.Conv1D(
                self.filters, size, padding="same",
                kernel_initializer=torch_uniform(hidden * size, self._seed(2 * index)),
                bias_initializer=torch_uniform(hidden * size, self._seed(2 * index + 1)),
                dtype=self.dtype_policy, name=f"convolution_{size}")
            for index, size in enumerate(self.kernel_sizes)
        ]
        for convolution in self.convolutions:
            convolution.build(input_shape)

    def _seed(self, offset):
        return None if self.seed is None else self.seed + offset

    def call(self, states, padding_mask=None):
        if padding_mask is not None:
            states = states * ops.cast(ops.expand_dims(padding_mask, -1), states.dtype)
        return ops.concatenate([convolution(states) for convolution in self.convolutions],
                               axis=-1)

    def compute_output_shape(self, input_shape):
        return (*input_shape[:-1], self.filters * len(self.kernel_sizes))

    def get_config(self):
        config = super().get_config()
        config.update({"filters": self.filters, "kernel_sizes": list(self.kernel_sizes),
                       "seed": self.seed})
        return config
