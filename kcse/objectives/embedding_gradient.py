"""The gradient of a loss with respect to a tensor inside a train step, per backend.

Keras 3 has no backend-neutral gradient API, and ConSERT's adversarial view
needs one inside the step: the gradient of the NLI loss with respect to the
embedding output (`kcse.ConSERT`). `gradient_of` is the one place that
takes it: `tf.GradientTape` on TensorFlow, `jax.grad` on JAX (inside the
traced, stateless train step: the function's other inputs, the variables
and the dropout seeds, are closed over, and the seeds it draws are
recorded in the step's state as any layer's are). What is done with the
gradient is backend-neutral `keras.ops` (`kcse.layers.AdversarialPerturbation`).

Example:

```python
import numpy as np
from keras import ops
from kcse.objectives.embedding_gradient import gradient_of

x = np.array([[1.0, 2.0], [3.0, 4.0]], "float32")
gradient = gradient_of(lambda x: ops.sum(ops.square(x)), x)
assert np.allclose(ops.convert_to_numpy(gradient), 2 * x)
```
"""

import keras
from keras import ops

# The backends `gradient_of` takes gradients on.
GRADIENT_BACKENDS = ("tensorflow", "jax")


def check_gradient_backend(feature):
    """Raises ValueError naming `feature` on a backend `gradient_of` cannot use."""
    backend = keras.config.backend()
    if backend not in GRADIENT_BACKENDS:
        raise ValueError(
            f"{feature} takes a gradient inside the train step, which kcse does "
            f"on the TensorFlow and JAX backends; this is {backend!r}."
        )


def gradient_of(loss_function, x):
    """d loss_function(x) / dx, a tensor of x's shape and dtype.

    `loss_function` maps `x` to a scalar loss; it may call layers (with
    dropout) and read variables. The result is a constant: nothing is
    differentiated through it.
    """
    backend = keras.config.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        x = tf.convert_to_tensor(x)
        with tf.GradientTape() as tape:
            tape.watch(x)
            loss = loss_function(x)
        return tf.stop_gradient(tape.gradient(loss, x))
    if backend == "jax":
        import jax

        return jax.lax.stop_gradient(jax.grad(loss_function)(ops.convert_to_tensor(x)))
    check_gradient_backend("gradient_of")
