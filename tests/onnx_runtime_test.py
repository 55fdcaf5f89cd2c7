"""`kcse.OnnxEncoder`: `encode` run by ONNX Runtime on the cached ONNX export.

References: kcse's own `SentenceEncoder.encode`, and ONNX Runtime run
directly on the exported `model.onnx` with transformers' tokenizer reading
the exported folder (`onnx_test.onnx_vectors`), neither of them this code.
"""

import importlib.util

import keras
import numpy as np
import pytest

import kcse
from conftest import TINY_SENTENCES
from conftest import tiny_bert
from conftest import tiny_encoder_file
from conftest import tiny_preprocessor
from conftest import tiny_xlm_roberta_preprocessor
from kcse.export import onnx as onnx_export
from kcse.onnx_runtime import OnnxEncoder
from onnx_reference import onnx_vectors

pytestmark = pytest.mark.filterwarnings("ignore::kcse.TruncationWarning")
TOLERANCE = 1e-5
# Longer than the preprocessor's 12 tokens (cut), repeated, and empty.
TEXTS = TINY_SENTENCES + ["the cat sat on the mat " * 3, "a dog ran fast", ""]


def counted_exports(monkeypatch):
    """A list that grows by one folder at each ONNX export."""
    folders = []
    export = onnx_export.export_onnx

    def counting(encoder, path, **kwargs):
        folders.append(path)
        return export(encoder, path, **kwargs)

    monkeypatch.setattr(onnx_export, "export_onnx", counting)
    return folders


@pytest.mark.parametrize("preprocessor", [tiny_preprocessor, tiny_xlm_roberta_preprocessor],
                         ids=["bert", "xlm_roberta"])
def test_vectors_equal_encode_and_onnx_runtime_on_the_export(tmp_path, preprocessor):
    made = preprocessor()
    encoder = kcse.SentenceEncoder(tiny_bert(vocabulary_size=made.tokenizer.vocabulary_size()),
                                   made, pooling="last_avg", normalize=True)
    fast = OnnxEncoder(encoder, cache_dir=tmp_path)
    vectors = fast.encode(TEXTS, batch_size=4)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), 8)
    np.testing.assert_allclose(vectors, encoder.encode(TEXTS, batch_size=4), atol=TOLERANCE)
    np.testing.assert_allclose(vectors[:-1], onnx_vectors(fast.folder, TEXTS[:-1]),
                               atol=TOLERANCE)
    assert fast.encode([]).shape == (0, 8)


def test_int8_runs_the_quantised_model(tmp_path):
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    fast = OnnxEncoder(encoder, quantize="int8", cache_dir=tmp_path)
    vectors = fast.encode(TEXTS)
    np.testing.assert_allclose(
        vectors[:-1], onnx_vectors(fast.folder, TEXTS[:-1], model="model_int8.onnx"),
        atol=TOLERANCE)
    exact = encoder.encode(TEXTS)
    assert not np.allclose(vectors, exact, atol=TOLERANCE)  # 8 bits, not float32's.
    cosines = np.sum(vectors * exact, 1) / np.linalg.norm(vectors, axis=1) / np.linalg.norm(
        exact, axis=1)
    assert cosines.min() > 0.95


def test_prompts_are_prepended_as_encode_does(tmp_path):
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg",
                                   prompts={"query": "the "}, default_prompt_name="query")
    fast = OnnxEncoder(encoder, cache_dir=tmp_path)
    for arguments in ({}, {"prompt_name": None}, {"prompt": "a "}):
        np.testing.assert_allclose(fast.encode(TEXTS, **arguments),
                                   encoder.encode(TEXTS, **arguments), atol=TOLERANCE)
    with pytest.raises(ValueError, match="prompt_name 'passage' is not one of"):
        fast.encode(TEXTS, prompt_name="passage")


def test_the_cache_is_reused_and_rebuilt_when_the_vectors_would_change(tmp_path,
                                                                        monkeypatch):
    exports = counted_exports(monkeypatch)
    backbone = tiny_bert()
    encoder = kcse.SentenceEncoder(backbone, tiny_preprocessor(), pooling="last_avg")
    first = OnnxEncoder(encoder, cache_dir=tmp_path)
    assert exports == [first.folder]
    # The same encoder, or one built alike with other prompts: the same export.
    rebuilt = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg",
                                   prompts={"query": "the "})
    for same in (encoder, rebuilt):
        assert OnnxEncoder(same, cache_dir=tmp_path).folder == first.folder
    assert len(exports) == 1
    # Whatever changes the vectors is a new export, with the new vectors.
    changed = {
        "pooling": kcse.SentenceEncoder(backbone, tiny_preprocessor(), pooling="cls"),
        "normalize": kcse.SentenceEncoder(backbone, tiny_preprocessor(), pooling="last_avg",
                                          normalize=True),
        "max length": kcse.SentenceEncoder(backbone, tiny_preprocessor(8),
                                           pooling="last_avg"),
    }
    folders = {first.folder}
    for name, other in changed.items():
        fast = OnnxEncoder(other, cache_dir=tmp_path)
        assert fast.folder not in folders, name
        folders.add(fast.folder)
        np.testing.assert_allclose(fast.encode(TEXTS), other.encode(TEXTS), atol=TOLERANCE)
    assert OnnxEncoder(encoder, quantize="int8", cache_dir=tmp_path).folder not in folders
    assert len(exports) == 5
    embeddings = backbone.token_embedding.embeddings
    embeddings.assign(embeddings.numpy() * 2)  # Trained further, say.
    fast = OnnxEncoder(encoder, cache_dir=tmp_path)
    assert len(exports) == 6 and fast.folder not in folders
    np.testing.assert_allclose(fast.encode(TEXTS), encoder.encode(TEXTS), atol=TOLERANCE)
    assert not np.allclose(first.encode(TEXTS), encoder.encode(TEXTS), atol=TOLERANCE)


