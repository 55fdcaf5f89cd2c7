"""The comparison grid: models × poolings × tasks, a cell each, scored in
the grid's columns (`kcse.experiments.columns`: raw, whitening, trained...)."""

import contextlib
import dataclasses
import itertools
import pathlib
import time

from kcse.foundation import interrupts
from kcse.foundation.digests import content_digest
from kcse.foundation.progress import labelled
from kcse.experiments import cell_scoring
from kcse.experiments.columns import COLUMNS
from kcse.experiments.columns import named_columns
from kcse.experiments.columns.column import Cell
from kcse.experiments.methods import SimCSEMethod
from kcse.experiments.protocols import SPLITS
from kcse.experiments.protocols import TRAIN_FILE
from kcse.experiments.protocols import protocol_settings
from kcse.experiments.published import published_cell
from kcse.experiments.provenance import run_provenance
from kcse.models.weight_snapshot import WeightSnapshot
from kcse.experiments.results.identity import NUMERICS
from kcse.experiments.results.identity import cell_identity
from kcse.experiments.results.identity import cell_key
from kcse.experiments.results.identity import run_settings
from kcse.experiments.results.identity import setting_differences
from kcse.experiments.results.identity import settings_id
from kcse.experiments.results.plot_files import plot_name
from kcse.layers.pooling_rules import missing_pooler
from kcse.layers.pooling_rules import unavailable_pooling
from kcse.layers.sentence_pooling import resolve_pooling
from kcse.evaluation.mteb_results import encoder_meta
from kcse.models.model_sources import ModelSpec
from kcse.models.model_sources import load_model
from kcse.models.model_sources import resolve_model
from kcse.foundation.precision import precision_of
from kcse.sentence_encoder import SentenceEncoder

def skipped_pooling(backbone, pooling):
    """Why the grid leaves out `pooling` on `backbone` (its cell is not run,
    as the "-" of Su's table), or None when the pooling can run.

    P2 needs a pretrained pooler; WK pooling, with the authors' defaults, a
    backbone of at least 6 transformer blocks: the rule of
    `pooling_rules.unavailable_pooling`, which the commands apply to a
    model's files before it loads.
    """
    mode = resolve_pooling(pooling)
    reason = unavailable_pooling(
        pooling,
        blocks=len(backbone.transformer_layers) if mode == "wk" else None,
        pooler=missing_pooler(backbone) is None if mode == "pooler" else None,
    )
    if reason is None:
        return None
    return f"{reason}, {pooling} skipped" + (" ('-' in Su's table)" if mode == "pooler" else "")


