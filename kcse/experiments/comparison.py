"""Running the comparison the recipes' flags describe: methods, protocol, grid.

`kcse.experiments.command_line` parses and checks the flags (without
TensorFlow); this module reads the tasks they name and runs the grid with
the method (`methods.method_from_args`) and protocol
(`protocols.protocol_from_args`) they describe.
"""

import time

import keras

from kcse.data.chinese import BUNDLED_CHINESE_STS
from kcse.data.chinese import CHINESE_TASKS
from kcse.data.chinese import read_chinese_task
from kcse.data.english import read_stsb_multi_mt
from kcse.data.english import stsb_task
from kcse.distribution.strategy import choose_strategy
from kcse.evaluation.sts import check_scorable
from kcse.experiments import grid
from kcse.experiments.methods import SimCSEMethod
from kcse.experiments.protocols import SPLITS
from kcse.experiments.protocols import protocol_from_args
from kcse.experiments.protocols import train_file_line
from kcse.experiments.provenance import run_provenance
from kcse.experiments.published import published_reference
from kcse.experiments.columns import chosen_columns
from kcse.experiments.results.tables import CHINESE_TITLE
from kcse.experiments.cell_record import FAILED
from kcse.experiments.results import plot_files
from kcse.experiments.results.store import ResultStore
from kcse.experiments.results.tables import text_table
from kcse.layers.pooling_rules import SU_POOLINGS
from kcse.models import model_sources
from kcse.foundation.precision import precision_of

MULTILINGUAL_TITLE = "Multilingual STS-B comparison (stsb-multi-mt)"


def task_reader(args):
    """`(read, title)` of the grid's tasks: `read(task, split)` gives the
    `SentencePairs` of a split, or None for a split the task lacks.

    Su's Chinese tasks under `--data-dir` (default: the bundled STS-B), or,
    with `--languages`, the stsb-multi-mt languages (`STS-B-<language>`,
    valid = dev; a train split only where its file exists).
    """
    if not hasattr(args, "languages"):
        data_dir = args.data_dir or BUNDLED_CHINESE_STS
        return (lambda task, split: read_chinese_task(data_dir, task, split)), CHINESE_TITLE
    languages = {stsb_task(language): language for language in args.languages}
    folder = args.data_dir / "stsb_multi_mt"

    def read(task, split):
        language = languages[task]
        split = "dev" if split == "valid" else split
        if split == "train" and not (folder / f"stsb-{language}-train.csv").exists():
            return None
        return read_stsb_multi_mt(args.data_dir, language, split)

    return read, MULTILINGUAL_TITLE


class ComparisonError(Exception):
    """The comparison cannot start: a bad input, said in one line (exit 2)."""

    exit_code = 2


class CellsFailed(ComparisonError):
    """Cells failed (each stored with its reason); the others ran (exit 1)."""

    exit_code = 1


def check_scored_splits(data):
    """Every split of `data` (`{task: {split: pairs or None}}`) has a Spearman
    correlation: the grid scores a and b on each split a task has, c on the
    trained splits and valid for selection, so a split of fewer than 2 pairs
    or of gold scores all equal would leave its cells' numbers undefined. A
    `ComparisonError` naming the file, before any model loads."""
    for splits in data.values():
        for split, pairs in splits.items():
            if pairs is None:
                continue
            try:
                check_scorable(pairs)
            except ValueError as error:
                text = " ".join(str(error).split()).rstrip(".")
                raise ComparisonError(
                    f"{pairs.source}: {text}; the grid scores every split of a task "
                    f"({split} here)") from None


