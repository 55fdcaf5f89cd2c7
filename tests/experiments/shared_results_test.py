"""Several runs writing one results folder: no cell lost, no cell twice.

`ResultStore.add` merges its cell with what is on disk under a lock, and a
run computes a cell only after claiming it (`ResultStore.claim`). Readers
polling results.json see a complete file at every moment (each write is
a rename).
"""

import json
import os
import signal
import subprocess
import sys
import threading

from kcse.foundation import atomic_files
from kcse.experiments.results.store import ResultStore
from kcse.experiments.results.store import SCHEMA
from kcse.experiments.results.store import is_finished
from kcse.experiments.results import tables
from results_cells import grid_cell
from tiny_grid import RECIPES
from tiny_grid import tiny_task_and_model

TIMEOUT_SECONDS = 600


class Reader(threading.Thread):
    """Reads results.json (and results.md) in a loop until stopped: every
    read that finds the files must parse as a kcse comparison."""

    def __init__(self, folder):
        super().__init__(daemon=True)
        self.folder, self.stop, self.reads, self.errors = folder, threading.Event(), 0, []

    def run(self):
        while not self.stop.is_set():
            try:
                text = (self.folder / "results.json").read_text(encoding="utf-8")
                markdown = (self.folder / "results.md").read_text(encoding="utf-8")
            except FileNotFoundError:
                continue
            try:
                stored = json.loads(text)
                assert stored["schema"] == SCHEMA and isinstance(stored["cells"], dict)
                assert markdown.startswith("# ") and markdown.endswith("\n")
                self.reads += 1
            except (ValueError, AssertionError, KeyError) as error:
                self.errors.append(f"{type(error).__name__}: {error}")

    def finish(self):
        self.stop.set()
        self.join()
        assert not self.errors, self.errors[:3]
        return self.reads


def test_writers_in_threads_keep_every_cell(tmp_path):
    """Eight stores, one per thread (as eight runs), add 15 cells each."""
    reader = Reader(tmp_path)
    reader.start()
    cells = [grid_cell(index, index + 1) for index in range(120)]

    def write(start):
        store = ResultStore(tmp_path)
        for key, record in cells[start::8]:
            assert store.claim(key)
            store.add(key, record)

    threads = [threading.Thread(target=write, args=(start,)) for start in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert reader.finish() > 0
    stored = ResultStore(tmp_path).cells
    assert stored == atomic_files.strict(dict(cells))
    markdown = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert markdown == tables.markdown(stored)
    assert not list(tmp_path.glob(".results.json.claims/*")), "claims left behind"


def test_a_claimed_cell_is_left_to_its_run_until_it_ends(tmp_path):
    key, record = grid_cell(0, 1)
    first, second = ResultStore(tmp_path), ResultStore(tmp_path)
    assert first.claim(key)
    assert not second.claim(key) and not second.finished(key)
    first.release(key)  # The run gave up the cell (it failed to start, say).
    assert second.claim(key)
    second.add(key, record)
    assert not first.claim(key) and first.finished(key)
    assert first.cells[key] == atomic_files.strict(record)  # As JSON stores it.

    # A run that dies (SIGKILL) holding a claim releases it with its process.
    other, _ = grid_cell(1, 2)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from kcse.experiments.results.store import ResultStore\n"
         "store = ResultStore(sys.argv[1])\n"
         f"assert store.claim({other!r})\n"
         "print('claimed', flush=True)\ntime.sleep(600)", str(tmp_path)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline() == "claimed\n"
    assert not first.claim(other)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    assert first.claim(other)


def test_a_cell_missing_a_required_field_is_not_done(tmp_path):
    key, record = grid_cell(0, 1)
    ResultStore(tmp_path).add(key, record)
    stored = json.loads((tmp_path / "results.json").read_text())
    del stored["cells"][key]["trained"]  # Edited by hand.
    (tmp_path / "results.json").write_text(json.dumps(stored))
    store = ResultStore(tmp_path)
    assert not store.finished(key) and store.claim(key)


def run_recipes(tmp_path, shared_data, poolings):
    """Starts one recipe process per item of `poolings` at once, on one
    --output, while a reader polls it; returns their (code, stdout, stderr).
    """
    model = tiny_task_and_model(tmp_path, shared_data)
    output = tmp_path / "out"
    reader = Reader(output)
    reader.start()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    processes = [subprocess.Popen(
        [sys.executable, str(RECIPES / "chinese_simcse.py"), "--models", model,
         "--tasks", "STS-B", "--poolings", pooling, "--data-dir", str(tmp_path / "data"),
         "--output", str(output), "--sentences", "64", "--batch-size", "16"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for pooling in poolings]
    ran = [(process.wait(TIMEOUT_SECONDS), *process.communicate()) for process in processes]
    reader.finish()
    return output, ran


def test_two_recipes_on_one_output_keep_both_cells(tmp_path, shared_data):
    output, ran = run_recipes(tmp_path, shared_data, ["P1", "P4"])
    for code, stdout, stderr in ran:
        assert code == 0, stderr[-2000:]
        assert "[1/1]" in stdout
    cells = ResultStore(output).cells
    assert sorted(cell["pooling"] for cell in cells.values()) == ["P1", "P4"]
    assert all(map(is_finished, cells.values()))
    assert (output / "results.md").read_text(encoding="utf-8") == tables.markdown(cells)
