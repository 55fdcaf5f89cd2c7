"""results.json of a comparison grid, resumable cell by cell, shared by runs.

The store keeps every cell under its identity (`identity.cell_key`) and
rewrites results.json, results.md, su_table.md (`tables`) and report.html
(`report_html`) atomically, under a lock, after each cell.
"""

import contextlib
import json
import os
import pathlib

from kcse.foundation import atomic_files
from kcse import distribution
from kcse.foundation import file_locks
from kcse.foundation.digests import content_digest
from kcse.experiments.cell_record import DONE
from kcse.experiments.results.report_html import report_html
from kcse.experiments.results.tables import CHINESE_TITLE
from kcse.experiments.results.tables import markdown
from kcse.experiments.results.tables import su_markdown

SCHEMA = "kcse.comparison/3"


class ResultsFileError(ValueError):
    """results.json is unreadable, or not a kcse comparison of this schema."""


class ResultStore:
    """The results of a grid, saved after every cell so that a rerun resumes.

    `results.json` (schema `"kcse.comparison/3"`, strict JSON: an undefined
    number is `null`):

    ```
    {"schema": "kcse.comparison/3",
     "cells": {"<model>|<pooling>|<task>|<protocol>|<method>|<digest>": {
         "model": str,                      # the name given on the command line
         "model_source": {"source", "family", "prefix", "digest",
                          "description"},   # what was loaded
         "pooling", "task", "protocol", "method": str,
         "status": "done" | "failed", "error": str or null,
         "reported_split": "test",
         "raw" | "whitening" | "flow" | "all_but_the_top":
             {"<split>": {"spearman", "pearson", "n"}},
                                            # "flow" (BERT-flow) and
                                            # "all_but_the_top" with
                                            # --postprocess ...,flow or
                                            # ...,all-but-the-top only (with
                                            # "all_but_the_top_directions");
                                            # null: the task lacks the
                                            # protocol's whitening splits
         "trained": {"<split>": {"spearman", "spearman_std", "pearson",
                                 "pearson_std", "n", "runs"}} or null,
                                            # mean and sample std over seeds
         "trained_whitening": {...} or null,  # c+w, as "trained": with
                                            # --postprocess ...,trained-whitening
                                            # only; null without b or c
         "untrained": str or null,          # why there is no c (no data; a model
                                            # the method cannot train)
         "diagnostics": {"raw": {...}, "trained": {...} or null},
                                            # with --diagnostics only:
                                            # kcse.evaluation.anisotropy_report
         "runs": [{"seed", "scores": {"<split>": {...}}, "kept_step",
                   "training_seconds", "training_samples",
                   "whitened_scores", "whitening_null_directions"}],
                                            # the last two with c+w only
         "published": [a, b, c] or null,    # Su's SimCSE cell, same model only
         "training_samples": int, "whitening_sentences": int,
         "whitening_null_directions": int,  # zeroed by Whitening, not scaled
         "seconds": float,
         "settings": {...}, "settings_id": str,   # protocol, method, seeds;
                                            # "precision" unless float32
         "numerics": int,                   # NUMERICS of the code (absent: 1)
         "data_digest": str,
         "provenance": {"kcse", "keras", "keras_hub", "tensorflow",
                        "backend", "git_commit", "date"}}}}
    ```

    Spearman and Pearson are ×100. `results.md`, `su_table.md` (the
    cells in Su's layout: `su_markdown`) and `report.html` (the same
    layout with Su's colours and the cells' plots: `report_html`) are
    written beside it. All four files are replaced atomically: a reader
    never sees a partial file. A
    results.json that is not valid JSON or not of this schema raises
    `ResultsFileError` and is never overwritten.

    Any number of runs may share one results folder (two recipe processes
    with one `--output`, on two GPUs say). Every `add` holds an exclusive
    lock (`flock` on `.results.json.lock`, a file kept beside results.json)
    while it reads the cells on disk, adds its own and rewrites the
    files: no run drops another's cells. A run computes a cell only after
    claiming it (`claim`): a cell another live run is computing, or has
    finished since, is left to that run. Claims are `flock`s too, so a run
    that dies releases its claims with its process. On a file system
    without locks (some network mounts) kcse warns once and writes without
    them: runs sharing such a folder may then drop each other's cells.
    """

    def __init__(self, directory, title=CHINESE_TITLE):
        self.directory = pathlib.Path(directory)
        self.title = title
        self.json_path = self.directory / "results.json"
        self.markdown_path = self.directory / "results.md"
        self.su_table_path = self.directory / "su_table.md"
        self.report_path = self.directory / "report.html"
        self.lock_path = self.directory / ".results.json.lock"
        self.claims_path = self.directory / ".results.json.claims"
        self.cells = {}
        self._claims = {}
        self.reload()
        self.check_lock_files()

    def check_lock_files(self):
        """Raises `ResultsFileError` naming the lock file or the claims
        folder when something else is at its path (a folder, a file, a
        broken link): found before any model loads, not at the first cell."""
        for path, kind, is_kind, held in (
                (self.lock_path, "file", os.path.isfile, "the folder's lock"),
                (self.claims_path, "folder", os.path.isdir, "the claims of cells under way")):
            if os.path.lexists(path) and not is_kind(path):
                raise ResultsFileError(f"{path} is not a {kind} (kcse keeps {held} "
                                       "there); remove it or choose another --output")

    def reload(self):
        """Reads the cells on disk (other runs' included) into `cells`."""
        if self.json_path.exists():
            self.cells = read_cells(self.json_path)

    def finished(self, key):
        """Whether cell `key` is stored, succeeded and has every field its
        schema requires (`REQUIRED_FIELDS`); failed or damaged cells rerun."""
        return is_finished(self.cells.get(key))

    def claim(self, key):
        """Whether this run may compute cell `key`: True once it holds the
        cell's claim and the cell is not finished on disk.

        False when another live run holds the claim, or finished the cell
        (`cells` then has its record). The claim is released by `add` of
        the cell, `release`, or the end of the process.
        """
        if not distribution.is_chief():
            return not self.finished(key)  # Process 0 claims for the run.
        self.claims_path.mkdir(parents=True, exist_ok=True)
        claim = file_locks.claim_file(self.claims_path / content_digest(key), UNLOCKED_RISK)
        if claim is False:
            return False
        with self._locked():
            self.reload()
        if self.finished(key):
            file_locks.release(claim)
            return False
        self._claims[key] = claim
        return True

    def release(self, key):
        """Gives up the claim on cell `key`, if this run holds it."""
        claim = self._claims.pop(key, None)
        if claim is not None:
            file_locks.release(claim, self.claims_path / content_digest(key))

    def add(self, key, record):
        """Stores one cell and rewrites the four files atomically.

        Under the folder's lock: the cells on disk are read again and this
        cell added to them, so cells other runs added are kept. In a
        multi-process run (`kcse.distribution`) only process 0 writes:
        every process computes the same cells.
        """
        self.cells[key] = record
        if not distribution.is_chief():
            return
        with self._locked():
            self.reload()
            self.cells[key] = record
            atomic_files.write_json(self.json_path, {"schema": SCHEMA, "cells": self.cells})
            atomic_files.write_text(self.markdown_path, markdown(self.cells, self.title))
            atomic_files.write_text(self.su_table_path, su_markdown(self.cells, self.title))
            atomic_files.write_text(self.report_path,
                                    report_html(self.cells, self.directory, self.title))
        self.release(key)

    @contextlib.contextmanager
    def _locked(self):
        """Holds the folder's exclusive lock (blocking) for the body."""
        self.directory.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a") as lock:
            if file_locks.lock(lock, blocking=True, risk=UNLOCKED_RISK):
                try:
                    yield
                finally:
                    file_locks.unlock(lock)
            else:
                yield


