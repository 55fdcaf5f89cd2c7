"""A column of the comparison grid, and the cell it scores.

A column owns everything kcse does for one kind of score of a cell: its
flags, its settings (part of every cell's identity when it is chosen), how
it scores a cell (before the training of column c, after each seed's
training, after all seeds) and how it reads in results.md, su_table.md, the
terminal and the MTEB result files. `kcse.experiments.columns.COLUMNS` lists
them in the order the tables show them.

Keras-free: the flags are added before TensorFlow starts; what scores a
cell is imported when it runs.
"""

import dataclasses
import functools

from kcse.experiments.cell_record import FAILED
from kcse.experiments.cell_record import number
from kcse.experiments.cell_record import reported
from kcse.experiments.cell_record import split_text


class Column:
    """What one column of the grid is; a subclass per column.

    `name`: its name in the code and in `--postprocess` when `postprocess`
    (the help text of that choice) is set; `field`: its entry in a cell's
    record (results.json); `headings`: its columns in results.md's table;
    `label`: its short name in the terminal and in su_table.md's `a / b / c`
    (`in_su_table`: whether it is there);
    `mteb_suffix`: the last part of its MTEB model name, `{method}` the
    cell's method (None: not written);
    `always`: in every grid (else chosen by its flags, and shown only when a
    cell has it); `trained`: scored on the trained encoder, so a failed cell
    reads `failed`; `unfitted`: the text of a cell whose field is null;
    `legend`: a sentence results.md and su_table.md add when a cell has it;
    `settings_before_precision`: its settings come before the precision in
    a cell's settings, the order results.md has always listed them in.
    """

    name = field = label = mteb_suffix = postprocess = legend = None
    headings = ()
    always = trained = settings_before_precision = False
    in_su_table = True
    unfitted = "-"

    def add_arguments(self, group):
        """Adds the column's own flags (besides `--postprocess`) to `group`."""

    def check_arguments(self, args):
        """Raises `arguments.UsageError` for flags of the column that
        contradict each other (before TensorFlow starts)."""

    def from_args(self, args):
        """The column as `args` choose it, or None when they do not."""
        if self.always or self.name in getattr(args, "postprocess", ()):
            return self
        return None

    def settings(self, seed):
        """Its settings, added to every cell's when it is chosen: a grid
        without it keeps the identity its cells always had."""
        return {}

    def prepare(self, cell):
        """Fields of the record scored before column c trains."""
        return {}

    def encoded_splits(self, cell):
        """Splits of the trained encoder's vectors it needs beyond c's."""
        return ()

    def score_run(self, cell, vectors, scored):
        """Fields of one seed's run: `vectors` of the trained encoder on the
        encoded splits, `scored` those of the splits c is scored on."""
        return {}

    def score(self, cell):
        """Fields of the record scored once every seed trained."""
        return {}

    def shown(self, cells):
        """Whether the tables of `cells` have this column."""
        return self.always or any(self.field in cell for cell in cells)

    def entries(self, cell):
        """Its entries in `cell`'s row of results.md's table."""
        return (number(reported(cell, self.field)[0]) if self.field in cell else "-",)

    def text(self, cell, split=None):
        """`cell`'s Spearman in this column on `split` (default: the reported
        one; or `"avg"`, `"w-avg"`), as su_table.md prints it: `failed` for a
        trained column of a failed cell, `unfitted` for a null field, `-`
        where the cell has no such number."""
        if self.trained and cell["status"] == FAILED:
            return "failed"
        scores = cell.get(self.field)
        if scores is None:
            return self.unfitted if self.field in cell else "-"
        return split_text(scores, split or cell["reported_split"])

    def log_text(self, record):
        """Its part of the terminal's line for a finished cell (None: none)."""
        if self.field not in record or not self.label:
            return None
        return f"{self.label} {number(reported(record, self.field)[0])}"

    def mteb_name(self, cell):
        """The MTEB model name of this column of `cell`: `<model>-<pooling>-<suffix>`."""
        suffix = self.mteb_suffix.format(method=cell["method"])
        return f"{cell['model']}-{cell['pooling']}-{suffix}"


@dataclasses.dataclass
class Cell:
    """A cell being scored: what the grid gives it and what its columns found.

    `encoder` pools as `pooling` (the grid's name, e.g. "P1"); `raw_vectors`
    are its un-tuned `{split: (v1, v2)}` of every split of `data`; column c
    trains once per seed of `seeds`, each time from the initial weights
    (`restore_weights()` puts them back). `record` collects the columns'
    fields; `runs` the seeds' runs, `error` why one failed, `trained_encoder`
    and `trained_vectors` the last seed's.
    """

    spec: object
    encoder: object
    pooling: str
    task: str
    data: dict
    raw_vectors: dict
    protocol: object
    seeds: object
    method: object
    restore_weights: object
    columns: tuple
    encode_batch_size: int = 64
    plot_path: object = None
    record: dict = dataclasses.field(default_factory=dict)
    runs: list = dataclasses.field(default_factory=list)
    error: object = None
    trained_encoder: object = None
    trained_vectors: object = None

    @functools.cached_property
    def fit_vectors(self):
        """Both sides of the protocol's whitening splits of the raw vectors
        in one array, the vectors post-processings are fitted on; None when
        the task has none of those splits."""
        from kcse.experiments.cell_scoring import whitening_vectors

        return whitening_vectors(self.raw_vectors, self.protocol.whitening_splits)

    @functools.cached_property
    def raw_whitening(self):
        """BERT-whitening `(mean, kernel)` of `fit_vectors` (None without)."""
        from kcse.experiments import cell_scoring

        if self.fit_vectors is None:
            return None
        return cell_scoring.adapted_whitening(self.fit_vectors)

    @property
    def trained_ok(self):
        """Whether column c trained every seed."""
        return bool(self.runs) and not self.error