def test_the_cache_folder_defaults_to_the_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("KCSE_ONNX_CACHE", str(tmp_path / "cache"))
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    fast = OnnxEncoder(encoder)
    assert fast.folder.parent == tmp_path / "cache"
    assert (fast.folder / "model.onnx").is_file()
    assert not [path for path in (tmp_path / "cache").iterdir() if path != fast.folder]


def test_a_missing_onnxruntime_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *rest: None if name == "onnxruntime"
                        else find_spec(name, *rest))
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    with pytest.raises(ImportError) as raised:
        OnnxEncoder(encoder, cache_dir=tmp_path)
    assert str(raised.value) == (
        "kcse.OnnxEncoder needs the packages tf2onnx, onnx, onnxruntime (the onnx extra: "
        "pip install 'kcse[onnx]'); missing: onnxruntime")
    assert not list(tmp_path.iterdir())


def test_an_encoder_the_export_refuses_is_one_line_and_leaves_no_cache(tmp_path):
    encoder = kcse.SentenceEncoder(tiny_bert(), preprocessor=None, pooling="last_avg")
    with pytest.raises(ValueError) as raised:
        OnnxEncoder(encoder, cache_dir=tmp_path)
    assert str(raised.value).startswith(
        "kcse.OnnxEncoder: this encoder does not export to ONNX: the encoder has no "
        "preprocessor")
    assert "\n" not in str(raised.value)
    assert not list(tmp_path.iterdir())
    with pytest.raises(ValueError, match="quantize='int4': expected None or one of"):
        OnnxEncoder(encoder, quantize="int4", cache_dir=tmp_path)


def test_kcse_encode_runtime_onnxruntime(tmp_path, monkeypatch, capsys):
    from command_runs import kcse_in_process
    from kcse.commands.main import main

    monkeypatch.setenv("KCSE_ONNX_CACHE", str(tmp_path / "cache"))
    model, texts = tiny_encoder_file(tmp_path, 30)
    out = kcse_in_process(capsys, "encode", "--model", model, "--input", texts,
                          "--output", tmp_path / "v.npy", "--runtime", "onnxruntime",
                          "--normalize")
    (folder,) = (tmp_path / "cache").iterdir()
    assert f"runtime: ONNX Runtime, {folder}" in out
    encoder = keras.saving.load_model(model)
    expected = encoder.encode(texts.read_text().splitlines())
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), expected, atol=TOLERANCE)

    assert main(["encode", "--model", str(model), "--input", str(texts), "--output",
                 str(tmp_path / "w.npy"), "--quantize", "int8"]) == 2
    assert ("--quantize int8: only --runtime onnxruntime runs a quantised model"
            in capsys.readouterr().err)
    assert not (tmp_path / "w.npy").exists()


JAX_READS_THE_CACHE = """
import sys, pathlib
import keras, numpy as np
import kcse
folder = pathlib.Path(sys.argv[1])
encoder = keras.saving.load_model(folder / "tiny.keras")
texts = (folder / "texts.txt").read_text().splitlines()
fast = kcse.OnnxEncoder(encoder, cache_dir=folder / "cache")
np.save(folder / "jax.npy", np.stack([fast.encode(texts), encoder.encode(texts)]))
print(fast.folder)
try:
    kcse.OnnxEncoder(encoder, cache_dir=folder / "empty")
except RuntimeError as error:
    print(error)
"""


def test_on_jax_an_onnx_encoder_reads_the_export_tensorflow_made(tmp_path):
    """The same `.keras` encoder on JAX: the cache key is the TensorFlow
    process's, so its export is read, and ONNX Runtime's vectors equal the
    JAX encoder's `encode`; with no export yet, one line says to make it on
    TensorFlow, and nothing is written."""
    import os
    import subprocess
    import sys

    pytest.importorskip("jax")
    model, texts = tiny_encoder_file(tmp_path, 6)
    made = OnnxEncoder(keras.saving.load_model(model), cache_dir=tmp_path / "cache")
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run([sys.executable, "-c", JAX_READS_THE_CACHE, str(tmp_path)],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    folder, message = run.stdout.strip().splitlines()[-2:]
    assert folder == str(made.folder)
    onnx_vectors_on_jax, jax_vectors = np.load(tmp_path / "jax.npy")
    np.testing.assert_allclose(onnx_vectors_on_jax, jax_vectors, atol=TOLERANCE)
    np.testing.assert_allclose(onnx_vectors_on_jax, made.encode(texts.read_text().splitlines()),
                               atol=TOLERANCE)
    assert message.startswith(f"kcse.OnnxEncoder: no export of this encoder in "
                              f"{tmp_path / 'empty'} yet, and the export runs on the "
                              "TensorFlow backend (this process uses 'jax')")
    assert not (tmp_path / "empty").exists()
