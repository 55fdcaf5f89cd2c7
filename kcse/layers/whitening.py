"""BERT-whitening as a Keras layer with streaming statistics."""

import keras
import numpy as np
from keras import ops

from kcse.foundation.validation import check_count
from kcse.foundation.validation import check_dtype_available
from kcse.foundation.validation import check_finite
from kcse.foundation.validation import check_number
from kcse.foundation.validation import largest_magnitude


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

    Returns `(mean, covariance, count, largest)`, `largest` the
    `(|value|, row, column)` of the largest magnitude in the vectors.

    Raises:
        ValueError: a batch holds NaN or inf (checked before it is used),
            or the vectors overflow float64 when squared (the mean or the
            sum of products is not finite); and the shape errors.
    """
    streamed = not (hasattr(data, "shape") and len(data.shape) == 2)
    count, mean, scatter, largest = 0, None, None, None
    for batch in _batches(data):
        if batch.shape[0] == 0:
            continue
        check_finite(batch, "Whitening.adapt", count, streamed)
        batch_largest = largest_magnitude(batch)
        if largest is None or batch_largest[0] > largest[0]:
            largest = (batch_largest[0], count + batch_largest[1],
                       batch_largest[2])
        if mean is None:
            mean = np.zeros(batch.shape[1])
            scatter = np.zeros((batch.shape[1], batch.shape[1]))
        elif batch.shape[1] != mean.shape[0]:
            raise ValueError(
                f"Whitening.adapt got vectors of dim {batch.shape[1]} after "
                f"vectors of dim {mean.shape[0]}."
            )
        n = batch.shape[0]
        total = count + n
        with np.errstate(over="ignore", invalid="ignore"):  # Checked below.
            batch_mean = batch.mean(axis=0)
            centred = batch - batch_mean
            delta = batch_mean - mean
            scatter += centred.T @ centred + np.outer(delta, delta) * (
                count * n / total
            )
            mean += delta * (n / total)
        count = total
        if not (np.isfinite(mean).all() and np.isfinite(scatter).all()):
            # Read so far: with a stream, `largest` is of rows 0..count-1.
            rows = f" of rows 0 to {count - 1}" if streamed else ""
            raise ValueError(
                "Whitening.adapt: the vectors overflow float64 when squared "
                "(their covariance is not finite): the largest "
                f"|value|{rows} is {largest[0]:.3g}, at "
                f"row {largest[1]}, column {largest[2]}. Deviations from the "
                f"mean must stay well below sqrt(float64 max) = "
                f"{_SQRT_FLOAT64_MAX:.3g}; rescale the vectors."
            )
    if count < 2:
        raise ValueError(
            f"Whitening.adapt needs at least 2 vectors; got {count}."
        )
    return mean, scatter / (count - 1), count, largest


# Deviations above this overflow float64 when squared.
_SQRT_FLOAT64_MAX = float(np.sqrt(np.finfo("float64").max))


# Machine epsilon of float32, the precision kcse's models compute vectors in
# and the Whitening layer's default dtype.
FLOAT32_EPS = float(np.finfo("float32").eps)


def default_null_tolerance(dim):
    """`dim * eps(float32)`: the relative standard deviation below which a
    direction of `dim`-dimensional vectors is numerically null."""
    return dim * FLOAT32_EPS


def whitening_kernel(covariance, n_components=None, epsilon=0.0,
                     null_tolerance=None):
    """`W` of `Whitening` from a covariance, in float64 with numpy.

    bojone's `U diag(1/sqrt(s + epsilon))` from the SVD of `covariance`,
    the columns of null directions zero, the first `n_components` kept
    (the arguments as `Whitening`'s). `y = (x - mean) @ W` whitens.

    Raises:
        ValueError: the covariance is zero (all vectors equal).

    Example:
    ```python
    import numpy as np
    from kcse.layers.whitening import whitening_kernel
    from kcse.layers.whitening import whitening_statistics

    vectors = np.random.default_rng(0).normal(size=(500, 8))
    mean, covariance, _, _ = whitening_statistics(vectors)
    whitened = (vectors - mean) @ whitening_kernel(covariance)
    assert np.allclose(np.cov(whitened, rowvar=False), np.eye(8))
    ```
    """
    u, s, _ = np.linalg.svd(np.asarray(covariance, "float64"))
    if not s[0] > 0:
        raise ValueError(
            "The adapted vectors are all equal (zero covariance): there "
            "is nothing to whiten."
        )
    if null_tolerance is None:
        null_tolerance = default_null_tolerance(len(s))
    # sqrt(s_i) <= tolerance * sqrt(s_1), squared.
    null = s <= null_tolerance**2 * s[0]
    kept = n_components or len(s)
    u, s, null = u[:, :kept], s[:kept], null[:kept]
    scale = np.zeros(kept)
    scale[~null] = 1 / np.sqrt(s[~null] + epsilon)
    return u * scale


def null_directions(kernel):
    """How many columns of a whitening kernel `W` are zero (null directions)."""
    return int(np.sum(~np.any(np.asarray(kernel) != 0, axis=0)))


@keras.saving.register_keras_serializable(package="kcse")
class Whitening(keras.layers.Layer):
    """BERT-whitening: `y = (x - mu) @ W`, fitted with `adapt`.

    `mu` is the mean of the adapted vectors and `W = U diag(1/sqrt(s))` from
    the SVD `U diag(s) U^T` of their (unbiased) covariance, as in
    bojone/BERT-whitening (`compute_kernel_bias`); the whitened vectors have
    identity covariance (on the directions that are not null, below). With `n_components=k` only the first k columns of
    `W` are kept (dimension reduction to the k leading directions).

    `adapt(data)` streams: `data` can be an array of shape `(n, dim)`, or
    any iterable of such batches (a generator, a `tf.data.Dataset`), and
    memory stays O(dim²). The statistics (mean, covariance, SVD, kernel)
    are computed in float64 with numpy on the host, whatever the backend
    and the layer's dtype, and stored in the layer's dtype (float32 by
    default), which `call` computes in: the same vectors give the same
    weights and outputs on TensorFlow and JAX. `dtype="float64"` on JAX
    needs its 64-bit mode (`jax_enable_x64`); without it the layer raises
    `ValueError` rather than compute in float32.

    Numerically null directions. LayerNorm outputs lie on a hyperplane
    (`sum((x - beta) / gamma) = 0`), and so do their cls or mean-pooled
    vectors: their covariance has an eigenvalue that is float rounding
    (a variance ~1e-15 of the largest on multilingual-e5-small's cls and
    mean-pooled vectors, against ~1e-5 for the smallest real one).
    bojone's formula scales it by `1/sqrt(s)` ~ 1e8 to unit variance, so
    that coordinate, pure rounding noise, weighs in the cosine as much as a
    real direction, and the scores change with the float precision of the
    input and of the layer, and with the batch order of `adapt` (by 0.1 to
    0.3 Spearman points on Chinese STS-B with e5's mean pooling). Here a direction `i` is *null* when its standard deviation is
    at most `null_tolerance` times the largest one:

        sqrt(s_i) <= null_tolerance * sqrt(s_1),
        null_tolerance = dim * eps(float32) by default (4.6e-5 for dim 384,
        9.2e-5 for dim 768),

    numpy's `matrix_rank` rule (`S.max() * max(M, N) * eps`) applied to the
    centred vectors, whose singular values are proportional to these
    standard deviations, with the dimension for `max(M, N)` (each vector's
    rounding accumulates over its `dim` coordinates; the number of vectors
    only averages it) and float32's epsilon whatever the dtype of `data`:
    vectors computed in float32 and handed over as float64 still carry
    float32 rounding, so float32 and float64 input give the same null
    directions. A null direction's column of `W` is set to zero: it adds
    nothing to the output, so no noise reaches a cosine, and the output
    keeps its width (that coordinate is 0). Every other direction keeps
    bojone's formula. A direction of tiny but real variance (above the
    tolerance) is whitened like the others. `null_directions` says how many
    kept directions were treated so (the zero columns of `W`, so it is
    also right after loading a saved layer).

    Args:
        n_components: int or None. Output dimension; None keeps all. Null
            directions come last (smallest variance); if `n_components`
            keeps some, their columns are zero, as without it: use
            `n_components <= dim - null_directions` to drop them.
        epsilon: float >= 0. Added to the variance of every non-null
            direction before the inverse square root (`1/sqrt(s + epsilon)`,
            a regularisation as in ZCA whitening); 0 is bojone's formula.
            It does not change which directions are null.
        null_tolerance: float in [0, 1) or None. Relative standard
            deviation at or below which a direction is null; None (default)
            is `dim * eps(float32)`. For vectors computed in a lower
            precision (float16, bfloat16) pass a tolerance matched to it;
            0 treats exactly-zero variances only (a constant coordinate)
            and whitens every other direction, as bojone does.

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

    # Vectors on a hyperplane, as LayerNorm outputs: one null direction.
    on_plane = vectors - vectors.mean(axis=1, keepdims=True)
    whitening = kcse.layers.Whitening()
    whitening.adapt(on_plane)
    assert whitening.null_directions == 1
    whitened = np.asarray(whitening(on_plane))  # shape (1000, 16)
    assert np.all(whitened[:, -1] == 0)  # the null direction: no noise
    covariance = np.cov(whitened[:, :15], rowvar=False)
    assert np.allclose(covariance, np.eye(15), atol=1e-3)  # the others
    ```
    """

    def __init__(self, n_components=None, epsilon=0.0, null_tolerance=None,
                 **kwargs):
        kwargs.setdefault("dtype", "float32")  # Whatever the global policy.
        super().__init__(**kwargs)
        check_dtype_available(self.variable_dtype, "Whitening")
        if n_components is not None:
            n_components = check_count(n_components, "n_components")
        if null_tolerance is not None:
            null_tolerance = check_number(null_tolerance, "null_tolerance", minimum=0, below=1)
        self.n_components = n_components
        self.epsilon = check_number(epsilon, "epsilon", minimum=0)
        self.null_tolerance = null_tolerance
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

    @property
    def null_directions(self):
        """How many output directions are null (zero columns of `W`).

        0 before `adapt`; None before the layer is built. Counts the kept
        directions only (see `n_components`).
        """
        if self.kernel is None:
            return None
        return null_directions(keras.ops.convert_to_numpy(self.kernel))

    def adapt(self, data):
        """Computes `mu` and `W` from `data` (array or iterable of batches).

        Raises:
            ValueError: the vectors hold NaN or inf (each batch is checked
                before it is used; the message gives the count and the
                (row, column) of the first); they overflow float64 when
                squared, as at a scale of 1e300 (it names the largest
                |value| and its row and column); they exceed the range of
                the layer's dtype (float32 by default: |value| > 3.4e38),
                which its weights and `call` compute in; fewer than 2
                vectors, a shape or dim that does not fit, or all vectors
                equal.
        """
        mean, covariance, _, largest = whitening_statistics(data)
        dtype = np.dtype(keras.backend.standardize_dtype(self.variable_dtype))
        dtype_max = float(np.finfo(dtype).max)
        if largest[0] > dtype_max:
            raise ValueError(
                f"Whitening.adapt: the vectors exceed the range of the "
                f"layer's dtype {dtype.name} (max {dtype_max:.3g}), "
                f"which its mean and call compute in: the largest |value| is "
                f"{largest[0]:.3g}, at row {largest[1]}, column {largest[2]}. "
                f"Rescale the vectors, or use Whitening(dtype=\"float64\")."
            )
        if not self.built:
            self.build((None, mean.shape[0]))
        elif self.mean.shape[0] != mean.shape[0]:
            raise ValueError(
                f"Whitening was built for dim {self.mean.shape[0]}; adapted "
                f"vectors have dim {mean.shape[0]}."
            )
        kernel = whitening_kernel(
            covariance, self.n_components, self.epsilon, self.null_tolerance
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
            {
                "n_components": self.n_components,
                "epsilon": self.epsilon,
                "null_tolerance": self.null_tolerance,
            }
        )
        return config
