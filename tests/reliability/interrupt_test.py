"""Ctrl-C: one line, exit 130, earlier files intact, no temporaries.

Each case runs a command as a user does, in its own session, and sends
SIGINT to its whole process group (what a terminal's Ctrl-C does) at a
moment: when a line appears on its output (the model loaded, training
started, a cell finished) or when its temporary file appears (the write
under way). The folder must then hold exactly the files it held before
(byte for byte) plus what the command says it kept.
"""

import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from kcse.experiments.results.store import ResultStore
from kcse.experiments.results.store import is_finished
from conftest import tiny_encoder_file
from tiny_grid import RECIPES
from tiny_grid import tiny_task_and_model

TIMEOUT_SECONDS = 300
# Lines that TensorFlow's C++ start-up writes to stderr whatever the log level.
NOISE = re.compile(r"absl::InitializeLog|cuda|cpu_feature_guard|AVX|rebuild TensorFlow")


def interrupt(command, when, folder=None, delay=0.0, again=None):
    """Runs `command`, sends SIGINT once `when` holds (and again `again`
    seconds later, when given: a user pressing Ctrl-C twice), returns
    (code, stdout, kcse's stderr lines). `when`: a text its output prints,
    or "temporary": a hidden file appears in `folder`."""
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                                         PYTHONUNBUFFERED="1"))
    output, seen = [], threading.Event()

    def read():
        for line in process.stdout:
            output.append(line)
            if when != "temporary" and when in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    began = time.time()
    while not seen.is_set() and process.poll() is None:
        if when == "temporary" and any(".tmp" in path.name for path in folder.rglob(".*")):
            seen.set()
        assert time.time() - began < TIMEOUT_SECONDS, f"{when!r} never came"
        time.sleep(0.002)
    assert process.poll() is None, f"ended before {when!r}: {process.stderr.read()}"
    time.sleep(delay)
    os.killpg(process.pid, signal.SIGINT)
    if again is not None:
        time.sleep(again)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
    stderr = process.stderr.read()
    code = process.wait(TIMEOUT_SECONDS)
    reader.join()
    lines = [line for line in stderr.splitlines() if line.strip() and not NOISE.search(line)]
    return code, "".join(output), lines


def kcse_command(*arguments):
    return [sys.executable, "-m", "kcse.commands.main", *map(str, arguments)]


