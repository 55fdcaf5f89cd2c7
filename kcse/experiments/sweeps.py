"""ConSERT's ablations as sweeps: one setting over several values, a table each.

A sweep runs the comparison grid of `recipes/consert.py` once per value of
one setting, every other setting as the flags give it, all into one
results folder: results.json keys each cell by its settings, so the values
sit side by side and a rerun skips the cells already computed; the raw
vectors, which no value changes, are encoded once. Then it
writes `ablation_<sweep>.md`: per model and pooling, a row per value with
column c (Spearman ×100 on the reported split) per task and their average,
under the untrained a and b, which no value changes. The `views` sweep also
draws ConSERT's Figure 5 as a heatmap (`ablation_views.png`, with
matplotlib): rows the first view, columns the second.

The sweeps (`SWEEPS`), from ConSERT's paper (Yan et al., 2021; seeds
`000_aab5f32fefa2c676.txt`, its slides, and `004_432fa8387c9c631c.txt`,
its translation), their default values ConSERT's paper settings in the
method registry (`kcse.experiments.methods.consert.PAPER_SETTINGS`, each
with its source):

- `views`: every pair of none, shuffle, token_cutoff, feature_cutoff and
  dropout (Figure 5), at the paper's rates (§3.2: token cutoff 0.15,
  feature cutoff 0.2, dropout 0.2) unless `--values` names others.
  ConSERT's loss is symmetric in its two views, so each unordered pair is
  trained once and fills both of its heatmap cells.
- `temperature`: NT-Xent's τ (Figure 7; ConSERT's best 0.1. The seeds
  hold Figure 7's caption but not the temperatures it plots: the default
  values are kcse's, around 0.1).
- `batch-size`: Table 4's sizes, 16, 48, 96, 192, 288.
- `sentences`: training sentences per task, the few-shot setting (ConSERT
  reports results comparable to the full data from 1,000).
- `nli-max-square`: the NLI head's input with and without ConSERT's
  max(r1, r2)² (the seed's Concat(r1, r2, |r1 − r2|) is SBERT's), in the
  supervised modes (`--mode joint --nli FILE`).

Standard library only: the recipe checks its flags before TensorFlow starts.

Example:
```python
from kcse.experiments.sweeps import SWEEPS, sweep_values

sweep_values(SWEEPS["views"], "none,shuffle")
# [['none', 'none'], ['none', 'shuffle'], ['shuffle', 'shuffle']]
sweep_values(SWEEPS["temperature"], "0.05,0.1")  # [0.05, 0.1]
SWEEPS["views"].values  # 'none,shuffle,token_cutoff:0.15,feature_cutoff:0.2,dropout:0.2'

```
"""

import argparse
import copy
import dataclasses
import itertools
import math
import pathlib
import sys

from kcse.foundation import arguments
from kcse.foundation import atomic_files
from kcse.experiments.methods.consert import PAPER_SETTINGS
from kcse.layers.view_specs import split_view


def view_pairs(text):
    """Every unordered pair (a view with itself included) of a list of views."""
    views = arguments.comma_list(text)
    for view in views:
        try:
            split_view(view)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    if len(set(views)) != len(views):
        raise argparse.ArgumentTypeError(f"a view is named twice in {text!r}")
    return [list(pair) for pair in itertools.combinations_with_replacement(views, 2)]


@dataclasses.dataclass(frozen=True)
class Sweep:
    """One ablation: the flag it varies and its default values.

    Attributes:
        name: its `--sweep` name.
        flag: the recipe's flag each value sets (its argparse `dest` is
            `flag` without dashes, `-` as `_`).
        values: the default `--values`, text as the user would write it.
        parse: `--values` text to the list of values, each as the flag's
            own type gives it; raises `argparse.ArgumentTypeError`.
        source: where in ConSERT's paper the sweep comes from.
    """

    name: str
    flag: str
    values: str
    parse: object
    source: str

    @property
    def dest(self):
        return self.flag.lstrip("-").replace("-", "_")


