"""BERT-whitening as a Keras layer with streaming statistics."""

import keras
import numpy as np
from keras import ops


def _batches(data):
    """Yields 2-D float64 numpy batches from an array, tensor or iterable."""
    if hasattr(data, "shape") and len(data.shape) == 2:
        yield np.asarray(data, dtype="float64")
        return
    if hasattr(data, "shape"):
        raise ValueError(
            f"Whitening.adapt expects vectors of shape (n, dim); got "
            f"shape {tuple(data.shape)}."
        )
    for batch in data:
        batch = np.asarray(keras.ops.convert_to_numpy(batch), dtype="float64")
        if batch.ndim == 1:
            batch = batch[None, :]
        if batch.ndim != 2:
            raise ValueError(
                "Whitening.adapt expects batches of shape (n, dim); got "
                f"shape {batch.shape}."
            )
        yield batch


def whitening_statistics(data):
    """Mean and unbiased covariance of a stream of vectors.

    Memory is O(dim²) whatever the number of vectors: only the count, the
    sum and the centred sum of products are kept (float64, merged batch by
    batch with Chan et al.'s update, so large means do not cancel).
    """
    count, mean, scatter = 0, None, None
    for batch in _batches(data):
        if batch.shape[0] == 0:
            continue
        if mean is None:
            mean = np.zeros(batch.shape[1])
            scatter = np.zeros((batch.shape[1], batch.shape[1]))
        elif batch.shape[1] != mean.shape[0]:
            raise ValueError(
                f"Whitening.adapt got vectors of dim {batch.shape[1]} after "
                f"vectors of dim {mean.shape[0]}."
            )
        n = batch.shape[0]
        batch_mean = batch.mean(axis=0)
        centred = batch - batch_mean
        delta = batch_mean - mean
        total = count + n
        scatter += centred.T @ centred + np.outer(delta, delta) * (
            count * n / total
        )
        mean += delta * (n / total)
        count = total
    if count < 2:
        raise ValueError(
            f"Whitening.adapt needs at least 2 vectors; got {count}."
        )
    return mean, scatter / (count - 1), count


@keras.saving.register_keras_serializable(package="kcse")
class Whitening(keras.layers.Layer):
    """BERT-whitening: `y = (x - mu) @ W`, fitted with `adapt`.

    `mu` is the mean of the adapted vectors and `W = U diag(1/sqrt(s))` from
    the SVD `U diag(s) U^T` of their (unbiased) covariance, as in
    bojone/BERT-whitening; the whitened vectors have identity covariance.
    With `n_components=k` only the first k columns of `W` are kept
    (dimension reduction to the k leading directions).

    `adapt(data)` streams: `data` can be an array of shape `(n, dim)`, or
    any iterable of such batches (a generator, a `tf.data.Dataset`), and
    memory stays O(dim²).

    As in bojone/BERT-whitening, a direction of tiny but non-zero variance
    is scaled up to unit variance like the others (LayerNorm outputs lie in
    a hyperplane, so BERT vectors always have one such direction); only an
    exactly zero variance among the kept directions is an error.

    Args:
        n_components: int or None. Output dimension; None keeps all.
        epsilon: float. Added to the singular values before the inverse
            square root, so a rank-deficient covariance stays finite.

    Example:
    ```python
    import numpy as np
    import kcse
    vectors = np.random.rand(1000, 16).astype("float32")
    whitening = kcse.layers.Whitening(n_components=8)
    whitening.adapt(vectors)
    whitened = np.asarray(whitening(vectors))  # shape (1000, 8)
    covariance = np.cov(whitened, rowvar=False)
    assert np.allclose(covariance, np.eye(8), atol=1e-3)  # ≈ identity
    ```
    """

    def __init__(self, n_components=None, epsilon=0.0, **kwargs):
        super().__init__(**kwargs)
        if n_components is not None and n_components < 1:
            raise ValueError(
                f"n_components must be a positive int or None; got "
                f"{n_components}."
            )
        self.n_components = n_components
        self.epsilon = epsilon
        self.mean = None
        self.kernel = None

    def build(self, input_shape):
        dim = input_shape[-1]
        if self.n_components is not None and self.n_components > dim:
            raise ValueError(
                f"n_components={self.n_components} exceeds the input "
                f"dimension {dim}."
            )
        units = self.n_components or dim
        self.mean = self.add_weight(
            shape=(dim,), initializer="zeros", trainable=False, name="mean"
        )
        self.kernel = self.add_weight(
            shape=(dim, units),
            initializer="identity",
            trainable=False,
            name="kernel",
        )

    def adapt(self, data):
        """Computes `mu` and `W` from `data` (array or iterable of batches)."""
        mean, covariance, _ = whitening_statistics(data)
        u, s, _ = np.linalg.svd(covariance)
        kept = self.n_components or len(s)
        u, s = u[:, :kept], s[:kept]
        if np.any(s + self.epsilon <= 0):
            raise ValueError(
                "The covariance of the adapted vectors is singular (a kept "
                "direction has zero variance); pass Whitening(epsilon=...), a "
                "smaller n_components, or adapt on more varied vectors."
            )
        kernel = u / np.sqrt(s + self.epsilon)
        if not self.built:
            self.build((None, mean.shape[0]))
        elif self.mean.shape[0] != mean.shape[0]:
            raise ValueError(
                f"Whitening was built for dim {self.mean.shape[0]}; adapted "
                f"vectors have dim {mean.shape[0]}."
            )
        self.mean.assign(mean.astype(self.mean.dtype))
        self.kernel.assign(kernel.astype(self.kernel.dtype))

    def call(self, inputs):
        inputs = ops.cast(inputs, self.compute_dtype)
        return ops.matmul(inputs - self.mean, self.kernel)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.n_components or input_shape[-1],)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"n_components": self.n_components, "epsilon": self.epsilon}
        )
        return config
