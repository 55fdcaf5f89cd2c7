"""results.json / results.md of a comparison grid, resumable cell by cell."""

import json
import os
import pathlib

SCHEMA = "kcse.comparison/2"
COLUMNS = ("raw", "whitening", "trained")


def cell_key(model, pooling, task, protocol, method):
    return f"{model}|{pooling}|{task}|{protocol}|{method}"


class ResultStore:
    """The results of a grid, saved after every cell so a rerun resumes.

    `results.json` (schema `"kcse.comparison/2"`):

    ```
    {"schema": "kcse.comparison/2",
     "cells": {"<model>|<pooling>|<task>|<protocol>|<method>": {
         "model", "pooling", "task", "protocol", "source": str,
         "method": str,                     # simcse, consert, sg_opt, ...
         "reported_split": "test",          # the split results.md shows
         "raw" | "whitening" | "trained": { # a, b, c of Su's table
             "<split>": {"spearman": float, "pearson": float, "n": int}},
                                            # a, b: every split; c: the
                                            # protocol's trained_splits
         "published": [a, b, c] or null,    # Su's SimCSE cell, if any
         "training_samples": int,           # sentences, triplets or pairs
         "whitening_sentences": int,
         "seconds": float,
         "settings": {...}}}}               # protocol, method's, seed
    ```

    Spearman and Pearson are ×100. `results.md` is written beside it.
    """

    def __init__(self, directory):
        self.directory = pathlib.Path(directory)
        self.json_path = self.directory / "results.json"
        self.markdown_path = self.directory / "results.md"
        self.cells = {}
        if self.json_path.is_file():
            try:
                stored = json.loads(self.json_path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"{self.json_path} is not valid JSON ({error}); move it "
                    "away to start a new comparison."
                ) from error
            if stored.get("schema") != SCHEMA:
                raise ValueError(
                    f"{self.json_path} has schema {stored.get('schema')!r}, "
                    f"not {SCHEMA!r}."
                )
            self.cells = stored["cells"]

    def has(self, key):
        return key in self.cells

    def add(self, key, record):
        """Stores one finished cell and rewrites both files atomically."""
        self.cells[key] = record
        self.directory.mkdir(parents=True, exist_ok=True)
        _write_atomically(
            self.json_path,
            json.dumps({"schema": SCHEMA, "cells": self.cells}, indent=1),
        )
        _write_atomically(self.markdown_path, self.markdown())

    def markdown(self):
        """Su's layout: a row per model-pooling-method, "a / b / c" per task."""
        cells = list(self.cells.values())
        tasks = list(dict.fromkeys(cell["task"] for cell in cells))
        rows = list(dict.fromkeys(row_of(cell) for cell in cells))
        by_key = {row_of(c) + (c["task"],): c for c in cells}
        lines = [
            "# Chinese sentence-embedding comparison",
            "",
            "Each cell: **a / b / c** = raw / BERT-whitening / trained by the "
            "row's method, Spearman ×100 on the split named in the cell; for "
            "unsupervised SimCSE, below it Su Jianlin's published cell and "
            "ours minus his (Δ). Su does not say which split his table shows.",
            "",
            "| model | pooling | protocol | method | " + " | ".join(tasks) + " |",
            "|---|---|---|---|" + "---|" * len(tasks),
        ]
        for row in rows:
            entries = [format_cell(by_key.get(row + (task,))) for task in tasks]
            lines.append(f"| {' | '.join(row)} | " + " | ".join(entries) + " |")
        return "\n".join(lines) + "\n"


def row_of(cell):
    """A cell's table row: (model, pooling, protocol, method)."""
    return cell["model"], cell["pooling"], cell["protocol"], cell["method"]


def text_table(cells):
    """A plain-text table of cells for the terminal: ours beside Su's."""
    header = (
        f"{'model':<14}{'pooling':<8}{'task':<7}{'split':<6}{'method':<12}"
        f"{'a raw':>9}{'b whiten':>10}{'c trained':>11}   Su a / b / c"
    )
    lines = [header, "-" * len(header)]
    for cell in cells.values():
        a, b, c = abc(cell)
        published = cell.get("published")
        su = " / ".join(f"{v:.2f}" for v in published) if published else "-"
        lines.append(
            f"{cell['model']:<14}{cell['pooling']:<8}{cell['task']:<7}"
            f"{cell['reported_split']:<6}{cell['method']:<12}"
            f"{a:>9.2f}{b:>10.2f}{c:>11.2f}   {su}"
        )
    return "\n".join(lines)


def abc(cell):
    """The (a, b, c) Spearman of a cell on its reported split."""
    split = cell["reported_split"]
    return tuple(cell[column][split]["spearman"] for column in COLUMNS)


def format_cell(cell):
    if cell is None:
        return ""
    ours = abc(cell)
    text = " / ".join(f"{value:.2f}" for value in ours) + f" ({cell['reported_split']})"
    published = cell.get("published")
    if published:
        delta = " / ".join(f"{o - p:+.2f}" for o, p in zip(ours, published))
        text += (
            "<br>Su " + " / ".join(f"{p:.2f}" for p in published) + f"<br>Δ {delta}"
        )
    return text


def _write_atomically(path, text):
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)
