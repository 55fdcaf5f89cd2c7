"""The command line of the comparison recipes: arguments, then the grid.

Every recipe (`recipes/chinese_simcse.py`, `consert.py`, `sg_opt.py`,
`sup_simcse.py`) is this parser plus its method's own flags; the grid,
protocols, data and results are the same.
"""

import argparse
import contextlib
import pathlib
import sys
import time

import keras

from kcse.datasets.chinese import BUNDLED_CHINESE_STS
from kcse.datasets.chinese import CHINESE_TASKS
from kcse.datasets.chinese import read_chinese_task
from kcse.experiments import grid
from kcse.datasets.nli import nli_triplets
from kcse.datasets.nli import read_nli
from kcse.experiments.methods import CONSERT_MODES
from kcse.experiments.methods import METHODS
from kcse.experiments.methods import ConSERTMethod
from kcse.experiments.methods import SGOptMethod
from kcse.experiments.methods import SimCSEMethod
from kcse.experiments.methods import SupervisedSimCSEMethod
from kcse.experiments.protocols import PROTOCOLS
from kcse.experiments.protocols import SPLITS
from kcse.experiments.protocols import with_overrides
from kcse.experiments.provenance import run_provenance
from kcse.experiments.results import FAILED
from kcse.experiments.results import ResultStore
from kcse.experiments.results import text_table

# The default (CPU) run: training sentences per task (Su's: 10,000) and
# poolings (Su's: P1..P4), so that it fits 20 minutes on 2 CPU cores.
DEFAULT_SENTENCES = 500
DEFAULT_POOLINGS = ("P1", "P3")
SU_POOLINGS = ["P1", "P2", "P3", "P4"]


def comma_list(text):
    return [item.strip() for item in text.split(",") if item.strip()]


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1; got {value}")
    return value


