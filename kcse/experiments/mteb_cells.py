"""A comparison grid's cells as MTEB result files: each column a model.

A recipe's `--mteb-output DIR` writes, after the grid, every finished cell
of the run in `mteb.ResultCache`'s layout (`kcse.evaluation.write_mteb_results`),
so that the grid's numbers sit beside C-MTEB leaderboard entries. Each
column of a cell is its own model (`Column.mteb_name`): `<model>-<pooling>-raw`
(a), `-whitening` (b), `-all-but-the-top`, `-flow` (BERT-flow), `-<method>`
(c, e.g. `e5-small-P3-simcse`) and `-<method>-whitening` (c+w). Its revision is a
digest of what the cell's numbers depend on, the task and its data left
out: the model's files (`model_source`), the pooling, protocol, method,
every setting and kcse's numerics revision. Cells of one model, pooling and
settings share it, so one model folder holds a file per task.

What MTEB cannot hold is left out: the train split and the splits C-MTEB
does not evaluate (valid of LCQMC and PAWSX; `kcse.evaluation.mteb_results`),
failed cells, and c's spread over seeds (c is their mean). Under Su's
protocol, b and c are fitted on each task's own sentences (unlabelled):
not one model evaluated on every task as MTEB's leaderboard assumes, which
the model names do not hide (`-whitening`, `-simcse`).
"""

from kcse.foundation.digests import content_digest
from kcse.evaluation.mteb_results import ENCODER_FIELDS
from kcse.evaluation.mteb_results import mteb_task_split
from kcse.evaluation.mteb_results import write_mteb_results
from kcse.experiments.columns import COLUMNS
from kcse.experiments.results.store import is_finished

# The columns of a cell that are scores of a model, in the tables' order.
SCORE_COLUMNS = tuple(column for column in COLUMNS if column.mteb_suffix is not None)


def cell_revision(cell):
    """16 hex digits of what `cell`'s numbers depend on but its task and data."""
    return content_digest({
        "model": cell["model_source"], "pooling": cell["pooling"],
        "protocol": cell["protocol"], "method": cell["method"],
        "settings": cell["settings"], "numerics": cell.get("numerics", 1),
    })[:16]


def mteb_models(cells):
    """`{(model name, revision): [(task, split, scores)]}` of `cells`' columns.

    `cells`: records of a `ResultStore`. Failed cells, missing columns and
    splits MTEB does not evaluate are left out.
    """
    models = {}
    for cell in filter(is_finished, cells):
        for column in SCORE_COLUMNS:
            for split, scores in (cell.get(column.field) or {}).items():
                try:
                    mteb_task_split(cell["task"], split)
                except ValueError:  # train; valid of LCQMC and PAWSX.
                    continue
                models.setdefault((column.mteb_name(cell), cell_revision(cell)), []).append(
                    (cell["task"], split, scores))
    return models


def write_cells_as_mteb(folder, cells):
    """Writes `cells` (records of a `ResultStore`) as MTEB result files
    under `folder`; returns the model folders written, one per column and
    revision (none when no cell has a score MTEB holds)."""
    written = []
    sizes = model_sizes(cells)
    for (name, revision), scores in mteb_models(cells).items():
        written.append(write_mteb_results(folder, name, revision, scores,
                                          sizes[name, revision])[0].parent)
    return written


def model_sizes(cells):
    """`{(model name, revision): encoder size}` of `cells`' columns, the
    `encoder` of their records (`kcse.evaluation.mteb_results.encoder_meta`);
    a field on which a model's cells differ is None (`max_tokens`: PAWSX's
    pairs are cut at another length), as is all of it for cells recorded
    before kcse recorded it."""
    sizes = {}
    for cell in cells:
        size = cell.get("encoder") or {}
        for column in SCORE_COLUMNS:
            known = sizes.setdefault((column.mteb_name(cell), cell_revision(cell)), dict(size))
            for field in ENCODER_FIELDS:
                if known.get(field) != size.get(field):
                    known[field] = None
    return sizes
