"""Issue 11, "Export is total": a SavedModel that cannot run on its own
declared inputs is never written. The export runs both signatures (an
empty batch and a text longer than the maximum length included) before it
swaps the folder into place."""

import importlib
import pathlib
import shutil

import keras_hub
import numpy as np
import pytest
import tensorflow as tf

import kcse
from conftest import tiny_bert
from conftest import tiny_preprocessor
from conftest import tiny_vocabulary
from kcse.export import saved_model as export

ID_INPUTS = ("token_ids", "segment_ids", "padding_mask")
DIM = 8  # tiny_bert's hidden_dim


def load(path):
    importlib.import_module("tensorflow_text")  # the string signature's ops
    return tf.saved_model.load(str(path))


def snapshot(folder):
    """Every file under `folder`, by relative path, with its bytes."""
    folder = pathlib.Path(folder)
    return {
        str(file.relative_to(folder)): file.read_bytes()
        for file in sorted(folder.rglob("*"))
        if file.is_file()
    }


@pytest.mark.filterwarnings("ignore:.*longer than the maximum length")
def test_export_checks_before_the_swap_and_serves_edge_inputs(tmp_path, monkeypatch):
    # CLS pooling slices token 0: a [0, 0] batch of ids failed before the
    # signatures returned an empty embedding for an empty batch.
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="cls")
    path = tmp_path / "exported"
    checked = []
    check = export.check_saved_model

    def spy(folder, *args):
        assert not path.exists()  # not swapped in yet
        assert folder.parent == tmp_path and folder.name.startswith(".exported.")
        check(folder, *args)
        checked.append(args[-1])

    monkeypatch.setattr(export, "check_saved_model", spy)
    assert encoder.export(path) == ["encode_ids", "serving_default"]
    assert checked == [["encode_ids", "serving_default"]]
    assert [p.name for p in tmp_path.iterdir()] == ["exported"]

    model = load(path)
    strings = model.signatures["serving_default"]
    empty = strings(texts=tf.zeros([0], tf.string))["embedding"]
    assert empty.shape == (0, DIM) and empty.dtype == tf.float32
    long_text = " ".join(["the red dog was slow"] * 60)  # 300 words; 12 tokens fit
    served = strings(texts=tf.constant([long_text, ""]))["embedding"].numpy()
    np.testing.assert_allclose(served, encoder.encode([long_text, ""]), atol=1e-5)
    ids = model.signatures["encode_ids"]
    for shape in ([0, 12], [0, 0]):
        out = ids(**{name: tf.zeros(shape, tf.int32) for name in ID_INPUTS})["embedding"]
        assert out.shape == (0, DIM) and out.dtype == tf.float32


class FailsOnEmptyBatch(keras_hub.models.BertTextEmbedderPreprocessor):
    """A preprocessor whose graph raises on a batch of no strings."""

    def call(self, x, y=None, sample_weight=None):
        tf.debugging.assert_positive(tf.size(x), message="no strings to tokenize")
        return super().call(x, y, sample_weight)


def nan_whitening():
    whitening = kcse.layers.Whitening(n_components=4)
    encoder = kcse.SentenceEncoder(
        tiny_bert(seed=1), tiny_preprocessor(), pooling="last_avg", whitening=whitening
    )
    whitening.kernel.assign(np.full((DIM, 4), np.nan, "float32"))
    return encoder


def raises_on_empty_batch():
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=tiny_vocabulary())
    return kcse.SentenceEncoder(
        tiny_bert(seed=2), FailsOnEmptyBatch(tokenizer, sequence_length=12)
    )


def differs_from_encode(monkeypatch):
    encoder = kcse.SentenceEncoder(tiny_bert(seed=3), tiny_preprocessor())
    encode = encoder.encode
    monkeypatch.setattr(encoder, "encode", lambda texts, **kw: encode(texts, **kw) + 0.01)
    return encoder


BROKEN = {
    "nan_whitening": (
        nan_whitening,
        "serving_default failed on a batch of 3 ordinary strings: 'embedding' has "
        r"\d+ non-finite values",
    ),
    "raises_on_empty_batch": (
        raises_on_empty_batch,
        r"(?s)serving_default failed on an empty batch \(shape \[0\]\): "
        r"InvalidArgumentError: .*no strings to tokenize",
    ),
    "differs_from_encode": (
        differs_from_encode,
        "serving_default failed on a batch of 3 ordinary strings: 'embedding' differs "
        "from the in-process encoder's vectors",
    ),
}


