"""Tests for SBERT-WK pooling against the authors' code (tests/sbert_wk_reference.py)."""

import json
import os
import subprocess
import sys

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

import kcse
import sbert_wk_reference as reference
from conftest import TINY_SENTENCES
from conftest import tiny_preprocessor
from conftest import tiny_vocabulary
from kcse.layers import SentencePooling
from kcse.layers import WKPooling
from kcse.layers.wk_pooling import context_windows
from kcse.models import hidden_states_model
from kcse.batched_prediction import bucket_length
from tests.layer_checks import run_layer_test

RTOL = 1e-5
# Real lengths of a padded batch of 6 sentences of 10 positions (with [CLS]
# and [SEP]): from the shortest the authors' code takes (one counted token)
# to no padding.
LENGTHS = (10, 4, 2, 7, 3, 9)


def layer_states(num_states=13, batch=len(LENGTHS), length=10, dim=24, seed=0):
    """Per-layer states like a transformer's: each layer close to the previous.

    Independent random layers would make the authors' alignment
    `1 / mean(cos)` blow up at cosines near 0; a random walk gives the
    correlated layers of a real model. float64; `num_states` includes the
    embeddings (13: a 12-layer model).
    """
    rng = np.random.default_rng(seed)
    states = [rng.normal(size=(batch, length, dim))]
    for _ in range(num_states - 1):
        states.append(states[-1] + 0.4 * rng.normal(size=(batch, length, dim)))
    return states


def padding_mask(lengths=LENGTHS, length=10):
    return (np.arange(length)[None, :] < np.array(lengths)[:, None]).astype("int32")


def authors_vectors(states, mask, layer_start=4, context_window=2):
    """The transcription on `states` laid out as the authors' `all_layer_embedding`."""
    stacked = np.stack([np.asarray(s, "float64") for s in states], axis=1)
    return reference.dissecting(stacked, mask, layer_start, context_window)


def assert_rows_close(actual, expected, rtol=RTOL):
    """Each vector within `rtol` of the expected one, relative to its norm."""
    actual = np.asarray(actual, "float64")
    error = np.linalg.norm(actual - expected, axis=-1)
    assert np.all(error <= rtol * np.linalg.norm(expected, axis=-1)), error


def float32(states):
    return [np.asarray(s, "float32") for s in states]


def test_context_windows_are_numpy_slices_with_empty_left_windows():
    """The authors' `token_feature[k - w:k]`: empty for k < w, not layers 0..k-1."""
    windows = context_windows(9, 2)
    assert windows[0] == [1, 2] and windows[1] == [2, 3]
    assert windows[4] == [2, 3, 5, 6] and windows[8] == [6, 7]
    features = np.arange(9)
    for k, window in enumerate(windows):
        left, right = features[k - 2 : k], features[k + 1 : k + 3]
        assert window == list(left) + list(right)


@pytest.mark.parametrize(
    "num_states, layer_start, context_window",
    [(13, 4, 2), (10, 4, 2), (13, 0, 2), (13, 6, 1), (13, 4, 3), (7, 4, 2)],
)
def test_equals_the_authors_code(num_states, layer_start, context_window):
    states = layer_states(num_states)
    mask = padding_mask()
    expected = authors_vectors(states, mask, layer_start, context_window)
    pooling = WKPooling(layer_start=layer_start, context_window=context_window)
    assert_rows_close(pooling(float32(states), mask), expected)


def test_the_sign_convention_of_qr_does_not_matter():
    """numpy's R has negative diagonal entries, kcse's Gram-Schmidt R none,
    TensorFlow's and JAX's QR their own: flipping rows of R at random in the
    transcription changes no vector."""
    states = layer_states(10)
    window = np.stack([s[0, 0] for s in states[4:7]], axis=1)
    assert np.any(np.diag(np.linalg.qr(window)[1]) < 0)  # numpy's R flips signs
    mask = padding_mask()
    expected = authors_vectors(states, mask)
    stacked = np.stack(states, axis=1)
    for seed in range(3):
        flipped = reference.dissecting(stacked, mask, flip_r=np.random.default_rng(seed))
        np.testing.assert_allclose(flipped, expected, rtol=1e-12, atol=1e-12)


def authors_r_terms(r):
    """The authors' uses of R: alignment's dot, |r[:-1]|, |r[-1]|, |r|."""
    r = np.asarray(r, "float64")
    last = r[:, -1]
    return np.array([
        np.mean(reference.normalize(r[:-1, :-1], axis=0), axis=1).dot(r[:-1, -1]),
        np.linalg.norm(last[:-1]), abs(last[-1]), np.linalg.norm(last),
    ])


