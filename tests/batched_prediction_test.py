"""kcse.batched_prediction, `encode`'s streaming path: chunks, length buckets, backends."""

import gc
import json
import os
import pathlib
import subprocess
import sys
import warnings
import weakref

import keras
import keras_hub
import numpy as np
import pytest

import kcse
from conftest import TINY_SENTENCES
from conftest import tiny_bert
from conftest import tiny_preprocessor
from conftest import tiny_vocabulary
from kcse import batched_prediction
from kcse.batched_prediction import bucket_length
from kcse.batched_prediction import predict_in_chunks
from kcse.batched_prediction import predict_in_length_order
from kcse.experiments.cell_scoring import EveryPooling

def sentence(i):
    """Sentence i: 1 to 50 words of the tiny vocabulary."""
    words = ((TINY_SENTENCES[i % 8] + " ") * 20).split()
    return " ".join(words[i % 5 :][: 1 + (i * 11) % 50])


# 0 to 50 words (2 to 52 tokens with [CLS] and [SEP]), in no order; one repeated.
TEXTS = [sentence(i) for i in range(45)] + ["the cat sat", "the cat sat", ""]
# Vectors batched otherwise than `predict`'s full-length batches (length
# buckets, chunks, batch sizes, replicas, JAX) go through 2 blocks with
# other reduction orders: a few float32 ulps of vectors up to ~2 (3.6e-7
# measured); 1e-5 is ~40 * eps * |v| (eps = 1.2e-7).
REORDERED_ATOL = 1e-5


def long_encoder(pooling="last_avg"):
    """A tiny encoder that takes 64 tokens, so batches fall in several buckets."""
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(tiny_vocabulary()), num_layers=2, num_heads=2,
        hidden_dim=8, intermediate_dim=16, max_sequence_length=64,
    )
    return kcse.SentenceEncoder(backbone, tiny_preprocessor(64), pooling=pooling)


def test_texts_span_several_length_buckets():
    lengths = long_encoder().preprocessor(TEXTS)["padding_mask"].numpy().sum(axis=1)
    assert lengths.min() == 2 and lengths.max() == 52
    assert len(set(TEXTS)) == len(TEXTS) - 1 == 47


def test_encode_in_chunks_equals_predict_in_input_order(monkeypatch):
    encoder = long_encoder()
    expected = encoder.predict(TEXTS, batch_size=8, verbose=0)  # Full length.
    monkeypatch.setattr(batched_prediction, "ENCODE_CHUNK_SIZE", 7)
    np.testing.assert_allclose(encoder.encode(TEXTS, batch_size=3), expected, atol=REORDERED_ATOL)
    monkeypatch.setattr(batched_prediction, "PREPROCESS_CHUNK_SIZE", 3)  # Parts of chunks.
    np.testing.assert_allclose(encoder.encode(TEXTS, batch_size=3), expected, atol=REORDERED_ATOL)


@pytest.mark.parametrize("coarse,width", [(False, 56), (True, 64)])
def test_packed_features_are_the_preprocessors_in_parts_trimmed(monkeypatch, coarse, width):
    preprocessor = long_encoder().preprocessor
    whole = {key: keras.ops.convert_to_numpy(value)
             for key, value in preprocessor(TEXTS).items()}
    monkeypatch.setattr(batched_prediction, "PREPROCESS_CHUNK_SIZE", 4)
    features, full_length = batched_prediction.packed_features(
        preprocessor, np.array(TEXTS, object), coarse)
    assert full_length == 64
    assert sorted(features) == sorted(whole)
    for key, value in whole.items():  # The longest text has 52 tokens.
        np.testing.assert_array_equal(features[key], value[:, :width])
    assert not whole["padding_mask"][:, width:].any()


def test_predict_in_chunks_reads_the_texts_lazily(monkeypatch):
    monkeypatch.setattr(batched_prediction, "ENCODE_CHUNK_SIZE", 10)
    encoder = long_encoder()
    taken = []

    def texts():
        for text in TEXTS:
            taken.append(text)
            yield text

    chunks = predict_in_chunks(encoder, encoder.preprocessor, texts(), batch_size=4)
    rows, vectors = next(chunks)
    assert rows == slice(0, 10) and len(taken) == 10 and vectors.shape == (10, 8)
    rest = list(chunks)
    assert [rows for rows, _ in rest] == [slice(10, 20), slice(20, 30), slice(30, 40),
                                         slice(40, 48)]
    everything = np.concatenate([vectors] + [v for _, v in rest])
    np.testing.assert_allclose(
        everything, encoder.predict(TEXTS, batch_size=8, verbose=0), atol=REORDERED_ATOL
    )


