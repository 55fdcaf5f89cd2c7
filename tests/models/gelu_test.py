"""kcse's GELUs against PyTorch's (an independent implementation).

`torch.nn.functional.gelu` (approximate "none" and "tanh") is what Hugging
Face runs for `hidden_act` "gelu" and "gelu_new"; its forward values and its
autograd gradient are the references.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
import torch

from kcse.models.gelu import gelu
from kcse.models.gelu import gelu_tanh

CASES = [(gelu, "none"), (gelu_tanh, "tanh")]
POINTS = np.concatenate(
    [np.linspace(-10, 10, 4001), [-40.0, -6.5, -1e-3, 0.0, 1e-3, 6.5, 40.0]]
).astype("float32")


def torch_values_and_gradient(x, approximate):
    tensor = torch.tensor(x, requires_grad=True)
    values = torch.nn.functional.gelu(tensor, approximate=approximate)
    values.backward(torch.ones_like(values))
    return values.detach().numpy(), tensor.grad.numpy()


@pytest.mark.parametrize("function, approximate", CASES)
def test_values_and_gradient_equal_torch(function, approximate):
    reference_values, reference_gradient = torch_values_and_gradient(POINTS, approximate)
    x = tf.constant(POINTS)
    upstream = tf.constant(np.linspace(-2, 2, len(POINTS)).astype("float32"))
    with tf.GradientTape() as tape:
        tape.watch(x)
        values = function(x)
    gradient = tape.gradient(values, x, output_gradients=upstream)
    # 1 + erf / 1 + tanh cancel for x in [-10, -3]: each float32 value is off
    # by up to ~eps * |x| = 1.2e-6 there (9.5e-7 apart measured).
    np.testing.assert_allclose(values, reference_values, rtol=1e-6, atol=5e-6)
    # 1 - tanh^2 cancels likewise, times 0.5 x du/dx (<= 11) and the upstream
    # (<= 2): ~eps * 22 = 2.6e-6 a rounding (3.7e-6 apart measured).
    np.testing.assert_allclose(
        gradient, upstream.numpy() * reference_gradient, rtol=1e-5, atol=4e-5
    )
    # The gradient at a point is no constant: the test could fail.
    assert np.ptp(reference_gradient) > 1.0


@pytest.mark.parametrize("function, approximate", CASES)
def test_forward_values_are_keras_gelu(function, approximate):
    expected = keras.activations.gelu(POINTS, approximate=approximate == "tanh")
    np.testing.assert_array_equal(np.asarray(function(POINTS)), np.asarray(expected))


@pytest.mark.parametrize("function", [gelu, gelu_tanh])
def test_serializes_by_registered_name(function):
    config = keras.activations.serialize(function)
    assert keras.activations.deserialize(config) is function