def run_comparison(args, method=None, log=print, raw_cache=None):
    """Runs the grid `args` describe with `method` (default: SimCSE).

    The method's `protocol_defaults` (e.g. ConSERT's temperature 0.1) apply
    before the user's flags. The models compute in Keras' global dtype
    policy, which `recipe_runs.recipe_main` sets from `--precision`
    (`command_line.start_speed`) before calling this. Raises
    `ComparisonError` (one line) for inputs it cannot use, before any model
    is loaded. `raw_cache`: `grid.Grid`'s. Returns `(store, keys)`:
    the keys of the grid's cells, which may have failed (`check_cells`).
    """
    method = method or SimCSEMethod()
    protocol = protocol_from_args(args, method)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ComparisonError('--plot needs matplotlib: pip install -e ".[plot]"') from None
    multilingual = hasattr(args, "languages")
    unknown = [task for task in args.tasks if task not in CHINESE_TASKS]
    if unknown and not multilingual:
        raise ComparisonError(f"unknown task(s) {unknown}; choose from {CHINESE_TASKS}")
    read, title = task_reader(args)
    data_dir = args.data_dir or BUNDLED_CHINESE_STS
    try:
        store = ResultStore(args.output, title)
        specs = grid.resolve_models(args.models, args.checkpoint_root)
        data = {task: {split: read(task, split) for split in SPLITS}
                for task in args.tasks}
    except (OSError, ValueError) as error:  # ResultsFileError included.
        raise ComparisonError(" ".join(str(error).split())) from None
    check_scored_splits(data)

    keras.utils.set_random_seed(args.seed)
    strategy = choose_strategy()
    sentences = protocol.max_sentences
    origin = run_provenance()
    log(f"kcse {origin['kcse']} (git {origin['git_commit'] or 'unknown'}), keras "
        f"{origin['keras']}, keras-hub {origin['keras_hub']}, tensorflow "
        f"{origin['tensorflow']}, backend {origin['backend']}")
    su = not multilingual
    log(f"kcse {title}, {method.title}, protocol {protocol.name}: "
        f"{sentences or 'all'} training sentences per task"
        f"{' (Su: 10000; pass --sentences 10000)' if su and sentences != 10000 else ''}, "
        f"poolings {','.join(args.poolings)}"
        f"{' (Su: P1,P2,P3,P4)' if su and args.poolings != list(SU_POOLINGS) else ''}, "
        f"batch {protocol.batch_size}, "
        f"lr {protocol.learning_rate}, dropout {protocol.hidden_dropout}, "
        + (f"temperature {protocol.temperature}, "  # Not CT's, SBERT's, IS-BERT's losses.
           if "temperature" in method.paper_settings else "")
        + f"max length {protocol.max_length}, "
        f"precision {precision_of()}, "
        f"seeds {args.seed}..{args.seed + args.seeds - 1}, "
        f"data {data_dir}, "
        + (f"MirroredStrategy over {strategy.num_replicas_in_sync} GPUs"
           if strategy else "one device"))
    train_file = getattr(args, "train_sentences", None)  # --train-file, read.
    if train_file is not None:
        log(train_file_line(train_file, protocol))
    start = time.time()
    try:
        keys = grid.run_grid(grid.Grid(
            specs, args.poolings, args.tasks, lambda task, split: data[task][split],
            protocol, method=method, seed=args.seed, seeds=args.seeds,
            columns=chosen_columns(args), strategy=strategy,
            plot_dir=args.output / plot_files.FOLDER if args.plot else None,
            raw_cache=raw_cache, train_file=train_file,
        ), store, log=log)
    except model_sources.SequenceLengthError as error:
        raise ComparisonError(f"{error}: give --max-length (PAWSX: --long-max-length) "
                              f"of at most {error.limit}") from None
    log("")
    log(text_table([store.cells[key] for key in keys]))
    if getattr(args, "show_published", False) and not multilingual:
        log(published_reference(args.tasks))
    log(f"wrote {store.json_path}, {store.markdown_path}, {store.su_table_path} "
        f"and {store.report_path} "
        f"({time.time() - start:.0f} s)")
    return store, keys


def check_cells(store, keys):
    """Raises `CellsFailed` (one line naming each cell and its reason) if a
    cell of `keys` in `store` failed."""
    failed = [key for key in keys if store.cells[key]["status"] == FAILED]
    if failed:
        raise CellsFailed(
            f"{len(failed)} cell(s) failed: " + "; ".join(
                f"{key}: {store.cells[key]['error']}" for key in failed)
        )
