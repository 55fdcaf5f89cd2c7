"""Sweeps: one setting of a method over several values, a table each.

A sweep runs the comparison grid of a method's recipe once per value of
one setting, every other setting as the flags give it, all into one
results folder: results.json keys each cell by its settings, so the values
sit side by side and a rerun skips the cells already computed; the raw
vectors, which no value changes, are encoded once. Then it writes
`ablation_<sweep>.md`: per model and pooling, a row per value with column
c (Spearman ×100 on the reported split) per task and their average, under
the untrained a and b, which no value changes. ConSERT's `views` sweep
also draws its Figure 5 as a heatmap (`ablation_views.png`, with
matplotlib): rows the first view, columns the second.

`--sweep NAME=V1,V2,...` sweeps any flag of the method's recipe
(`--sweep learning-rate=1e-5,3e-5`), each value read as the flag reads it
(a switch: yes or no); `--sweep NAME` alone runs a preset (`SWEEPS`) with
the values of its paper, which the method registry keeps with their
sources (`PAPER_SETTINGS` of each method):

- simcse: `dropout`, 0, 0.05, 0.1, 0.15, 0.2, 0.3 and "fixed 0.1" (one
  dropout mask for both views: `--same-dropout-mask`; seed 003's Table 3
  of Gao et al.), and `batch-size`, 32 to 512 (seed 003's reproduction).
- sg_opt: `temperature` (τ), `regularization` (λ) and `projection-head`
  (with and without), seed 001's ablation table.
- consert (Yan et al., 2021; seeds 000 and 004): `views`, every pair of
  none, shuffle, token_cutoff, feature_cutoff and dropout (Figure 5) at the
  paper's rates (§3.2: token cutoff 0.15, feature cutoff 0.2, dropout 0.2);
  ConSERT's loss is symmetric in its two views, so each unordered pair is
  trained once and fills both of its heatmap cells. `temperature`
  (Figure 7; ConSERT's best 0.1; the seeds hold Figure 7's caption but not
  the temperatures it plots: the default values are kcse's, around 0.1).
  `batch-size` (Table 4: 16, 48, 96, 192, 288). `sentences`, the few-shot
  setting (ConSERT reports results comparable to the full data from
  1,000). `nli-max-square`: the NLI head's input with and without
  ConSERT's max(r1, r2)² (the seed's Concat(r1, r2, |r1 − r2|) is
  SBERT's), in the supervised modes (`--mode joint --nli FILE`).

Standard library only: the recipes check their flags before TensorFlow starts.

Example:
```python
from kcse.experiments.sweeps import SWEEPS, sweep_values

sweep_values(SWEEPS["consert"]["views"], "none,shuffle")
# [['none', 'none'], ['none', 'shuffle'], ['shuffle', 'shuffle']]
sweep_values(SWEEPS["consert"]["temperature"], "0.05,0.1")  # [0.05, 0.1]
dropout = SWEEPS["simcse"]["dropout"]
[dropout.label(value) for value in sweep_values(dropout, "0.1,fixed:0.1")]
# ['0.1', 'fixed 0.1']
dropout.settings(sweep_values(dropout, "fixed:0.1")[0])
# {'dropout': 0.1, 'same_dropout_mask': True}
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
from kcse.experiments.methods import METHODS
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


def value_label(value):
    """A value as the table shows it: a view pair as `a + b`, a switch yes or no."""
    if isinstance(value, (list, tuple)):
        return " + ".join(map(str, value))
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


@dataclasses.dataclass(frozen=True)
class Sweep:
    """One sweep: the flag it varies and its default values.

    Attributes:
        name: its `--sweep` name.
        flag: the recipe's flag each value sets (its argparse `dest` is
            `flag` without dashes, `-` as `_`).
        values: the default values, text as `--sweep NAME=...` takes them.
        parse: that text to the list of values, each as the flag's own
            type gives it; raises `argparse.ArgumentTypeError`.
        source: where the sweep and its values come from.
        to_settings: a value to `{dest: value}` of the flags it sets (None:
            `{dest: value}`).
        to_label: a value to its row's label (None: `value_label`).
    """

    name: str
    flag: str
    values: str
    parse: object
    source: str
    to_settings: object = None
    to_label: object = None

    @property
    def dest(self):
        return self.flag.lstrip("-").replace("-", "_")

    def settings(self, value):
        """The flags (argparse dests) a value sets, and to what."""
        return self.to_settings(value) if self.to_settings else {self.dest: value}

    def label(self, value):
        return (self.to_label or value_label)(value)


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


def _dropouts(text):
    """Rates, and `fixed:R`: rate R with one mask for both views."""
    values = []
    for value in arguments.comma_list(text):
        kind, _, rate = value.rpartition(":")
        if kind not in ("", "fixed"):
            raise argparse.ArgumentTypeError(f"a rate or fixed:RATE; got {value!r}")
        values.append(("fixed", arguments.rate(rate)) if kind else arguments.rate(rate))
    return values


def _dropout_settings(value):
    fixed = isinstance(value, tuple)
    return {"dropout": value[1] if fixed else value, "same_dropout_mask": fixed}


def _dropout_label(value):
    return f"fixed {value[1]}" if isinstance(value, tuple) else str(value)


def _paper(method, setting):
    """A method's paper setting as a `Sweep`'s values and source."""
    paper = METHODS[method].paper_settings[setting]
    return {"values": ",".join(value_label(value) for value in paper.value),
            "source": paper.source}


# The presets: `{method: {sweep name: Sweep}}`.
SWEEPS = {
    "consert": {sweep.name: sweep for sweep in (
        Sweep("views", "--views", parse=view_pairs, **_paper("consert", "ablation_views")),
        Sweep("temperature", "--temperature", parse=_numbers(arguments.positive_number),
              **_paper("consert", "ablation_temperatures")),
        Sweep("batch-size", "--batch-size", parse=_numbers(arguments.integer(minimum=2)),
              **_paper("consert", "ablation_batch_sizes")),
        Sweep("sentences", "--sentences", "100,1000,10000", _numbers(arguments.positive_integer),
              "few-shot: training sentences per task"),
        Sweep("nli-max-square", "--nli-max-square", "yes,no", _yes_no,
              "the NLI head with and without max(r1, r2)² (the supervised modes)"),
    )},
    "simcse": {sweep.name: sweep for sweep in (
        Sweep("dropout", "--dropout", parse=_dropouts, to_settings=_dropout_settings,
              to_label=_dropout_label, **_paper("simcse", "ablation_dropouts")),
        Sweep("batch-size", "--batch-size", parse=_numbers(arguments.integer(minimum=2)),
              **_paper("simcse", "ablation_batch_sizes")),
    )},
    "sg_opt": {sweep.name: sweep for sweep in (
        Sweep("temperature", "--temperature", parse=_numbers(arguments.positive_number),
              **_paper("sg_opt", "ablation_temperatures")),
        Sweep("regularization", "--regularization",
              parse=_numbers(arguments.non_negative_number),
              **_paper("sg_opt", "ablation_regularizations")),
        Sweep("projection-head", "--projection-head", parse=_yes_no,
              **_paper("sg_opt", "ablation_projection_head")),
    )},
}


def flag_sweep(parser, name):
    """A sweep of the recipe flag `--name` (not a preset): its values read
    by the flag's own type (a switch's as yes / no), none by default."""
    action = next((action for action in parser._actions
                   if f"--{name}" in action.option_strings), None)
    if action is None or action.dest in ("help", "sweep", "values", "method", "output"):
        raise arguments.UsageError(f"--sweep {name}: no flag --{name} to sweep")
    if action.nargs == 0:  # store_true, BooleanOptionalAction.
        parse = _yes_no
    else:
        def parse(text):
            values = arguments.comma_list(text)
            outside = [value for value in values
                       if action.choices is not None and value not in action.choices]
            if outside:
                raise argparse.ArgumentTypeError(
                    f"{', '.join(outside)} not among {', '.join(map(str, action.choices))}")
            try:
                return [action.type(value) if action.type else value for value in values]
            except ValueError as error:
                raise argparse.ArgumentTypeError(str(error)) from None
    return Sweep(name, f"--{name}", "", parse, f"--{name}, the values given")


def chosen_sweep(parser, method, text, values=None):
    """`(sweep, values)` of `--sweep text` (`NAME` or `NAME=V1,V2,...`) for
    `method`; `values`, the `--values` flag, is the same as `=V1,...`."""
    name, given, listed = text.partition("=")
    if given and values is not None:
        raise arguments.UsageError(f"--sweep {text} and --values: give the values once")
    listed = listed if given else values
    sweep = SWEEPS.get(method, {}).get(name) or flag_sweep(parser, name)
    if listed is None and not sweep.values:
        raise arguments.UsageError(
            f"--sweep {name} is no preset of --method {method} "
            f"({', '.join(SWEEPS.get(method, {})) or 'it has none'}): give its values, "
            f"--sweep {name}=V1,V2")
    try:
        return sweep, sweep_values(sweep, listed)
    except argparse.ArgumentTypeError as error:
        raise arguments.UsageError(f"--sweep {name}: {error}") from None


def sweep_values(sweep, text=None):
    """The values of `sweep`: `text` (`NAME=text` or `--values`) or its defaults."""
    return sweep.parse(sweep.values if text is None else text)


def sweep_runs(args, sweep, values, defaults):
    """One argument namespace per value: `args` with the swept flags set.

    `defaults`: `{dest: default}` of the recipe's parser. A swept flag
    given as well is a `UsageError`, as are a `sentences` sweep over PAWSX,
    which the protocols train on every sentence whatever `--sentences`
    says, and a sweep of ConSERT's NLI head without an NLI stage.
    """
    swept = {dest: defaults.get(dest) for value in values for dest in sweep.settings(value)}
    given = [dest for dest, default in swept.items() if getattr(args, dest, None) != default]
    if given:
        flags = ", ".join("--" + dest.replace("_", "-") for dest in swept)
        raise arguments.UsageError(
            f"--sweep {sweep.name} sets {flags} per value: give the values with "
            f"--sweep {sweep.name}=V1,V2, not {', '.join('--' + d.replace('_', '-') for d in given)}")
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
        for dest, setting in (swept | sweep.settings(value)).items():
            setattr(run, dest, setting)
        runs.append(run)
    return runs


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
            group.setdefault(sweep.label(value), {})[cell["task"]] = cell
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


def sweep_markdown(sweep, values, cells_per_value, tasks, settings_text, title):
    """`ablation_<sweep>.md`: one table per model and pooling; `title`: the method's."""
    lines = [f"# {title} ablation: {sweep.name}", "",
             f"{sweep.source}; swept with "
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


def write_sweep(output, sweep, values, stores_and_keys, tasks, settings_text, plot,
                title="ConSERT"):
    """Writes `ablation_<sweep>.md` (and ConSERT's views' heatmaps) into
    `output`; returns the paths written."""
    cells_per_value = [[store.cells[key] for key in keys if key in store.cells]
                       for store, keys in stores_and_keys]
    output = pathlib.Path(output)
    path = output / f"ablation_{sweep.name}.md"
    atomic_files.write_text(path, sweep_markdown(sweep, values, cells_per_value,
                                                 tasks, settings_text, title))
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


def sweep_main(doc, runs_folder, argv=None, method=None):
    """A sweep recipe: the comparison flags of `--method` (or of `method`,
    fixed), with its recipe's default rows (`method_poolings`), plus
    `--sweep NAME[=V1,...]` and `--values`; runs one grid per value into
    `--output` (default `runs_folder/<method>_ablations`), then writes the
    sweep's table. Bad flags exit 2 with one line before any work; failed
    cells exit 1 after the table is written."""
    from kcse.experiments.command_line import add_method_arguments
    from kcse.experiments.command_line import check_comparison_arguments
    from kcse.experiments.command_line import comparison_parser
    from kcse.experiments.command_line import method_poolings
    from kcse.experiments.recipe_runs import exit_for_failed_cells
    from kcse.experiments.recipe_runs import finished_cells
    from kcse.experiments.recipe_runs import one_line_stops
    from kcse.experiments.recipe_runs import run_grids
    from kcse.experiments.recipe_runs import write_mteb_output

    names = [method] if method else list(METHODS)
    parser = comparison_parser(doc, None, method_poolings(method) if method else None,
                               methods=names)
    if not method:
        parser.add_argument("--method", choices=tuple(METHODS), required=True,
                            help="the method whose setting is swept")
    add_method_arguments(parser, names)
    group = parser.add_argument_group("sweep")
    presets = "; ".join(f"{name}: {sweep.name} ({sweep.values})"
                        for name, sweeps in SWEEPS.items() if name in names
                        for sweep in sweeps.values())
    group.add_argument("--sweep", required=True, metavar="NAME[=V1,V2,...]",
                       help="the setting to vary: a flag of the recipe with its values, "
                       "or a preset with its paper's values: " + presets.replace("%", "%%"))
    group.add_argument("--values", help="the sweep's values, comma-separated, as "
                       "--sweep NAME=V1,V2 (ConSERT's views: each pair of them is run)")
    try:
        args = parser.parse_args(argv)
        method = method or args.method
        args.poolings = args.poolings or method_poolings(method)
        args.output = args.output or pathlib.Path(runs_folder) / f"{method}_ablations"
        sweep, values = chosen_sweep(parser, method, args.sweep, args.values)
        defaults = {action.dest: action.default for action in parser._actions}
        runs = sweep_runs(args, sweep, values, defaults)
        for run in runs:
            check_comparison_arguments(run, method)
    except arguments.UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        sys.exit(2)
    with one_line_stops(parser.prog, lambda: finished_cells(args.output)):
        results = run_grids(parser.prog, runs, method)
        store = results[-1][0]
        store.reload()
        settings_text = (f"models {','.join(args.models)}, poolings "
                         f"{','.join(args.poolings)}, protocol {args.protocol}, the "
                         "settings results.md lists")
        written = write_sweep(args.output, sweep, values,
                              [(store, keys) for _, keys in results], args.tasks,
                              settings_text, _has_matplotlib(), METHODS[method].title)
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
