"""The comparison grid's columns, a module each, and their registry.

A column (`column.Column`) owns its flags, its settings (part of the cell
identity when it is chosen), how it scores a cell and how it reads in
results.md, su_table.md, the terminal and the MTEB result files. A new
column is a module here and its line in `COLUMNS`. Keras-free. The package
exports nothing (see `kcse.experiments`).
"""

from kcse.foundation import arguments
from kcse.experiments.columns.all_but_the_top import AllButTheTopColumn
from kcse.experiments.columns.diagnostics import DiagnosticsColumn
from kcse.experiments.columns.flow import FlowColumn
from kcse.experiments.columns.layer_scores import LayerScoresColumn
from kcse.experiments.columns.raw import RawColumn
from kcse.experiments.columns.trained import TrainedColumn
from kcse.experiments.columns.trained_whitening import TrainedWhiteningColumn
from kcse.experiments.columns.whitening import WhiteningColumn

__all__ = []

# The registry: the columns in the order the tables show them.
COLUMNS = (
    RawColumn(),
    WhiteningColumn(),
    AllButTheTopColumn(),
    FlowColumn(),
    TrainedColumn(),
    TrainedWhiteningColumn(),
    DiagnosticsColumn(),
    LayerScoresColumn(),
)

# The names `--postprocess` chooses from.
POSTPROCESSINGS = tuple(column.name for column in COLUMNS if column.postprocess)


def postprocessing_list(text):
    """An argparse type: post-processings of `--postprocess`; whitening always."""
    names = arguments.choices_list(POSTPROCESSINGS)(text)
    return ["whitening"] + [name for name in names if name != "whitening"]


def add_column_arguments(group):
    """`--postprocess` (a choice per column that has one) and each column's
    own flags, added to the argument `group`."""
    group.add_argument("--postprocess", type=postprocessing_list, default=["whitening"],
                       help="what is scored beside the raw vectors without "
                       "training: " + " and ".join(
                           f"{column.name} ({column.postprocess})"
                           for column in COLUMNS if column.postprocess)
                       + ", e.g. whitening,flow")
    for column in COLUMNS:
        column.add_arguments(group)


def check_column_arguments(args):
    """Every column's `check_arguments` (`arguments.UsageError`)."""
    for column in COLUMNS:
        column.check_arguments(args)


def chosen_columns(args):
    """The columns `args` choose (a namespace of `add_column_arguments`'
    flags, or any object with some of them), in `COLUMNS`' order."""
    return tuple(chosen for column in COLUMNS
                 if (chosen := column.from_args(args)) is not None)


def named_columns(*names):
    """The columns of every grid and those named (their `name`: "flow",
    "trained-whitening", "all-but-the-top", "diagnostics"), each as its
    flags' defaults make it, in `COLUMNS`' order.

    Example:
    ```python
    from kcse.experiments.columns import named_columns

    columns = named_columns("flow")
    assert [column.field for column in columns] == ["raw", "whitening", "flow", "trained"]
    ```
    """
    unknown = set(names) - {column.name for column in COLUMNS}
    if unknown:
        raise ValueError(f"unknown column(s) {sorted(unknown)}; choose from "
                         f"{', '.join(column.name for column in COLUMNS)}")
    return tuple(column for column in COLUMNS if column.always or column.name in names)
