"""Mixed precision: bf16 / fp16 training and float32 vectors, whatever the policy."""

import contextlib

import keras
import numpy as np
import pytest

import kcse
from conftest import TINY_SENTENCES
from conftest import tiny_bert
from conftest import tiny_preprocessor
from kcse.foundation.precision import dtype_policy_name
from kcse.foundation.precision import precision_of
from kcse.foundation.precision import set_precision


@contextlib.contextmanager
def precision(name):
    """Models built inside compute in `name`; the global policy is restored after."""
    previous = keras.config.dtype_policy()
    set_precision(name)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def encoder_in(name, pooling="last_avg", dropout=0.0, **kwargs):
    """The tiny BERT encoder (the same weights for every precision)."""
    with precision(name):
        return kcse.SentenceEncoder(
            tiny_bert(dropout=dropout), tiny_preprocessor(), pooling=pooling, **kwargs
        )


def weights(model):
    return [keras.ops.convert_to_numpy(v).copy() for v in model.trainable_weights]


# float32 vectors computed in bf16 keep ~3 significant digits (8-bit
# mantissa, epsilon 2^-8 = 0.0039) through 2 blocks of width 8; fp16 ~3
# more bits (epsilon 2^-11).
TOLERANCES = {"bfloat16": 0.05, "float16": 0.01}


@pytest.fixture(scope="module")
def float32_vectors():
    """`{pooling: the float32 encoder's vectors}`, each encoded once for both
    mixed precisions."""
    vectors = {}

    def of(pooling):
        if pooling not in vectors:
            vectors[pooling] = encoder_in("float32", pooling).encode(TINY_SENTENCES)
        return vectors[pooling]

    return of


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
@pytest.mark.parametrize("pooling", ["cls", "last_avg", "first_last_avg", "max"])
def test_mixed_precision_vectors_are_float32_and_close(float32_vectors, name, pooling):
    mixed = encoder_in(name, pooling)
    assert precision_of(mixed) == name and precision_of(mixed.backbone) == name
    assert all(v.dtype == "float32" for v in mixed.weights)  # Variables stay float32.
    expected = float32_vectors(pooling)
    vectors = mixed.encode(TINY_SENTENCES)
    assert vectors.dtype == np.float32
    scale = np.abs(expected).max()
    np.testing.assert_allclose(vectors, expected, atol=TOLERANCES[name] * scale)
    assert np.abs(vectors - expected).max() > 0  # It did compute in lower precision.
    features = {k: keras.ops.convert_to_numpy(v) for k, v in mixed.preprocessor(TINY_SENTENCES).items()}
    assert mixed.predict(features, verbose=0).dtype == np.float32
    similarity = keras.ops.convert_to_numpy(mixed.similarity(vectors, vectors))
    assert similarity.dtype == np.float32


def test_whitening_and_pooling_compute_in_float32_under_a_mixed_policy():
    with precision("bfloat16"):
        whitening = kcse.layers.Whitening()
        pooling = kcse.layers.SentencePooling("last_avg")
        flow = kcse.layers.BertFlow()
    for layer in (whitening, pooling, flow):
        assert layer.compute_dtype == "float32", type(layer).__name__
    encoder = encoder_in("bfloat16")
    vectors = encoder.encode(TINY_SENTENCES)
    whitening.adapt(vectors)
    whitened = encoder_in("bfloat16", whitening=whitening).encode(TINY_SENTENCES)
    assert whitened.dtype == np.float32
    np.testing.assert_allclose(
        whitened, keras.ops.convert_to_numpy(whitening(vectors)), atol=1e-5
    )


@pytest.mark.parametrize("name", ["bfloat16", "float16"])
def test_mixed_precision_simcse_fit_is_finite_and_trains(name):
    encoder = encoder_in(name, dropout=0.1)
    simcse = kcse.SimCSE(encoder)
    assert simcse.dtype_policy.name == dtype_policy_name(name)  # The encoder's.
    simcse.compile(optimizer=keras.optimizers.Adam(1e-3))
    # Keras scales a float16 loss (dynamic loss scaling); bf16 needs none.
    scaled = isinstance(simcse.optimizer, keras.optimizers.LossScaleOptimizer)
    assert scaled == (name == "float16")
    before = weights(encoder)
    # Loss scaling starts at 2^15 and halves at every step whose float16
    # gradients overflow, skipping it: float16 needs more steps to move.
    epochs = 10 if scaled else 2
    history = simcse.fit(TINY_SENTENCES, batch_size=2, epochs=epochs, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    after = weights(encoder)
    assert all(w.dtype == np.float32 for w in after)
    assert max(np.abs(a - b).max() for a, b in zip(after, before)) > 1e-4
    assert np.all(np.isfinite(encoder.encode(TINY_SENTENCES)))


def test_the_nan_stop_watches_a_bfloat16_fit():
    encoder = encoder_in("bfloat16", dropout=0.1)
    simcse = kcse.SimCSE(encoder)
    simcse.compile(optimizer=keras.optimizers.Adam(1e30))
    with pytest.raises(kcse.objectives.NonFiniteLossError, match="at step 2"):
        simcse.fit(TINY_SENTENCES, batch_size=4, epochs=1, shuffle=False, verbose=0)


def test_precision_names():
    assert [dtype_policy_name(p) for p in ("float32", "bfloat16", "float16")] == [
        "float32", "mixed_bfloat16", "mixed_float16"]
    with pytest.raises(ValueError, match="precision must be one of float32, bfloat16, float16"):
        dtype_policy_name("fp8")
    assert precision_of(keras.layers.Dense(2)) == "float32"


@pytest.mark.parametrize("name", ["dtype_policy_name", "set_precision", "precision_of"])
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    from docstring_examples import run_examples

    import kcse.foundation.precision

    previous = keras.config.dtype_policy()
    try:
        run_examples(name, getattr(kcse.foundation.precision, name), tmp_path, monkeypatch)
    finally:
        keras.config.set_dtype_policy(previous)