@pytest.mark.parametrize(
    "length,full_length,coarse,expected",
    [(1, 64, False, 8), (8, 64, False, 8), (9, 64, False, 16), (61, 64, False, 64),
     (0, 64, False, 8), (5, 12, False, 8), (11, 12, False, 12),
     (1, 512, True, 16), (16, 512, True, 16), (17, 512, True, 32), (100, 512, True, 128),
     (300, 512, True, 512), (20, 24, True, 24)],
)
def test_bucket_length(length, full_length, coarse, expected):
    assert bucket_length(length, full_length, coarse) == expected


def recorded_batches(monkeypatch):
    """The token batches `encode` runs, recorded as it runs them."""
    batches = []
    original = batched_prediction.predict_function

    def recording(model):
        predict = original(model)

        def run(batch):
            batches.append(batch)
            return predict(batch)

        return run

    monkeypatch.setattr(batched_prediction, "predict_function", recording)
    return batches


def test_coarse_buckets_and_a_repeated_last_batch_change_no_vector(monkeypatch):
    """What JAX and XLA get: powers of two >= 16, every batch of batch_size."""
    encoder = long_encoder()
    expected = encoder.predict(TEXTS, batch_size=8, verbose=0)
    batches = recorded_batches(monkeypatch)
    monkeypatch.setattr(batched_prediction, "compiles_per_shape", lambda model: True)
    np.testing.assert_allclose(encoder.encode(TEXTS, batch_size=4), expected, atol=REORDERED_ATOL)
    shapes = {batch["token_ids"].shape for batch in batches}
    assert shapes == {(4, 16), (4, 32), (4, 64)}, shapes
    for batch in batches:
        longest = int(batch["padding_mask"].sum(axis=1).max())
        assert batch["token_ids"].shape[1] == bucket_length(longest, 64, coarse=True)