@pytest.fixture(scope="module")
def good_export(tmp_path_factory):
    """A folder written by a successful export, copied by the tests."""
    path = tmp_path_factory.mktemp("good") / "exported"
    kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor()).export(path)
    return path


@pytest.mark.parametrize("previous", [True, False], ids=["over_previous", "fresh_path"])
@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_failed_check_writes_nothing(tmp_path, monkeypatch, good_export, broken, previous):
    path = tmp_path / "exported"
    if previous:
        shutil.copytree(good_export, path)
        before, inode = snapshot(path), path.stat().st_ino
        assert "saved_model.pb" in before
    make, message = BROKEN[broken]
    encoder = make(monkeypatch) if broken == "differs_from_encode" else make()
    with pytest.raises(export.ExportCheckError, match=message):
        encoder.export(path)
    if previous:
        assert path.stat().st_ino == inode
        assert snapshot(path) == before  # byte for byte
        assert [p.name for p in tmp_path.iterdir()] == ["exported"]
    else:
        assert not path.exists()
        assert list(tmp_path.iterdir()) == []  # no temporary sibling either


def test_ids_only_encoder_is_checked_on_fixed_token_ids(tmp_path, capsys):
    # No preprocessor: encode_ids only, checked on fixed ids and empty batches.
    encoder = kcse.SentenceEncoder(tiny_bert(seed=4), None, pooling="cls")
    assert encoder.export(tmp_path / "ids") == ["encode_ids"]
    assert "no 'serving_default'" in capsys.readouterr().out
    ids = load(tmp_path / "ids").signatures["encode_ids"]
    out = ids(**{name: tf.zeros([0, 0], tf.int32) for name in ID_INPUTS})["embedding"]
    assert out.shape == (0, DIM)

    whitening = kcse.layers.Whitening(n_components=4)
    broken = kcse.SentenceEncoder(tiny_bert(seed=4), None, whitening=whitening)
    whitening.kernel.assign(np.full((DIM, 4), np.inf, "float32"))
    with pytest.raises(
        export.ExportCheckError,
        match="encode_ids failed on 2 rows of fixed token ids: 'embedding' has",
    ):
        broken.export(tmp_path / "broken")
    assert [p.name for p in tmp_path.iterdir()] == ["ids"]


def save_then_change(monkeypatch, name, change):
    """Makes `tf.saved_model.save` rewrite the file `variables/<name>` it
    wrote as `change(its bytes)`, before the export's check reads it."""
    save = tf.saved_model.save

    def save_and_change(module, folder, **kwargs):
        save(module, folder, **kwargs)
        written = pathlib.Path(folder, "variables", name)
        written.write_bytes(change(written.read_bytes()))

    monkeypatch.setattr(tf.saved_model, "save", save_and_change)


def test_a_checkpoint_that_differs_from_the_weights_is_never_swapped_in(tmp_path, monkeypatch):
    # The check runs the SavedModel on the encoder's own variables and
    # compares the checkpoint with them byte for byte: one flipped bit in
    # the data file fails the export.
    encoder = kcse.SentenceEncoder(tiny_bert(seed=5), tiny_preprocessor())

    def flip_a_bit(data):
        data = bytearray(data)
        data[100] ^= 1
        return bytes(data)

    save_then_change(monkeypatch, "variables.data-00000-of-00001", flip_a_bit)
    with pytest.raises(export.ExportCheckError,
                       match=r"the SavedModel written to .*: the weight '.*' "
                             r"\('weights/\d+/.ATTRIBUTES/VARIABLE_VALUE'\) differs in rows"):
        encoder.export(tmp_path / "exported")
    assert list(tmp_path.iterdir()) == []