def test_the_qr_of_keras_gives_the_authors_r_terms():
    """TensorFlow's (and JAX's) QR may sign R's rows unlike numpy's; the
    quantities SBERT-WK takes from R are the same."""
    states = layer_states(9)
    for token in range(4):
        window = np.stack([s[1, token] for s in states[4:9]], axis=1)  # (dim, 5)
        _, numpy_r = np.linalg.qr(window)
        _, keras_r = keras.ops.qr(keras.ops.convert_to_tensor(window))
        keras_r = keras.ops.convert_to_numpy(keras_r)
        np.testing.assert_allclose(np.abs(keras_r), np.abs(numpy_r), atol=1e-9)
        np.testing.assert_allclose(
            authors_r_terms(keras_r), authors_r_terms(numpy_r), rtol=1e-9
        )


def test_padding_and_the_last_real_token_never_count():
    states = layer_states(13)
    mask = padding_mask()
    vectors = WKPooling()(float32(states), mask)
    # Other values in the padding, and in the left-out last real token.
    noisy = [s.copy() for s in states]
    last = np.array(LENGTHS) - 1
    for s in noisy:
        s[mask == 0] = 1e3
        s[np.arange(len(LENGTHS)), last] = -7.0
    assert_rows_close(WKPooling()(float32(noisy), mask), authors_vectors(states, mask))
    np.testing.assert_allclose(
        WKPooling()(float32(noisy), mask), vectors, rtol=1e-5, atol=1e-6
    )


def test_sentence_pooling_mode_wk_is_the_authors_defaults():
    states = float32(layer_states(13))
    mask = padding_mask()
    np.testing.assert_allclose(
        SentencePooling("wk")(states, mask), WKPooling(4, 2)(states, mask), rtol=1e-6
    )
    assert SentencePooling("wk").get_config()["mode"] == "wk"


def test_config_and_keras_file_round_trip():
    states = float32(layer_states(9, batch=2, length=6, dim=8))
    mask = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], "int32")
    data = {"hidden_states": states, "padding_mask": mask}
    layer = run_layer_test(
        WKPooling, {"layer_start": 3, "context_window": 1}, data, (2, 8)
    )
    assert layer.get_config()["layer_start"] == 3
    assert layer.get_config()["context_window"] == 1
    run_layer_test(SentencePooling, {"mode": "wk"}, data, (2, 8))


def test_too_few_layers_raise_with_the_numbers():
    states = float32(layer_states(6))  # embeddings + 5 blocks: 2 layers from 4
    mask = padding_mask()
    message = r"layer_start=4 .*6 hidden states .*5 transformer blocks"
    with pytest.raises(ValueError, match=message):
        WKPooling()(states, mask)
    with pytest.raises(ValueError, match=r"7 hidden states \(6 blocks\) or more"):
        SentencePooling("wk")(states, mask)
    with pytest.raises(ValueError, match="layer_start=13"):
        WKPooling(layer_start=13)(float32(layer_states(13)), mask)
    WKPooling(layer_start=4)(float32(layer_states(7)), mask)  # 3 layers suffice


@pytest.mark.parametrize(
    "arguments", [{"layer_start": -1}, {"context_window": 0}, {"layer_start": 2.0}]
)
def test_bad_arguments(arguments):
    with pytest.raises(ValueError, match="must be an int"):
        WKPooling(**arguments)


def test_short_and_degenerate_sentences_are_defined():
    """No counted token (fewer than two real tokens) gives zeros; one counted
    token its unified vector; layers all alike (zero variance) weight the
    tokens equally; zero states give zeros. Never NaN."""
    states = layer_states(9, batch=4, length=5)
    mask = padding_mask((0, 1, 2, 5), length=5)
    vectors = np.asarray(WKPooling()(float32(states), mask))
    assert np.all(np.isfinite(vectors))
    np.testing.assert_array_equal(vectors[:2], 0.0)
    assert_rows_close(vectors[2:], authors_vectors([s[2:] for s in states], mask[2:]))

    # The same state at every layer: every cosine is 1 (variance 0), and
    # every layer is the token itself.
    same = [states[0]] * 9
    vectors = np.asarray(WKPooling()(float32(same), mask))
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(vectors[3], states[0][3, :4].mean(axis=0), rtol=1e-4)

    zeros = [np.zeros((4, 5, 24), "float32")] * 9
    np.testing.assert_array_equal(WKPooling()(zeros, mask), 0.0)


def test_gradients_are_finite_on_degenerate_inputs():
    states = [tf.Variable(s) for s in float32(layer_states(9, batch=4, length=5))]
    states[3].assign(tf.zeros_like(states[3]))  # one layer of zeros
    mask = padding_mask((0, 1, 2, 5), length=5)
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(WKPooling()(states, mask) ** 2)
    for gradient in tape.gradient(loss, states):
        assert gradient is None or np.all(np.isfinite(gradient))