@dataclasses.dataclass
class Grid:
    """What a grid computes: its models, poolings, tasks and columns.

    `models` are names for `resolve_model` or `ModelSpec`s;
    `read_task(task, split)` gives the `SentencePairs` of a split, or None
    for a split the task does not have (its cells then lack what needs it:
    b without the protocol's whitening splits, c without the method's
    training data, said in the cell's `"untrained"`). `method` trains
    column c (`kcse.experiments.methods`; default: unsupervised SimCSE)
    `seeds` times, with seeds `seed, seed + 1, ...`. `columns`: the columns
    scored (`kcse.experiments.columns`; default: a, b and c); each column
    that is not in every grid enters the cells' settings only when chosen,
    so that the cells of grids without it keep their identity. Models load
    inside `strategy.scope()` when a strategy is given; `checkpoint_root`
    holds Su's checkpoints; `plot_dir`, when given, gets a PNG per cell.
    `raw_cache`, a dict the caller keeps across grids of other settings (a
    sweep's values), holds the raw vectors by model, data, pooling, length
    and precision, so each is encoded once. `train_file`: the
    `kcse.data.SentenceFile` of `--train-file`, which trains column c of
    every task when `protocol` says so (`protocols.with_train_file`; its
    digest is then a setting of every cell).

    Example:
    ```python
    import kcse
    from kcse.experiments.grid import Grid
    from kcse.experiments.protocols import PROTOCOLS

    grid = Grid(["e5-small"], ["P3"], ["STS-B"],
                lambda task, split: kcse.data.read_chinese_task(
                    kcse.data.BUNDLED_CHINESE_STS, task, split),
                PROTOCOLS["su"])
    assert [column.field for column in grid.columns] == ["raw", "whitening", "trained"]
    ```
    """

    models: list
    poolings: list
    tasks: list
    read_task: object
    protocol: object
    method: object = None
    seed: int = 0
    seeds: int = 1
    columns: tuple = named_columns()
    strategy: object = None
    checkpoint_root: object = None
    plot_dir: object = None
    raw_cache: dict = None
    train_file: object = None

    def __post_init__(self):
        self.method = self.method or SimCSEMethod()
        # The columns in the registry's order, those of every grid included.
        chosen = {column.name: column for column in self.columns}
        self.columns = tuple(chosen.get(column.name, column) for column in COLUMNS
                             if column.always or column.name in chosen)
        self.raw_cache = {} if self.raw_cache is None else self.raw_cache

    def scope(self):
        """The strategy's scope, or none."""
        return self.strategy.scope() if self.strategy else contextlib.nullcontext()

    def settings(self):
        """Every setting of its cells (`results.identity.run_settings`): protocol,
        method, seeds, the chosen columns' and the precision unless float32."""
        settings = run_settings(protocol_settings(self.protocol),
                                self.method.settings(), self.seed, self.seeds)
        for column in self.columns:
            if column.settings_before_precision:
                settings |= column.settings(self.seed)
        # The models compute in the global policy's precision. float32, kcse's
        # only precision before there was a choice, is left out, so that its
        # cells keep the identity they always had (`IMPLIED_SETTINGS` of
        # `results.identity`).
        if precision_of() != "float32":
            settings["precision"] = precision_of()
        for column in self.columns:
            if not column.settings_before_precision:
                settings |= column.settings(self.seed)
        return settings


def run_cell(cell):
    """Scores one `Cell` in each of its columns; returns its record (see
    `kcse.experiments.results.store.ResultStore`).

    First every column's `prepare` (a, b and the other post-processings of
    the raw vectors; the raw diagnostics), then every column's `score`:
    c trains once per seed (each seed's run scored by every column's
    `score_run`), then what needs the trained encoder.
    """
    start = time.time()
    published = (published_cell(cell.spec.published_as, cell.pooling, cell.task)
                 if cell.method.name == SimCSEMethod.name and cell.spec.published_as else None)
    cell.record = {
        "model": cell.spec.name,
        "model_source": cell.spec.record(),
        # Its size for MTEB's model_meta.json (`--mteb-output`).
        "encoder": encoder_meta(cell.encoder),
        "pooling": cell.pooling, "task": cell.task, "protocol": cell.protocol.name,
        "method": cell.method.name, "reported_split": "test",
        # Su's table is of unsupervised SimCSE on his releases.
        "published": published,
    }
    for column in cell.columns:
        with labelled(column.name):
            cell.record |= column.prepare(cell)
    for column in cell.columns:
        with labelled(column.name):
            cell.record |= column.score(cell)
    cell.record["seconds"] = time.time() - start
    return cell.record


def resolve_models(models, checkpoint_root=None):
    """`ModelSpec`s of `models` (names or specs), each model once."""
    specs = {}
    for name in models:
        spec = name if isinstance(name, ModelSpec) else resolve_model(name, checkpoint_root)
        specs.setdefault(content_digest(spec.identity()), spec)
    return list(specs.values())