def comparison_parser(doc, output, poolings=DEFAULT_POOLINGS):
    """The recipes' shared arguments; `doc` is the recipe's docstring.

    `output` is the default results folder; `poolings` the default ones.
    The training settings default to None: the protocol's, or the
    method's `protocol_defaults`.
    """
    parser = argparse.ArgumentParser(
        description=doc.split("\n\n")[0],
        epilog=doc.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    group = parser.add_argument_group("grid")
    group.add_argument("--models", type=comma_list, default=["e5-small"],
                       help="Su's names (BERT, RoBERTa, NEZHA, WoBERT, RoFormer, "
                       "SimBERT, SimBERT-small, SimBERT-tiny) under "
                       "--checkpoint-root, e5-small, a keras-hub preset, a local "
                       "folder, or PATH:family (default: e5-small)")
    group.add_argument("--poolings", type=comma_list, default=list(poolings),
                       help=f"P1..P4 (default: {','.join(poolings)}; Su: "
                       "P1,P2,P3,P4; P2 is skipped without a pooler)")
    group.add_argument("--tasks", type=comma_list, default=["STS-B"],
                       help="ATEC, BQ, LCQMC, PAWSX, STS-B (default: STS-B)")
    group.add_argument("--protocol", choices=sorted(PROTOCOLS), default="su")
    group.add_argument("--checkpoint-root", type=pathlib.Path,
                       help="folder holding the original checkpoint folders")
    group.add_argument("--data-dir", type=pathlib.Path, default=None,
                       help="<TASK>/<TASK>.{train,valid,test}.data folders "
                       "(default: the Chinese STS-B bundled with kcse)")
    group.add_argument("--output", type=pathlib.Path, default=output)
    group.add_argument("--seed", type=int, default=0,
                       help="seed of the first training run (data order, dropout)")
    group.add_argument("--seeds", type=positive_int, default=1,
                       help="train column c this many times, with seeds SEED, "
                       "SEED+1, ...; tables show mean ± sample std and n "
                       "(default: 1; Su warns that reruns fluctuate)")
    group.add_argument("--show-published", action="store_true",
                       help="also print Su's whole published table for the tasks "
                       "(results.md shows his cell beside ours where he has the model)")
    group.add_argument("--plot", action="store_true",
                       help="a PNG per cell: gold vs cosine, raw and trained "
                       "(needs matplotlib)")
    add_training_arguments(parser)
    group.add_argument("--trained-splits", type=comma_list,
                       help="splits column c is scored on (default: "
                       "test; a and b are scored on every split)")
    return parser


def add_training_arguments(parser):
    """The protocol's settings, as flags (None: the protocol's or method's)."""
    settings = parser.add_argument_group(
        "training (defaults: the protocol's, i.e. Su's, unless the method's differ)")
    settings.add_argument("--sentences", type=int, default=DEFAULT_SENTENCES,
                          help="unlabelled training sentences per task (Su: "
                          "10000; PAWSX always uses all; default "
                          f"{DEFAULT_SENTENCES} to save time on a CPU)")
    settings.add_argument("--epochs", type=int)
    settings.add_argument("--batch-size", type=int)
    settings.add_argument("--learning-rate", type=float)
    settings.add_argument("--dropout", type=float, help="hidden dropout (Su: 0.3)")
    settings.add_argument("--temperature", type=float)
    settings.add_argument("--negatives", choices=["both_views", "cross_view"])
    settings.add_argument("--max-length", type=int, help="(Su: 64)")
    settings.add_argument("--long-max-length", type=int, help="PAWSX's (Su: 128)")
    settings.add_argument("--eval-every", type=int,
                          help="steps between valid scores (clean protocol)")
    settings.add_argument("--select-on-valid", action=argparse.BooleanOptionalAction,
                          help="keep the best step on valid (default: the "
                          "protocol's: clean yes, su no)")


def add_method_arguments(parser, names):
    """The flags of the methods `names` (keys of `methods.METHODS`)."""
    if "consert" in names:
        group = parser.add_argument_group("ConSERT")
        group.add_argument("--views", type=comma_list,
                           default=["shuffle", "feature_cutoff:0.2"],
                           help="two views: none, shuffle, token_cutoff:R, "
                           "feature_cutoff:R, span_cutoff:R, dropout:R, "
                           "adversarial:NORM (default: shuffle,feature_cutoff:0.2)")
        group.add_argument("--mode", choices=CONSERT_MODES, default="unsup")
        group.add_argument("--contrastive-weight", type=float, default=1.0,
                           help="α of the joint modes")
    if "sg_opt" in names:
        group = parser.add_argument_group("SG-OPT")
        group.add_argument("--projection-dim", type=int, default=4096,
                           help="width of the projection head (4096)")
        group.add_argument("--regularization", type=float, default=0.1,
                           help="λ on Σ‖θ_T − θ_F‖² (0.1)")
    if "sup_simcse" in names:
        group = parser.add_argument_group("supervised SimCSE")
        group.add_argument("--hard-negative-weight", type=float, default=0.0)
    if {"consert", "sup_simcse"} & set(names):
        parser.add_argument(
            "--nli", type=pathlib.Path,
            help="SNLI / CNSD JSON-lines file: ConSERT's supervised modes; "
            "supervised SimCSE's triplets (default: from the task's train labels)")


def method_from_args(name, args):
    """The method `name` built from its flags (`add_method_arguments`).

    Raises ValueError (or OSError for an unreadable `--nli`) naming the
    problem.
    """
    if name == "consert":
        if args.mode != "unsup" and args.nli is None:
            raise ValueError(f"--mode {args.mode} trains on NLI pairs: give --nli FILE")
        nli = read_nli(args.nli) if args.nli else None
        return ConSERTMethod(args.views, args.mode, nli, args.contrastive_weight)
    if name == "sg_opt":
        return SGOptMethod(args.projection_dim, args.regularization)
    if name == "sup_simcse":
        triplets = nli_triplets(args.nli) if args.nli else None
        return SupervisedSimCSEMethod(triplets, args.hard_negative_weight)
    if name == "simcse":
        return SimCSEMethod()
    raise ValueError(f"unknown method {name!r}; choose from {', '.join(METHODS)}")


def protocol_from_args(args, method):
    """The protocol named by `args`, with the method's then the user's settings."""
    protocol = with_overrides(PROTOCOLS[args.protocol], **method.protocol_defaults)
    return with_overrides(
        protocol,
        max_sentences=args.sentences,
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        hidden_dropout=args.dropout,
        temperature=args.temperature,
        negatives=args.negatives,
        max_length=args.max_length,
        long_max_length=args.long_max_length,
        eval_every=args.eval_every,
        select_on_valid=args.select_on_valid,
        trained_splits=tuple(getattr(args, "trained_splits", None) or ()) or None,
    )


class ComparisonError(Exception):
    """The comparison cannot start: a bad input, said in one line (exit 2)."""

    exit_code = 2


class CellsFailed(ComparisonError):
    """Cells failed (each stored with its reason); the others ran (exit 1)."""

    exit_code = 1


def run_comparison(args, method=None, log=print):
    """Runs the grid `args` describe with `method` (default: SimCSE).

    The method's `protocol_defaults` (e.g. ConSERT's temperature 0.1) apply
    before the user's flags. Returns the `ResultStore`; raises
    `ComparisonError` (one line) for inputs it cannot use, before any model
    is loaded, and `CellsFailed` when cells failed (after the others ran and
    were saved).
    """
    method = method or SimCSEMethod()
    protocol = protocol_from_args(args, method)
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ComparisonError('--plot needs matplotlib: pip install -e ".[plot]"') from None
    data_dir = args.data_dir or BUNDLED_CHINESE_STS
    unknown = [task for task in args.tasks if task not in CHINESE_TASKS]
    if unknown:
        raise ComparisonError(f"unknown task(s) {unknown}; choose from {CHINESE_TASKS}")
    try:
        store = ResultStore(args.output)
        specs = grid.resolve_models(args.models, args.checkpoint_root)
        data = {task: {split: read_chinese_task(data_dir, task, split) for split in SPLITS}
                for task in args.tasks}
    except (OSError, ValueError) as error:  # ResultsFileError included.
        raise ComparisonError(" ".join(str(error).split())) from None

    import tensorflow as tf

    if not tf.config.list_physical_devices("GPU"):
        # On CPUs one inter-op thread encodes faster (measured on 2 cores:
        # 70 vs 56 sentences/s for e5-small): a step's ops depend on each
        # other, and idle inter-op threads only compete with the math.
        # TensorFlow refuses once it is running (main() called in-process).
        with contextlib.suppress(RuntimeError):
            tf.config.threading.set_inter_op_parallelism_threads(1)
    keras.utils.set_random_seed(args.seed)
    strategy = grid.choose_strategy()
    sentences = protocol.max_sentences
    origin = run_provenance()
    log(f"kcse {origin['kcse']} (git {origin['git_commit'] or 'unknown'}), keras "
        f"{origin['keras']}, keras-hub {origin['keras_hub']}, tensorflow "
        f"{origin['tensorflow']}, backend {origin['backend']}")
    log(f"kcse Chinese comparison, {method.title}, protocol {protocol.name}: "
        f"{sentences} training sentences per task"
        f"{' (Su: 10000; pass --sentences 10000)' if sentences != 10000 else ''}, "
        f"poolings {','.join(args.poolings)}"
        f"{' (Su: P1,P2,P3,P4)' if args.poolings != SU_POOLINGS else ''}, "
        f"batch {protocol.batch_size}, "
        f"lr {protocol.learning_rate}, dropout {protocol.hidden_dropout}, "
        f"temperature {protocol.temperature}, max length {protocol.max_length}, "
        f"seeds {args.seed}..{args.seed + args.seeds - 1}, "
        f"data {data_dir}, "
        + (f"MirroredStrategy over {strategy.num_replicas_in_sync} GPUs"
           if strategy else "one device"))
    start = time.time()
    keys = grid.run_grid(
        specs, args.poolings, args.tasks, lambda task, split: data[task][split],
        protocol, store, seed=args.seed, strategy=strategy,
        plot_dir=args.output / "plots" if args.plot else None,
        log=log, method=method, seeds=args.seeds,
    )
    log("")
    log(text_table([store.cells[key] for key in keys]))
    if args.show_published:
        log(grid.published_reference(args.tasks))
    log(f"wrote {store.json_path} and {store.markdown_path} "
        f"({time.time() - start:.0f} s)")
    failed = [key for key in keys if store.cells[key]["status"] == FAILED]
    if failed:
        raise CellsFailed(
            f"{len(failed)} cell(s) failed: " + "; ".join(
                f"{key}: {store.cells[key]['error']}" for key in failed)
        )
    return store


def recipe_main(method_name, doc, output, argv=None, poolings=DEFAULT_POOLINGS):
    """A comparison recipe's `main`: its method's flags, then the grid."""
    parser = comparison_parser(doc, output, poolings)
    add_method_arguments(parser, [method_name])
    args = parser.parse_args(argv)
    try:
        method = method_from_args(method_name, args)
    except (OSError, ValueError) as error:
        parser.error(str(error))
    try:
        return run_comparison(args, method)
    except ComparisonError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        sys.exit(error.exit_code)