# What a finished cell holds; a cell without one of them (edited by hand,
# or written by a run that died in an older kcse) is computed again.
REQUIRED_FIELDS = ("model", "model_source", "pooling", "task", "protocol", "method",
                   "status", "reported_split", "raw", "whitening", "trained",
                   "settings", "settings_id", "provenance")


def is_finished(cell):
    """Whether a stored cell succeeded and has all of `REQUIRED_FIELDS`."""
    return (isinstance(cell, dict) and cell.get("status") == DONE
            and all(field in cell for field in REQUIRED_FIELDS))


# What a results folder risks where files cannot be locked.
UNLOCKED_RISK = "runs sharing this results folder may drop each other's cells"


def read_cells(path):
    """The cells of a results.json; `ResultsFileError` naming what is wrong."""
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ResultsFileError(
            f"{path} is not readable JSON ({error}); move it away or choose "
            "another --output"
        ) from None
    schema = stored.get("schema") if isinstance(stored, dict) else None
    if schema != SCHEMA or not isinstance(stored.get("cells"), dict):
        found = f"schema {schema!r}" if schema else "no kcse schema"
        raise ResultsFileError(
            f"{path} has {found}, not {SCHEMA!r} (a file of another program or "
            "an older kcse, whose cells do not record their settings); move it "
            "away or choose another --output"
        )
    return stored["cells"]