def wk_encoder(num_layers=7, hidden_dim=16, seed=0):
    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(tiny_vocabulary()), num_layers=num_layers, num_heads=2,
        hidden_dim=hidden_dim, intermediate_dim=32, max_sequence_length=16,
    )
    return kcse.SentenceEncoder(backbone, tiny_preprocessor(), pooling="wk")


def test_sentence_encoder_on_a_tiny_bert_equals_the_authors_code():
    encoder = wk_encoder()
    vectors = encoder.encode(TINY_SENTENCES)
    tokens = encoder.preprocessor(TINY_SENTENCES)
    # The states of the batch `encode` ran (one batch, its padding trimmed).
    # `encode` recomputes them in a compiled graph: WK's weights amplify their
    # one-ulp differences (float32 eps 1.2e-7) about 500 times, ~6e-5 of a
    # vector (1.8e-5 measured), so 1e-4 here; the layer itself is held to 1e-5
    # on given states above.
    mask = keras.ops.convert_to_numpy(tokens["padding_mask"]).astype("int32")
    width = bucket_length(int(mask.sum(axis=1).max()), mask.shape[1])
    tokens = {key: value[:, :width] for key, value in tokens.items()}
    states = hidden_states_model(encoder.backbone)(tokens)["hidden_states"]
    states = [keras.ops.convert_to_numpy(s) for s in states]
    mask = mask[:, :width]
    assert len(states) == 8
    assert_rows_close(vectors, authors_vectors(states, mask), rtol=1e-4)


def test_sentence_encoder_saves_reloads_and_trains(tmp_path):
    encoder = wk_encoder()
    vectors = encoder.encode(TINY_SENTENCES)
    encoder.save(tmp_path / "wk.keras")
    restored = keras.saving.load_model(tmp_path / "wk.keras")
    assert restored.pooling == "wk"
    np.testing.assert_allclose(restored.encode(TINY_SENTENCES), vectors, atol=1e-5)

    # A SimCSE-like step: the gradient through WK pooling reaches every
    # transformer block and is finite.
    tokens = encoder.preprocessor(TINY_SENTENCES)
    with tf.GradientTape() as tape:
        first = encoder(tokens, training=True)
        second = encoder(tokens, training=True)
        views = tf.stack([first, second], axis=1)
        loss = kcse.losses.SimCSELoss()(tf.zeros(len(TINY_SENTENCES)), views)
    assert np.isfinite(loss)
    variables = encoder.backbone.trainable_variables
    gradients = [
        None if g is None else tf.convert_to_tensor(g).numpy()  # IndexedSlices too
        for g in tape.gradient(loss, variables)
    ]
    assert all(np.all(np.isfinite(g)) for g in gradients if g is not None)
    blocks = [
        v for v, g in zip(variables, gradients)
        if g is not None and "transformer_layer_6" in v.path and np.any(g != 0)
    ]
    assert blocks


def test_a_backbone_too_shallow_for_the_default_raises_when_the_encoder_is_made():
    with pytest.raises(ValueError, match="got 6 hidden states"):
        wk_encoder(num_layers=5)
    assert wk_encoder(num_layers=6).pooling == "wk"


# kcse's layer before Keras, and no test module: the process imports
# neither keras-hub nor TensorFlow (seconds), only JAX. The states come
# from this process in an .npz file.
OTHER_BACKEND = """
import json, sys
from kcse.layers import WKPooling
import keras
import jax
import numpy as np

saved = np.load(sys.argv[1])
states = [saved[f"state{i}"] for i in range(len(saved.files) - 1)]
mask = saved["mask"]
pooling = WKPooling()
vectors = jax.jit(lambda s: pooling(s, mask))(states)
gradient = jax.jit(jax.grad(lambda s: (pooling(s, mask) ** 2).sum()))(states)
gradient = bool(all(np.all(np.isfinite(g)) for g in gradient))
print(json.dumps({"backend": keras.backend.backend(), "finite_gradient": gradient,
                  "vectors": np.asarray(vectors).tolist()}))
"""


def test_jax_equals_tensorflow(tmp_path):
    states, mask = float32(layer_states(13)), padding_mask()
    np.savez(tmp_path / "states.npz", mask=mask,
             **{f"state{i}": state for i, state in enumerate(states)})
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run(
        [sys.executable, "-c", OTHER_BACKEND, str(tmp_path / "states.npz")],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["backend"] == "jax" and result["finite_gradient"] is True
    expected = np.asarray(WKPooling()(states, mask))
    assert_rows_close(np.array(result["vectors"]), expected, rtol=1e-5)