def _numbers(kind):
    def parse(text):
        return [kind(value) for value in arguments.comma_list(text)]
    return parse


def _yes_no(text):
    answers = {"yes": True, "no": False}
    values = arguments.comma_list(text)
    unknown = [value for value in values if value not in answers]
    if unknown:
        raise argparse.ArgumentTypeError(f"yes or no; got {', '.join(unknown)}")
    return [answers[value] for value in values]


def _paper_values(setting):
    """A paper setting's values as `--values` is written."""
    return ",".join(map(str, PAPER_SETTINGS[setting].value))


SWEEPS = {sweep.name: sweep for sweep in (
    Sweep("views", "--views", _paper_values("ablation_views"), view_pairs,
          PAPER_SETTINGS["ablation_views"].source),
    Sweep("temperature", "--temperature", _paper_values("ablation_temperatures"),
          _numbers(arguments.positive_number),
          PAPER_SETTINGS["ablation_temperatures"].source),
    Sweep("batch-size", "--batch-size", _paper_values("ablation_batch_sizes"),
          _numbers(arguments.integer(minimum=2)),
          PAPER_SETTINGS["ablation_batch_sizes"].source),
    Sweep("sentences", "--sentences", "100,1000,10000",
          _numbers(arguments.positive_integer),
          "few-shot: training sentences per task"),
    Sweep("nli-max-square", "--nli-max-square", "yes,no", _yes_no,
          "the NLI head with and without max(r1, r2)² (the supervised modes)"),
)}


def sweep_values(sweep, text=None):
    """The values of `sweep`: `text` (the `--values` flag) or its defaults."""
    return sweep.parse(sweep.values if text is None else text)


def sweep_runs(args, sweep, values, default=None):
    """One argument namespace per value: `args` with the swept flag set.

    The swept flag itself given as well (not its `default`) is a
    `UsageError`, as are a `sentences` sweep over PAWSX, which the
    protocols train on every sentence whatever `--sentences` says, and a
    sweep of the NLI head without an NLI stage.
    """
    if getattr(args, sweep.dest, None) != default:
        raise arguments.UsageError(
            f"--sweep {sweep.name} sets {sweep.flag} per value: give the values "
            f"with --values, not {sweep.flag}")
    if sweep.name == "sentences" and "PAWSX" in getattr(args, "tasks", ()):
        raise arguments.UsageError(
            "--sweep sentences: kcse's protocols train PAWSX on all its sentences (as Su) "
            "whatever --sentences says; leave PAWSX out of --tasks")
    if sweep.name == "nli-max-square" and getattr(args, "mode", "unsup") == "unsup":
        raise arguments.UsageError(
            "--sweep nli-max-square varies the NLI head: give --mode sup, joint, "
            "sup-unsup or joint-unsup with --nli FILE")
    runs = []
    for value in values:
        run = copy.copy(args)
        setattr(run, sweep.dest, value)
        runs.append(run)
    return runs


def value_label(value):
    """A value as the table shows it: a view pair as `a + b`."""
    if isinstance(value, (list, tuple)):
        return " + ".join(value)
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def sweep_rows(sweep, values, cells_per_value, tasks):
    """`{(model, pooling): rows}` of the ablation table (header first).

    `cells_per_value[i]` are the cells (results.json records) the grid
    computed for `values[i]`. Columns: the value, then c per task and the
    average over the tasks (`-` where a cell has no c); the first two rows
    are the untrained a and b, the same for every value.
    """
    from kcse.experiments.cell_record import reported

    def score(cell, column):
        if cell is None or cell.get("status") != "done":
            return None
        return reported(cell, column)[0]

    groups = {}
    for value, cells in zip(values, cells_per_value):
        for cell in cells:
            group = groups.setdefault((cell["model"], cell["pooling"]), {})
            group.setdefault(value_label(value), {})[cell["task"]] = cell
    tables = {}
    for group, by_value in groups.items():
        header = (sweep.name, *tasks, "avg")
        first = {task: next((row[task] for row in by_value.values() if task in row), None)
                 for task in tasks}
        rows = [header]
        for label, column in (("a raw", "raw"), ("b whitening", "whitening")):
            rows.append((label, *_with_average([score(first[t], column) for t in tasks])))
        for label, row in by_value.items():
            rows.append((label, *_with_average(
                [score(row.get(task), "trained") for task in tasks])))
        tables[group] = rows
    return tables


