"""A save SIGKILLed at any moment leaves a loadable file: the old or the new.

Each kill moment gets a fresh writer subprocess (kill_writer.py; no
`os.fork`: forking a process that has imported TensorFlow is not
supported). A writer imports what its writes need, prints "ready" and
waits on stdin for one JSON command naming what to write and where; it
then rewrites that file in a loop until it is killed. The test polls the
folder for the writer's temporary file, waits the moment's delay and
SIGKILLs the writer. The folder must then hold a complete file, equal to
the one that was there before or to the one being written.

An encoder writer imports TensorFlow, seconds of CPU, so writers are
started ahead of need: while one moment runs, `SPARES` more writers are
already importing, and each is given its folder only when its turn comes.
A results writer imports no TensorFlow.

No writer outlives the test: each is killed once its moment is over or
has failed, the test's fixture kills the spares, and a writer whose stdin
closes (the test process died) exits on its own.
"""

import collections
import json
import os
import pathlib
import select
import shutil
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

import kcse
from conftest import tiny_bert
from conftest import tiny_preprocessor
from kcse.foundation import atomic_files
from kcse.experiments.results.store import ResultStore
from kcse.experiments.results.store import SCHEMA
from kcse.experiments.results import tables
from kcse.experiments.results.report_html import report_html
from kill_writer import new_encoder
from results_cells import CELLS
from results_cells import grid_cell

TESTS = pathlib.Path(__file__).resolve().parent

# Seconds from the temporary's appearance to the SIGKILL: while the
# temporary is still empty, while it is being written, and (0.25) most
# likely after at least one complete write.
MOMENTS = (0.0, 0.001, 0.005, 0.02, 0.05, 0.25)
POLL_SECONDS = 0.0005
TIMEOUT_SECONDS = 120
# Writers importing kcse while a moment runs: one per CPU, 1 to 3 (an
# import is CPU-bound; more would only slow each other down).
CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
SPARES = min(max(CPUS, 1), 3)

class Writer:
    """One writer subprocess of `kind`, started to import and wait for a command."""

    def __init__(self, kind, stderr_path):
        self.stderr_path = stderr_path
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
        with open(stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, str(TESTS / "kill_writer.py"), kind],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                env=env, bufsize=0,
            )

    def stderr(self):
        return self.stderr_path.read_text(errors="replace")[-3000:]

    def read_line(self):
        """The next line the writer prints (fails after TIMEOUT_SECONDS)."""
        deadline = time.monotonic() + TIMEOUT_SECONDS
        received = b""
        while not received.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            readable = remaining > 0 and select.select([self.process.stdout], [], [], remaining)[0]
            byte = os.read(self.process.stdout.fileno(), 1) if readable else b""
            if not byte:
                pytest.fail(f"the writer printed {received!r} and stopped:\n{self.stderr()}")
            received += byte
        return received.decode().strip()

    def kill_while_writing(self, command, folder, pattern, delay):
        """Runs `command`; SIGKILLs the writer `delay` s after a temporary `pattern` appears.

        Returns the sizes of the temporaries left behind: a temporary left
        by a killed writer shows that the kill came in the middle of a write.
        """
        try:
            assert self.read_line() == "ready"
            before = set(folder.glob(pattern))
            self.process.stdin.write((json.dumps(list(map(str, command))) + "\n").encode())
            deadline = time.monotonic() + TIMEOUT_SECONDS
            while not set(folder.glob(pattern)) - before:
                if self.process.poll() is not None:
                    pytest.fail(f"the writer ended ({self.process.returncode}):\n{self.stderr()}")
                assert time.monotonic() < deadline, f"no {pattern} appeared in {folder}"
                time.sleep(POLL_SECONDS)
            time.sleep(delay)
            self.process.send_signal(signal.SIGKILL)
            status = self.process.wait(timeout=TIMEOUT_SECONDS)
            assert status == -signal.SIGKILL, f"the writer ended ({status}):\n{self.stderr()}"
        finally:
            self.kill()
        return sorted(path.stat().st_size for path in set(folder.glob(pattern)) - before)

    def kill(self):
        """SIGKILLs the writer if it still runs, and waits for it."""
        try:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait(timeout=TIMEOUT_SECONDS)
        finally:
            self.process.stdin.close()
            self.process.stdout.close()


class Writers:
    """Hands out fresh writers of `kind`; while one runs, up to `SPARES` more import.

    `planned`: how many writers the test will take, retries aside. No
    spare is started beyond them: a retry starts its writer when it needs it.
    """

    def __init__(self, folder, kind, planned):
        self.folder = folder
        self.kind = kind
        self.started = []
        self.spares = collections.deque()
        self.to_take = planned

    def start(self):
        writer = Writer(self.kind, self.folder / f"writer{len(self.started)}.stderr")
        self.started.append(writer)
        return writer

    def start_spares(self):
        while len(self.spares) < min(SPARES, self.to_take):
            self.spares.append(self.start())

    def kill_while_writing(self, command, folder, pattern, delay):
        """`Writer.kill_while_writing` by the oldest spare, while new spares start."""
        writer = self.spares.popleft() if self.spares else self.start()
        self.to_take -= 1
        self.start_spares()
        return writer.kill_while_writing(command, folder, pattern, delay)

    def close(self):
        """Kills every writer still running: the spares, or one a failure left."""
        for writer in self.started:
            if writer.process.poll() is None:
                writer.process.kill()
        for writer in self.started:
            writer.kill()


def started_writers(kind, folder):
    """Yields the writers of `kind` for one test, the first spares started."""
    writers = Writers(folder, kind, planned=len(MOMENTS))
    try:
        writers.start_spares()
        yield writers
    finally:
        writers.close()


