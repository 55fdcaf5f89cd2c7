"""Compiled train steps: few shapes per cell, reused across cells; XLA on TensorFlow."""

import json
import os
import pathlib
import subprocess
import sys

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

import kcse
from kcse.foundation.compilation import padded_length
from kcse.foundation.compilation import trim_padding
from kcse.objectives.encoder_objective import EncoderObjective
from kcse.objectives.token_batches import trimmed_tokens

WORKER = pathlib.Path(__file__).parent / "compilation_worker.py"
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat", "ran", "the"]
LENGTH = 32
# 22 sentences of 1 to 22 words (the worker's): many longest lengths per
# batch of 4, and a last batch of 2.
SENTENCES = [
    " ".join(VOCABULARY[5 + (i + j) % 6] for j in range(i + 1)) for i in range(22)
]


@pytest.mark.large
def test_jax_cell_compiles_two_shapes_and_a_second_cell_reads_the_cache(tmp_path):
    """Under JAX: one padded length (+ the last, partial batch) per cell; a new
    model of the same shape traces again but compiles nothing: every program
    comes from the persistent cache."""
    pytest.importorskip("jax")
    run = subprocess.run(
        [sys.executable, str(WORKER), str(tmp_path / "cache")],
        env=dict(os.environ, KERAS_BACKEND="jax"),
        capture_output=True, text=True, timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    cells = json.loads(run.stdout.strip().splitlines()[-1])
    first, second = cells["first_cell"], cells["same_shape_cell"]
    # Sentences of 3 to 24 tokens, batch 4: the default pads all to 32.
    assert first["traced_shapes"] == [[4, LENGTH], [2, LENGTH]]
    assert first["cache_misses"] >= 2
    assert second["traced_shapes"] == first["traced_shapes"]
    assert second["cache_misses"] == 0  # Nothing compiled: ...
    assert second["cache_hits"] == 2  # ... both train programs read from disk.
    assert second["loss"] == first["loss"]
    # (Buckets: test_tensorflow_xla_and_plain_fits_feed_their_shapes_and_train_alike.)


def tiny_encoder(dropout=0.0):
    keras.utils.set_random_seed(0)
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=VOCABULARY), sequence_length=LENGTH
    )
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCABULARY), num_layers=2, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=LENGTH, dropout=dropout,
    )
    return kcse.SentenceEncoder(backbone, preprocessor, pooling="last_avg")


def fed_shapes(monkeypatch):
    """The token shapes of every batch fed to the train step (recorded in tf.data)."""
    shapes = []
    preprocess = EncoderObjective.preprocess_samples

    def recorded(self, x, y=None, sample_weight=None):
        samples = preprocess(self, x, y, sample_weight)
        features = keras.utils.unpack_x_y_sample_weight(samples)[0]
        record = tf.py_function(
            lambda shape: shapes.append(tuple(shape.numpy())) or 0,
            [tf.shape(features["token_ids"])], tf.int32,
        )
        with tf.control_dependencies([record]):
            features = {key: tf.identity(value) for key, value in features.items()}
        return features

    monkeypatch.setattr(EncoderObjective, "preprocess_samples", recorded)
    return shapes