def files(folder):
    return {str(path.relative_to(folder)): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def assert_interrupted(code, lines, folder, before):
    """Exit 130, one line; the files the line says were kept (written before
    the Ctrl-C came) are new, every other file is as it was."""
    assert code == 130, lines
    assert len(lines) == 1 and " interrupted; " in lines[0], lines
    kept = set()
    if "; kept " in lines[0]:
        named = lines[0].split("; kept ", 1)[1].split(" (written before")[0]
        kept = {str(pathlib.Path(path).relative_to(folder)) for path in named.split(", ")}
    now = files(folder)
    assert kept <= set(now)
    assert {name: content for name, content in now.items() if name not in kept} == {
        name: content for name, content in before.items() if name not in kept}
    assert not [path for path in folder.rglob(".*") if ".tmp" in path.name], (
        "a temporary was left behind")


@pytest.fixture(scope="module")
def model_and_texts(tmp_path_factory):
    return tiny_encoder_file(tmp_path_factory.mktemp("model"), 30000)


@pytest.fixture
def earlier(tmp_path):
    """An output folder with the files an earlier run left."""
    folder = tmp_path / "out"
    (folder / "served").mkdir(parents=True)
    (folder / "served" / "saved_model.pb").write_bytes(b"earlier export")
    (folder / "served" / "kcse_export.json").write_text(  # What kcse wrote there.
        '{"written_by": "kcse", "files": ["saved_model.pb"]}\n')
    np.save(folder / "vectors.npy", np.ones((2, 8), "float32"))
    (folder / "encoder.keras").write_bytes(b"earlier encoder")
    (folder / "train.json").write_text("{}\n")
    return folder, files(folder)


@pytest.mark.parametrize("when", ["model: ", "temporary"])
def test_encode(model_and_texts, earlier, when):
    model, texts = model_and_texts
    folder, before = earlier
    code, _, lines = interrupt(kcse_command(
        "encode", "--model", model, "--input", texts, "--output", folder / "vectors.npy",
        "--overwrite"), when, folder)
    assert_interrupted(code, lines, folder, before)
    assert lines == ["kcse encode: interrupted; nothing written"]


@pytest.mark.parametrize("when,delay", [("model: ", 0.0), ("temporary", 0.5)])
def test_export(model_and_texts, earlier, when, delay):
    model, _ = model_and_texts
    folder, before = earlier
    code, _, lines = interrupt(kcse_command(
        "export", "--model", model, "--output", folder / "served", "--overwrite"),
        when, folder, delay)
    assert_interrupted(code, lines, folder, before)


@pytest.mark.parametrize("when,again", [("model: ", 0.05), ("model: ", 0.5),
                                        ("temporary", 0.05)])
def test_onnx_export_interrupted_twice(model_and_texts, earlier, when, again):
    """The second Ctrl-C lands wherever the export is (tf2onnx, ONNX
    Runtime, an import): the same one line as the first."""
    model, _ = model_and_texts
    folder, before = earlier
    code, _, lines = interrupt(kcse_command(
        "export", "--model", model, "--format", "onnx", "--quantize", "int8",
        "--output", folder / "served", "--overwrite"), when, folder, again=again)
    assert_interrupted(code, lines, folder, before)
    assert lines == ["kcse export: interrupted; nothing written"]


def test_errors_python_cannot_raise_are_dropped_after_a_ctrl_c():
    """A `__del__` failing after the interruption cut its `__init__` short
    (TensorFlow's ApiDefMap did) prints "Exception ignored" unless dropped."""
    code = (
        "import gc, signal\n"
        "from kcse.foundation import interrupts\n"
        "class Broken:\n"
        "    def __del__(self):\n"
        "        raise AttributeError('no _api_def_map')\n"
        "interrupts.install()\n"
        "Broken(); gc.collect()\n"  # Before a Ctrl-C: printed as Python does.
        "signal.raise_signal(signal.SIGINT)\n"
        "Broken(); gc.collect()\n"
        "try:\n"
        "    signal.raise_signal(signal.SIGINT)\n"
        "except KeyboardInterrupt:\n"
        "    print('second Ctrl-C raised')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "second Ctrl-C raised\n"
    assert result.stderr.count("Exception ignored") == 1, result.stderr


@pytest.mark.parametrize("when", ["test before", "temporary"])
def test_train(earlier, shared_data, when):
    folder, before = earlier
    model = tiny_task_and_model(folder.parent, shared_data)
    code, _, lines = interrupt(kcse_command(
        "train", "--model", model, "--pooling", "P1", "--data-dir", folder.parent / "data",
        "--task", "STS-B", "--protocol", "su", "--sentences", "64", "--batch-size", "16",
        "--output", folder, "--overwrite"), when, folder)
    assert_interrupted(code, lines, folder, before)


def test_recipe_keeps_the_cells_it_finished(tmp_path, shared_data):
    model = tiny_task_and_model(tmp_path, shared_data)
    folder = tmp_path / "out"
    command = [sys.executable, str(RECIPES / "chinese_simcse.py"), "--models", model,
               "--tasks", "STS-B", "--poolings", "P1,P4", "--data-dir", tmp_path / "data",
               "--output", folder, "--sentences", "64", "--batch-size", "16"]
    command = list(map(str, command))
    folder.mkdir()
    code, _, lines = interrupt(command, "model tiny_bert: ", folder)
    assert_interrupted(code, lines, folder, {})
    assert lines[0].endswith("interrupted; no cell finished, nothing written")
    code, output, lines = interrupt(command, "[1/2]", folder)
    assert "[1/2]" in output and code == 130
    assert lines == [f"chinese_simcse.py: interrupted; {folder}/results.json keeps the "
                     "1 cell(s) this run finished"]
    stored = ResultStore(folder).cells
    assert len(stored) == 1 and all(map(is_finished, stored.values()))
    assert sorted(path.name for path in folder.iterdir()) == [
        ".results.json.claims", ".results.json.lock", "report.html", "results.json",
        "results.md", "su_table.md"]