def run_grid(grid, store, log=print):
    """Runs every cell of `grid` (a `Grid`) not already in `store`, printing
    a line per cell.

    A cell is skipped only when `store` holds it with the same identity: the
    same model source and weights, data, protocol, method, settings, seeds
    and revision of kcse's numerics (`kcse.experiments.results.identity.cell_identity`,
    `NUMERICS`); cells of other settings or older numerics stay
    beside the new ones, and a line says what differs. Models are loaded
    once and reset to their initial weights before each training; the raw
    vectors of all poolings of a model and task come from one encoding pass.
    Cells whose pooling the model cannot do (`skipped_pooling`: P2 without a
    pretrained pooler, WK with fewer than 6 blocks) are skipped, as the "-"
    of Su's table. The models are built under Keras' global dtype policy
    (the recipes' `--precision`), whose precision is a setting of every cell
    unless it is float32 (`kcse.foundation.precision.precision_of()`).

    Returns the keys of this grid's cells (in `store.cells`), in order.
    """
    if "test" not in grid.protocol.trained_splits:
        raise ValueError(
            "The comparison reports the test split: trained_splits must "
            f"include 'test'; got {grid.protocol.trained_splits}."
        )
    if grid.seeds < 1:
        raise ValueError(f"seeds must be at least 1; got {grid.seeds}.")
    specs = resolve_models(grid.models, grid.checkpoint_root)
    for spec in specs:
        log(f"model {spec.name}: {spec.description}")
    data = {task: {split: grid.read_task(task, split) for split in SPLITS}
            for task in grid.tasks}
    settings = grid.settings()
    data_digests = {
        task: content_digest([None if pairs is None else
                              [pairs.sentences1, pairs.sentences2, pairs.scores]
                              for pairs in splits.values()])
        for task, splits in data.items()
    }
    if grid.train_file is not None:  # Keyed by its digest, in the settings.
        for splits in data.values():
            splits[TRAIN_FILE] = grid.train_file
    cells = {}
    for spec, task, pooling in itertools.product(specs, grid.tasks, grid.poolings):
        identity = cell_identity(
            spec.identity(), pooling, task, data_digests[task], settings)
        key = cell_key(spec.name, pooling, task, grid.protocol.name,
                               grid.method.name, identity)
        cells[key] = (spec, pooling, task, data_digests[task])
    report_other_settings(store, cells, settings, log)
    todo = [(key, *cell) for key, cell in cells.items() if not store.finished(key)]
    if len(todo) < len(cells):
        log(f"{len(cells) - len(todo)} cell(s) with these settings already in "
            f"{store.json_path}: skipped")
    progress = Progress(len(todo), log)
    loaded = {}
    for (spec, task), group in itertools.groupby(todo, lambda c: (c[1], c[3])):
        if spec not in loaded:
            close_snapshots(loaded)
            loaded.clear()  # One model in memory at a time.
            with grid.scope():
                backbone, preprocessor = load_model(
                    spec, grid.protocol.sequence_length(task))
                # Its initial weights on disk, not a second copy in memory.
                loaded[spec] = (backbone, preprocessor, WeightSnapshot(backbone.weights))
            interrupts.check()  # A Ctrl-C during the loading stops here.
        runnable = []
        for key, _, pooling, _, data_digest in group:
            reason = skipped_pooling(loaded[spec][0], pooling)
            if reason:
                log(f"{key}: {reason}")
                progress.skipped()
                del cells[key]
            else:
                runnable.append((key, pooling, data_digest))
        if runnable:
            run_group(grid, store, spec, task, data[task], loaded[spec], runnable,
                      settings, progress)
    close_snapshots(loaded)
    return [key for key in cells if key in store.cells]


class Progress:
    """The grid's line per finished cell: its columns, elapsed time, ETA."""

    def __init__(self, total, log):
        self.total, self.log = total, log
        self.done, self.start = 0, time.time()

    def skipped(self):
        """A cell of the total that is not run here."""
        self.total -= 1

    def finished(self, key, record, columns):
        self.done += 1
        elapsed = time.time() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        scores = " / ".join(text for column in columns
                            if (text := column.log_text(record)) is not None)
        self.log(f"[{self.done}/{self.total}] {key}: {scores} (test)"
                 f"  cell {record['seconds']:.0f}s, elapsed {elapsed:.0f}s, ETA {eta:.0f}s")