def test_tensorflow_xla_and_plain_fits_feed_their_shapes_and_train_alike(monkeypatch):
    """One fit each way, on every sentence in order: the batches' longest
    sentences have 6, 10, 14, 18, 22 and 24 tokens. XLA with padded_lengths
    (8, 16) feeds 8, 16, 16, 32, 32, 32; without XLA (the default lengths)
    each batch is trimmed to a multiple of 8: 8, 16, 16, 24, 24, 24. No
    dropout (XLA draws other random numbers): the same losses and weights,
    the padding being masked out whatever its length."""
    shapes = fed_shapes(monkeypatch)
    results = []
    for jit_compile, padded_lengths in ((False, None), (True, (8, 16))):
        shapes.clear()
        encoder = tiny_encoder(dropout=0.0)
        simcse = kcse.SimCSE(encoder, padded_lengths=padded_lengths, rematerialize=True)
        simcse.compile(optimizer=keras.optimizers.Adam(1e-3), jit_compile=jit_compile)
        history = simcse.fit(SENTENCES, batch_size=4, epochs=1, shuffle=False, verbose=0)
        # tf.data preprocesses batches in parallel, so they are recorded in any
        # order (Keras reads the first one once more before training).
        results.append((set(shapes), len(shapes), history.history["loss"],
                        encoder.encode(SENTENCES)))
    (plain_shapes, plain_batches, plain_loss, plain_vectors), (
        xla_shapes, xla_batches, xla_loss, xla_vectors) = results
    assert plain_shapes == {(4, 8), (4, 16), (4, 24), (2, 24)} and plain_batches >= 6
    assert xla_shapes == {(4, 8), (4, 16), (4, 32), (2, 32)} and xla_batches >= 6
    assert np.all(np.isfinite(xla_loss)) and plain_loss[0] > 0
    # float32 through 2 blocks of width 16 and 6 Adam steps: rounding only.
    np.testing.assert_allclose(xla_loss, plain_loss, atol=1e-5)
    np.testing.assert_allclose(xla_vectors, plain_vectors, atol=1e-5)


@pytest.mark.parametrize("lengths", [None, (), (8, 16), (24,)])
def test_numpy_and_tensorflow_padding_agree(lengths):
    rng = np.random.default_rng(0)
    for longest in (1, 7, 8, 9, 16, 17, 30, 32):
        mask = np.arange(LENGTH) < rng.integers(1, longest + 1, (4, 1))
        mask[0, :longest] = True
        features = {"token_ids": np.where(mask, 7, 0).astype("int32"), "padding_mask": mask}
        expected = padded_length(longest, LENGTH, lengths)
        numpy_batch = trimmed_tokens(features, lengths)
        tf_batch = trim_padding({k: tf.constant(v) for k, v in features.items()}, lengths)
        assert numpy_batch["token_ids"].shape == (4, expected)
        for key in features:
            np.testing.assert_array_equal(tf_batch[key].numpy(), numpy_batch[key])
        assert numpy_batch["padding_mask"].dtype == "int32"


def test_padded_lengths_are_checked_and_saved():
    with pytest.raises(ValueError, match="padded_lengths"):
        kcse.SimCSE(tiny_encoder(), padded_lengths=(16, 0))
    simcse = kcse.SimCSE(tiny_encoder(), padded_lengths=[16, 32])
    assert simcse.get_config()["padded_lengths"] == (16, 32)


@pytest.mark.parametrize("name", ["padded_length", "use_compilation_cache", "TokenBatches"])
def test_docstring_examples_run(name, tmp_path, monkeypatch):
    from docstring_examples import run_examples

    import kcse.foundation.compilation
    import kcse.objectives.token_batches

    module = kcse.objectives.token_batches if name == "TokenBatches" else kcse.foundation.compilation
    run_examples(name, getattr(module, name), tmp_path, monkeypatch)


def test_trim_padding_cuts_to_the_longest_sequence_rounded_up():
    mask = np.zeros((2, 32), bool)
    mask[0, :5], mask[1, :11] = True, True
    features = {
        "token_ids": np.where(mask, 7, 0).astype("int32"),
        "padding_mask": mask,
    }
    trimmed = trim_padding(features)
    assert trimmed["token_ids"].shape == (2, 16)
    assert trimmed["padding_mask"].dtype == "int32"
    np.testing.assert_array_equal(trimmed["padding_mask"], mask[:, :16])
    full = trim_padding({"padding_mask": np.ones((1, 12), bool)})
    assert full["padding_mask"].shape == (1, 12)
    # A left-padded row (a client's ids, say) keeps every token.
    left = np.zeros((2, 32), bool)
    left[0, 20:23], left[1, :2] = True, True
    np.testing.assert_array_equal(trim_padding({"padding_mask": left})["padding_mask"],
                                  left[:, :24])
    # An empty batch (a client's `[0]` request) keeps its shape's rank.
    empty = trim_padding({"padding_mask": np.zeros((0, 12), bool)})
    assert empty["padding_mask"].shape == (0, 8)