def _with_average(scores):
    numbers = [score for score in scores if score is not None]
    average = sum(numbers) / len(numbers) if len(numbers) == len(scores) and numbers else None
    return [_number(score) for score in (*scores, average)]


def _number(value):
    return "-" if value is None or not math.isfinite(value) else f"{value:.2f}"


def sweep_markdown(sweep, values, cells_per_value, tasks, settings_text):
    """`ablation_<sweep>.md`: one table per model and pooling."""
    lines = [f"# ConSERT ablation: {sweep.name}", "",
             f"{sweep.source} (ConSERT, Yan et al. 2021), swept with "
             f"`{sweep.flag}`. Spearman ×100 on each cell's reported split "
             "(test): c trained with each value; a raw and b whitening do not "
             "depend on it. avg: the mean over the tasks. Every other setting: "
             f"{settings_text}.", ""]
    for (model, pooling), rows in sweep_rows(sweep, values, cells_per_value, tasks).items():
        lines += [f"## {model} / {pooling}", ""]
        lines.append("| " + " | ".join(rows[0]) + " |")
        lines.append("|" + "---|" * len(rows[0]))
        lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
        lines.append("")
    return "\n".join(lines)


def heatmap_matrix(views, cells_by_pair, task):
    """ConSERT's Figure 5 as a matrix: c of `task` for each (first, second)
    view, each unordered pair's cell in both places (NaN: no number)."""
    import numpy as np

    from kcse.experiments.cell_record import reported

    matrix = np.full((len(views), len(views)), np.nan)
    index = {view: i for i, view in enumerate(views)}
    for (first, second), cells in cells_by_pair.items():
        for cell in cells:
            if cell["task"] == task and cell.get("status") == "done" and cell.get("trained"):
                value = reported(cell, "trained")[0]
                matrix[index[first], index[second]] = value
                matrix[index[second], index[first]] = value
    return matrix