def run_group(grid, store, spec, task, data, loaded, runnable, settings, progress):
    """The cells `runnable` (`(key, pooling, data digest)`) of one model and
    task: the raw vectors of their poolings in one encoding pass (or from
    `grid.raw_cache`), then each cell this run claims in `store`."""
    backbone, preprocessor, initial = loaded
    initial.restore()
    preprocessor.sequence_length = grid.protocol.sequence_length(task)
    precision = precision_of()
    with grid.scope():
        encoders = {
            pooling: SentenceEncoder(backbone, preprocessor, pooling=pooling)
            for _, pooling, _ in runnable
        }
        # What the raw vectors depend on: weights, data, pooling, length
        # and precision (the method and its settings do not touch them).
        raw_keys = {pooling: (content_digest(spec.identity()), data_digest, pooling,
                              preprocessor.sequence_length, precision)
                    for _, pooling, data_digest in runnable}
        missing = [pooling for pooling, raw_key in raw_keys.items()
                   if raw_key not in grid.raw_cache]
        if missing:
            with labelled(f"{spec.name} {task}, {', '.join(missing)}"):
                encoded = cell_scoring.encode_splits(
                    cell_scoring.EveryPooling(
                        {pooling: encoders[pooling] for pooling in missing}),
                    preprocessor, data, spec.prefix, 64,
                )
            grid.raw_cache.update({raw_keys[pooling]: encoded[pooling] for pooling in missing})
        raw_vectors = {pooling: grid.raw_cache[raw_key] for pooling, raw_key in raw_keys.items()}
    for key, pooling, data_digest in runnable:
        if not store.claim(key):  # Another run computes it, or did.
            progress.log(f"{key}: {'finished' if store.finished(key) else 'being computed'} "
                         f"by another run sharing {store.json_path}: skipped here")
            progress.skipped()
            continue
        cell = Cell(spec, encoders[pooling], pooling, task, data, raw_vectors[pooling],
                    grid.protocol, range(grid.seed, grid.seed + grid.seeds), grid.method,
                    initial.restore, grid.columns,
                    plot_path=None if grid.plot_dir is None else
                    pathlib.Path(grid.plot_dir) / plot_name(key))
        with grid.scope(), labelled(key):
            record = run_cell(cell)
        record |= {"settings": settings,
                   "settings_id": settings_id(settings),
                   "numerics": NUMERICS,
                   "data_digest": data_digest,
                   "provenance": run_provenance()}
        store.add(key, record)
        progress.finished(key, record, grid.columns)


def close_snapshots(loaded):
    """Deletes the weight snapshots of `loaded` `(backbone, preprocessor, snapshot)`s."""
    for _, _, snapshot in loaded.values():
        snapshot.close()


def report_other_settings(store, cells, settings, log):
    """Says what differs in stored cells of this grid's places.

    A place is a model, pooling, task, protocol and method; a stored cell
    there with another identity (other settings, seeds, data, or numbers
    computed by older kcse code: `NUMERICS`) stays in the
    store and in results.md beside the new one, and the line names each
    difference, so that nobody takes one for the other.
    """
    places = {}
    for key, (spec, pooling, task, data_digest) in cells.items():
        protocol, method = key.split("|")[3:5]
        places[(content_digest(spec.identity()), pooling, task, protocol, method)] = data_digest
    differences, count = set(), 0
    for key, cell in store.cells.items():
        model = {name: cell["model_source"][name] for name in ModelSpec.IDENTITY}
        place = (content_digest(model), cell["pooling"], cell["task"],
                 cell["protocol"], cell["method"])
        if key in cells or place not in places:
            continue
        count += 1
        differences.update(setting_differences(cell["settings"], settings))
        numerics = cell.get("numerics", 1)
        if numerics != NUMERICS:
            differences.add(f"kcse numerics {numerics} → {NUMERICS}")
        if cell["data_digest"] != places[place]:
            differences.add("the task's data")
    if count:
        log(f"{store.json_path} also holds {count} cell(s) of these models, "
            f"poolings and tasks with other settings ({'; '.join(sorted(differences))}): "
            "they stay beside the new ones")
