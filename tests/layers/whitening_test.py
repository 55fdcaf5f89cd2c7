"""Tests for kcse.layers.Whitening against a numpy BERT-whitening reference."""

import gc
import tracemalloc

import keras
import numpy as np
import psutil
import pytest

from kcse.layers import Whitening

DIM = 12


def reference_whitening(x):
    """bojone/BERT-whitening, verbatim (float64)."""
    x = np.asarray(x, dtype="float64")
    mu = x.mean(0)
    cov = np.cov(x.T)
    u, s, vh = np.linalg.svd(cov)
    W = u @ np.diag(1 / np.sqrt(s))
    return (x - mu) @ W


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
    np.testing.assert_allclose(y.mean(0), np.zeros(DIM), atol=1e-4)
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


def test_zero_variance_is_an_error_without_epsilon():
    x = np.random.default_rng(0).normal(size=(50, 3))
    x = np.concatenate([x, np.ones((50, 1))], axis=1)  # A constant column.
    with pytest.raises(ValueError, match="covariance .* is singular"):
        Whitening().adapt(x)
    Whitening(n_components=3).adapt(x)  # Not among the kept directions.


def test_near_singular_direction_is_whitened_as_bojone_does():
    # Vectors on a hyperplane (as LayerNorm outputs): one tiny variance.
    x = np.random.default_rng(0).normal(size=(200, 4))
    x[:, 3] = -x[:, :3].sum(axis=1) + 1e-5 * np.random.default_rng(1).normal(size=200)
    layer = Whitening()
    layer.adapt(x)  # No error, as in bojone's code.
    output = _output(layer, x)
    assert np.all(np.isfinite(output))
    # The last, tiny direction is float32 rounding noise scaled up; the
    # others match the float64 reference.
    np.testing.assert_allclose(output[:, :3], reference_whitening(x)[:, :3], atol=1e-4)


def test_epsilon_keeps_rank_deficient_covariance_finite():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3))
    x = np.concatenate([x, x[:, :1]], axis=1)  # rank 3 in dim 4
    layer = Whitening(epsilon=1e-6)
    layer.adapt(x)
    y = _output(layer, x)
    assert np.all(np.isfinite(y))
    # The three real directions are still whitened.
    np.testing.assert_allclose(np.cov(y[:, :3].T), np.eye(3), atol=1e-4)


# --------------------------------------------------------------------------
# Serialization.


def test_config_round_trip(data):
    x, _ = data
    layer = Whitening(n_components=5, epsilon=1e-3, name="white")
    config = layer.get_config()
    assert config["n_components"] == 5 and config["epsilon"] == 1e-3
    clone = Whitening.from_config(config)
    assert clone.get_config() == config
    assert (clone.n_components, clone.epsilon, clone.name) == (5, 1e-3, "white")
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