def plot_heatmap(path, views, matrix, title):
    """A PNG of `matrix` (rows the first view, columns the second), each
    square annotated with its number. Needs matplotlib; returns `path`."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(1.3 * len(views) + 2, 1.1 * len(views) + 1.5),
                    layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    image = axes.imshow(matrix, cmap="viridis")
    axes.set_xticks(range(len(views)), views, rotation=30, ha="right")
    axes.set_yticks(range(len(views)), views)
    axes.set_xlabel("2nd view")
    axes.set_ylabel("1st view")
    for (i, j), value in np.ndenumerate(matrix):
        axes.text(j, i, "-" if value != value else f"{value:.2f}", ha="center",
                  va="center", color="white", fontsize=10)
    figure.colorbar(image, ax=axes, label="Spearman ×100")
    axes.set_title(title, fontsize=12)
    figure.savefig(path, dpi=110)
    figure.clear()
    return path


def write_sweep(output, sweep, values, stores_and_keys, tasks, settings_text, plot):
    """Writes `ablation_<sweep>.md` (and the views' heatmaps) into `output`;
    returns the paths written."""
    cells_per_value = [[store.cells[key] for key in keys if key in store.cells]
                       for store, keys in stores_and_keys]
    output = pathlib.Path(output)
    path = output / f"ablation_{sweep.name}.md"
    atomic_files.write_text(path, sweep_markdown(sweep, values, cells_per_value,
                                                 tasks, settings_text))
    written = [path]
    if sweep.name == "views" and plot:
        views = list(dict.fromkeys(view for pair in values for view in pair))
        cells_by_pair = {tuple(pair): cells for pair, cells in zip(values, cells_per_value)}
        groups = {(cell["model"], cell["pooling"]) for cells in cells_per_value
                  for cell in cells}
        for model, pooling in sorted(groups):
            for task in tasks:
                chosen = {pair: [cell for cell in cells if (cell["model"], cell["pooling"])
                                 == (model, pooling)]
                          for pair, cells in cells_by_pair.items()}
                matrix = heatmap_matrix(views, chosen, task)
                name = f"ablation_views_{model}_{pooling}_{task}.png".replace("/", "_")
                with atomic_files.replacing(output / name) as temporary:
                    plot_heatmap(temporary, views, matrix,
                                 f"ConSERT views: {model} / {pooling} / {task}")
                written.append(output / name)
    return written


def sweep_main(doc, output, argv=None):
    """`recipes/consert_ablations.py`: ConSERT's recipe flags (with its
    recipe's default rows, the pooling ConSERT reports: `method_poolings`)
    plus `--sweep` and `--values`; runs one grid per value, then writes the
    sweep's table.
    Bad flags exit 2 with one line before any work; failed cells exit 1
    after the table is written."""
    from kcse.experiments.command_line import add_method_arguments
    from kcse.experiments.command_line import check_comparison_arguments
    from kcse.experiments.command_line import comparison_parser
    from kcse.experiments.recipe_runs import exit_for_failed_cells
    from kcse.experiments.recipe_runs import finished_cells
    from kcse.experiments.command_line import method_poolings
    from kcse.experiments.recipe_runs import one_line_stops
    from kcse.experiments.recipe_runs import run_grids
    from kcse.experiments.recipe_runs import write_mteb_output

    parser = comparison_parser(doc, output, method_poolings("consert"),
                               methods=["consert"])
    add_method_arguments(parser, ["consert"])
    group = parser.add_argument_group("sweep")
    group.add_argument("--sweep", choices=tuple(SWEEPS), required=True,
                       help="the setting to vary: " + "; ".join(
                           f"{s.name}: {s.source} (default values {s.values})"
                           for s in SWEEPS.values()))
    group.add_argument("--values", help="the sweep's values, comma-separated "
                       "(views: the heatmap's views, each pair of them is run)")
    try:
        args = parser.parse_args(argv)
        sweep = SWEEPS[args.sweep]
        try:
            values = sweep_values(sweep, args.values)
        except argparse.ArgumentTypeError as error:
            raise arguments.UsageError(f"--values: {error}") from None
        runs = sweep_runs(args, sweep, values, parser.get_default(sweep.dest))
        for run in runs:
            check_comparison_arguments(run, "consert")
    except arguments.UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        sys.exit(2)
    with one_line_stops(parser.prog, lambda: finished_cells(args.output)):
        results = run_grids(parser.prog, runs, "consert")
        store = results[-1][0]
        store.reload()
        settings_text = (f"models {','.join(args.models)}, poolings "
                         f"{','.join(args.poolings)}, protocol {args.protocol}, the "
                         "settings results.md lists")
        written = write_sweep(args.output, sweep, values,
                              [(store, keys) for _, keys in results], args.tasks,
                              settings_text, plot=_has_matplotlib())
        write_mteb_output(args, [(store, keys) for _, keys in results])
        print("wrote " + ", ".join(str(path) for path in written)
              + ("" if sweep.name != "views" or _has_matplotlib() else
                 " (no heatmap: it needs matplotlib, pip install -e \".[plot]\")"))
        exit_for_failed_cells(parser.prog, store,
                              [key for _, keys in results for key in keys])
        return store


def _has_matplotlib():
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None