def test_the_check_runs_the_savedmodel_on_the_encoders_variables(good_export):
    # Against TensorFlow's own loader, which restores a copy of the weights.
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor())
    variables = export.backing_variables(encoder)
    shared = export.loaded_with_variables(good_export, variables)
    assert all(own is variable for own, variable in zip(shared.weights, variables))
    texts = tf.constant(export.CHECK_TEXTS)
    served = shared.signatures["serving_default"](texts=texts)["embedding"].numpy()
    restored = load(good_export).signatures["serving_default"](texts=texts)["embedding"]
    np.testing.assert_array_equal(served, restored.numpy())
    assert export.stored_variables_problem(good_export, variables) is None
    assert export.stored_variables_problem(good_export, variables[1:]) == (
        f"its checkpoint lists {len(variables)} weights, not {len(variables) - 1}")


def test_an_unreadable_checkpoint_index_is_a_check_error(tmp_path, monkeypatch):
    encoder = kcse.SentenceEncoder(tiny_bert(seed=6), tiny_preprocessor())
    # Without its last 8 bytes, the table's magic number.
    save_then_change(monkeypatch, "variables.index", lambda data: data[:-8])
    with pytest.raises(export.ExportCheckError,
                       match=r"its checkpoint index cannot be read: .*variables.index: "
                             "not a TensorFlow checkpoint index"):
        encoder.export(tmp_path / "exported")
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_holding_more_than_the_weights_is_a_problem(tmp_path):
    module = tf.Module()
    module.weights = [tf.Variable([1.0, 2.0])]
    module.step = tf.Variable(3)
    tf.saved_model.save(module, str(tmp_path))
    assert export.stored_variables_problem(tmp_path, module.weights) == (
        "its checkpoint holds values besides the weights: ['step/.ATTRIBUTES/VARIABLE_VALUE']")


@pytest.fixture(scope="module")
def encoder_file(tmp_path_factory):
    from conftest import tiny_encoder_file

    return tiny_encoder_file(tmp_path_factory.mktemp("model"), 2)[0]


def test_onnx_without_its_packages_is_refused_before_the_model_loads(
        encoder_file, tmp_path, monkeypatch, capsys):
    from kcse.commands import export
    from kcse.commands.main import main as kcse_main

    monkeypatch.setattr(export, "ONNX_PACKAGES", ("onnx", "kcse_no_such_package"))
    monkeypatch.setattr(export, "load_encoder", lambda *args, **kwargs: pytest.fail("loaded"))
    code = kcse_main(["export", "--model", str(encoder_file), "--format", "onnx",
                     "--output", str(tmp_path / "served")])
    assert code == 2
    assert capsys.readouterr().err.splitlines() == [
        "kcse export: error: --format onnx needs the packages onnx, kcse_no_such_package: "
        "pip install kcse_no_such_package"]


@pytest.mark.parametrize("step", ["onnx.checker", "ONNX Runtime", "quantiser"])
def test_onnx_library_failures_are_one_line_naming_the_file(
        encoder_file, tmp_path, monkeypatch, capsys, step):
    """onnx.checker's ValidationError, ONNX Runtime's load error and the
    quantiser's (with room on the disk: not a full disk) were tracebacks."""
    import onnx
    import onnxruntime
    from onnxruntime import quantization

    from kcse.commands.main import main as kcse_main

    def fail(*args, **kwargs):
        raise {"onnx.checker": onnx.checker.ValidationError,
               "ONNX Runtime": onnxruntime.capi.onnxruntime_pybind11_state.Fail,
               "quantiser": ValueError}[step]("damaged graph")

    target = {"onnx.checker": (onnx.checker, "check_model"),
              "ONNX Runtime": (onnxruntime, "InferenceSession"),
              "quantiser": (quantization, "quantize_dynamic")}[step]
    monkeypatch.setattr(*target, fail)
    code = kcse_main(["export", "--model", str(encoder_file), "--format", "onnx",
                     "--quantize", "int8", "--output", str(tmp_path / "served")])
    expected = {
        "onnx.checker": "model.onnx is not a valid ONNX model (onnx.checker): damaged graph",
        "ONNX Runtime": "ONNX Runtime could not load the converted encoder (pooling "
                        "'last_avg'): Fail: damaged graph",
        "quantiser": "ONNX Runtime could not quantise model.onnx to model_int8.onnx: "
                     "ValueError: damaged graph"}[step]
    assert code == 1
    assert capsys.readouterr().err.splitlines() == [
        f"kcse export: error: {expected}; nothing written"]
    assert list(tmp_path.iterdir()) == []