def test_fine_buckets_without_per_shape_compilation(monkeypatch):
    encoder = long_encoder()
    batches = recorded_batches(monkeypatch)
    encoder.encode(TEXTS, batch_size=4)
    # 47 distinct texts, each once: 11 batches of 4 and one of 3.
    assert [len(batch["token_ids"]) for batch in batches] == [4] * 11 + [3]
    for batch in batches:
        longest = int(batch["padding_mask"].sum(axis=1).max())
        assert batch["token_ids"].shape[1] == 8 * -(-longest // 8)
    assert batches[0]["token_ids"].shape[1] == 56  # Longest first.


def test_a_function_of_one_batch_gets_batches_cut_exactly():
    """A model that is a function (`kcse.OnnxEncoder`: ONNX Runtime) gets each
    batch cut to its longest text, not rounded up, and gives the vectors of
    the Keras model it runs."""
    encoder = long_encoder()
    widths = []

    def function(batch):
        widths.append((batch["token_ids"].shape[1],
                       int(batch["padding_mask"].sum(axis=1).max())))
        return keras.Model.predict_on_batch(encoder, batch)

    vectors = predict_in_length_order(function, encoder.preprocessor, TEXTS, batch_size=4)
    assert len(widths) == 12 and widths[0] == (52, 52)  # Longest first, as it is.
    assert all(width == longest for width, longest in widths)
    np.testing.assert_allclose(vectors, encoder.predict(TEXTS, verbose=0), atol=REORDERED_ATOL)


def encode_twice():
    """`(tracing count, weak reference to the encoder)` after two encodes."""
    encoder = long_encoder()
    encoder.encode(TEXTS, batch_size=4)
    encoder.encode(TEXTS[:5], batch_size=2)
    [function] = batched_prediction.TENSORFLOW_PREDICT_FUNCTIONS[encoder].values()
    return function.experimental_get_tracing_count(), weakref.ref(encoder)


def test_one_tensorflow_trace_for_every_batch_shape_kept_per_encoder():
    tracing_count, encoder = encode_twice()
    assert tracing_count == 1
    # The cache keeps the encoder weakly: once unused, the encoder goes.
    gc.collect()
    assert encoder() is None


def test_dict_outputs_of_every_pooling_in_input_order(monkeypatch):
    monkeypatch.setattr(batched_prediction, "ENCODE_CHUNK_SIZE", 16)
    first = long_encoder("P1")
    encoders = {
        pooling: kcse.SentenceEncoder(first.backbone, first.preprocessor, pooling=pooling)
        for pooling in ("cls", "last_avg", "first_last_avg")
    }
    vectors = predict_in_length_order(EveryPooling(encoders), first.preprocessor, TEXTS, 5)
    assert sorted(vectors) == sorted(encoders)
    for pooling, encoder in encoders.items():
        np.testing.assert_allclose(
            vectors[pooling], encoder.predict(TEXTS, batch_size=8, verbose=0), atol=REORDERED_ATOL
        )


def test_no_texts_is_an_error():
    encoder = long_encoder()
    with pytest.raises(ValueError, match="at least one text"):
        predict_in_length_order(encoder, encoder.preprocessor, [], 4)


def test_one_truncation_warning_counts_every_chunk(monkeypatch):
    monkeypatch.setattr(batched_prediction, "ENCODE_CHUNK_SIZE", 2)
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="P3")
    long = "the cat sat on the mat and the dog ran fast"  # 13 tokens with specials.
    texts = [long, "a dog", long, "blue", "red", long + " slow", "the cat"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        encoder.encode(texts, batch_size=2)
    messages = [str(w.message) for w in caught if w.category is kcse.TruncationWarning]
    assert len(messages) == 1 and messages[0].startswith("3 of 7 sentences"), messages


def test_mirrored_strategy_encodes_every_sentence_once(two_cpu_strategy):
    """Under two replicas `predict` splits the batches; the vectors are the same."""
    single = long_encoder()
    expected = single.encode(TEXTS, batch_size=4)
    with two_cpu_strategy.scope():
        mirrored = long_encoder()
    mirrored.set_weights(single.get_weights())
    assert batched_prediction.splits_batches(mirrored)
    assert not batched_prediction.splits_batches(single)
    vectors = mirrored.encode(TEXTS, batch_size=5)  # 47 distinct: a partial batch.
    assert vectors.shape == expected.shape
    np.testing.assert_allclose(vectors, expected, atol=REORDERED_ATOL)


OTHER_BACKEND = """
import json, logging, sys
import numpy as np
import keras
sys.path.insert(0, sys.argv[1])
from batched_prediction_test import TEXTS, long_encoder

compiles = []


class CountCompiles(logging.Handler):
    def emit(self, record):
        if record.getMessage().startswith("Compiling jit(predict_step)"):
            compiles.append(record.getMessage())


encoder = long_encoder()
expected = encoder.predict(TEXTS, batch_size=len(TEXTS), verbose=0)
if keras.backend.backend() == "jax":
    import jax

    jax.config.update("jax_log_compiles", True)
    logging.getLogger("jax").addHandler(CountCompiles())
first = encoder.encode(TEXTS, batch_size=4)
first_compiles = len(compiles)
again = encoder.encode(TEXTS[::-1], batch_size=3)
print(json.dumps({
    "backend": keras.backend.backend(),
    "difference": float(np.abs(first - expected).max()),
    "difference_again": float(np.abs(again - expected[::-1]).max()),
    "compiles": first_compiles, "compiles_again": len(compiles) - first_compiles,
}))
"""


def test_jax_encodes_the_same_with_one_compilation_per_bucket():
    """JAX compiles once per length bucket (16, 32, 64 here), then never again
    for the same batch size. Vectors equal `predict`'s, whose one batch is
    padded to the full length. (PyTorch takes the same `predict_on_batch`
    path, run eagerly.)"""
    backend = "jax"
    tests = pathlib.Path(__file__).resolve().parent
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run(
        [sys.executable, "-c", OTHER_BACKEND, str(tests)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["backend"] == backend
    assert result["difference"] <= REORDERED_ATOL, result
    assert result["difference_again"] <= REORDERED_ATOL, result
    # Batch size 4, then 3: each three buckets.
    assert result["compiles"] == 3 and result["compiles_again"] == 3, result