@pytest.fixture
def encoder_writers(tmp_path_factory):
    yield from started_writers("encoder", tmp_path_factory.mktemp("writers"))


@pytest.fixture
def results_writers(tmp_path_factory):
    yield from started_writers("results", tmp_path_factory.mktemp("writers"))


def kill_at_every_moment(kill_once, legend):
    """`kill_once(i, delay)` for each of MOMENTS; asserts a kill hit a temporary.

    Each call returns a tuple ending with the temporaries its kill left
    behind. A busy machine can delay the SIGKILL of a short write until
    after its rename, so the first moment is tried again a few times if no
    kill came while a temporary existed.
    """
    outcomes = [kill_once(i, delay) for i, delay in enumerate(MOMENTS)]
    while not any(outcome[-1] for outcome in outcomes) and len(outcomes) < 2 * len(MOMENTS):
        outcomes.append(kill_once(len(outcomes), MOMENTS[0]))
    print(f"{legend}:", outcomes)
    assert any(outcome[-1] for outcome in outcomes), f"no kill during a write: {outcomes}"


def progress_of(path):
    """The last write the writer reported complete (0: none)."""
    lines = path.read_text().split() if path.exists() else []
    return int(lines[-1]) if lines else 0


def assert_only_the_files_and_temporaries(folder, names, pattern):
    left = {path.name for path in folder.iterdir()} - {path.name for path in folder.glob(pattern)}
    assert left == set(names), f"{folder} holds {sorted(left)}"


def same_weights(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.large
def test_a_killed_encoder_save_leaves_the_old_or_the_new_encoder(tmp_path, encoder_writers):
    old = kcse.SentenceEncoder(tiny_bert(seed=0), tiny_preprocessor(), pooling="cls")
    old.save(tmp_path / "old.keras")
    old_weights = old.get_weights()
    # What every writer saves: the same seeded encoder, built here once.
    new_weights = new_encoder().get_weights()
    assert not same_weights(new_weights, old_weights)
    pattern = ".encoder.keras.*.tmp.keras"

    def kill_once(i, delay):
        folder, progress = tmp_path / f"kill{i}", tmp_path / f"progress{i}"
        folder.mkdir()
        shutil.copyfile(tmp_path / "old.keras", folder / "encoder.keras")
        left = encoder_writers.kill_while_writing(
            ["encoder", folder, progress], folder, pattern, delay)
        assert_only_the_files_and_temporaries(folder, ["encoder.keras"], pattern)
        loaded = keras.saving.load_model(folder / "encoder.keras")
        assert isinstance(loaded, kcse.SentenceEncoder) and loaded.pooling == "cls"
        weights = loaded.get_weights()
        found = ("old" if same_weights(weights, old_weights)
                 else "new" if same_weights(weights, new_weights) else "neither")
        assert found in ("old", "new"), f"killed after {delay} s: a third set of weights"
        saves = progress_of(progress)
        if saves:  # a save had completed, renaming its file into place
            assert found == "new", f"killed after {delay} s and {saves} saves"
        return delay, found, saves, left

    kill_at_every_moment(kill_once, "delay, file found, completed saves, temporaries left (bytes)")


def version(number):
    """The cells after `number` writes (0: the grid the writer starts from)."""
    cells = {}
    for index in range(CELLS):
        latest = max((n for n in range(index + 1, number + 1, CELLS)), default=0)
        key, record = grid_cell(index, latest)
        cells[key] = record
    return atomic_files.strict(cells)


def reject_constant(name):
    raise ValueError(f"{name} is not JSON")


@pytest.mark.large
def test_a_killed_results_write_leaves_the_old_or_the_new_results(tmp_path, results_writers):
    start = version(0)

    def kill_once(i, delay):
        folder, progress = tmp_path / f"grid{i}", tmp_path / f"progress{i}"
        atomic_files.write_json(folder / "results.json", {"schema": SCHEMA, "cells": start})
        atomic_files.write_text(folder / "results.md", tables.markdown(start))
        atomic_files.write_text(folder / "su_table.md", tables.su_markdown(start))
        atomic_files.write_text(folder / "report.html", report_html(start, folder))
        left = results_writers.kill_while_writing(
            ["results", folder, progress], folder, ".results.json.*.tmp.json", delay)
        # The lock file stays beside results.json (ResultStore's docstring).
        assert_only_the_files_and_temporaries(
            folder, ["results.json", "results.md", "su_table.md", "report.html",
                     ".results.json.lock"],
            ".*.tmp.*")
        text = (folder / "results.json").read_text(encoding="utf-8")
        json.loads(text, parse_constant=reject_constant)
        cells = ResultStore(folder).cells
        # The writer reports a write once the four files are in place: the
        # kill leaves that write or the next one, whose results.md,
        # su_table.md and report.html may still be the ones before.
        reached = progress_of(progress)
        stored = next((n for n in (reached, reached + 1) if cells == version(n)), None)
        assert stored is not None, f"killed after {delay} s: neither write {reached} nor the next"
        markdown = (folder / "results.md").read_text(encoding="utf-8")
        assert markdown in {tables.markdown(version(n)) for n in (stored, max(stored - 1, 0))}
        su_table = (folder / "su_table.md").read_text(encoding="utf-8")
        assert su_table in {tables.su_markdown(version(n))
                            for n in (stored, max(stored - 1, 0))}
        report = (folder / "report.html").read_text(encoding="utf-8")
        assert report in {report_html(version(n), folder)
                          for n in (stored, max(stored - 1, 0))}
        return delay, stored, left

    kill_at_every_moment(kill_once, "delay, write found, results.json temporaries left (bytes)")
