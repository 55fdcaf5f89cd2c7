"""The flags of the comparison recipes and `kcse train`, checked before any work.

Every recipe (`recipes/chinese_simcse.py`, `consert.py`, `sg_opt.py`,
`sup_simcse.py`) is `comparison_parser` plus its method's flags
(`add_method_arguments`), run by `recipe_main`; `kcse train` shares the
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
import sys

from kcse import arguments
from kcse import atomic_files
from kcse import interrupts
from kcse.precision import PRECISIONS
from kcse.data.chinese import BUNDLED_CHINESE_STS
from kcse.data.chinese import CHINESE_TASKS
from kcse.data.chinese import chinese_task_path
from kcse.data.english import STSB_MULTI_MT_LANGUAGES
from kcse.models.model_sources import check_model
from kcse.experiments.protocols import PROTOCOLS
from kcse.experiments.protocols import SPLITS

# The default (CPU) run: training sentences per task (Su's: 10,000) and
# poolings (Su's: P1..P4), so that it fits 20 minutes on 2 CPU cores.
DEFAULT_SENTENCES = 500
DEFAULT_POOLINGS = ("P1", "P3")
SU_POOLINGS = ["P1", "P2", "P3", "P4"]
# Su's names of the poolings, then kcse's (`kcse.layers.SentencePooling`).
POOLINGS = ("P1", "P2", "P3", "P4", "cls", "pooler", "last_avg",
            "first_last_avg", "last2avg", "max", "wk")
# The training methods of column c (`kcse.experiments.methods.METHODS`);
# all of them contrast in-batch negatives, so a batch needs 2 sentences.
METHOD_NAMES = ("simcse", "consert", "sg_opt", "sup_simcse", "ct")
SMALLEST_BATCH = 2
CONSERT_MODES = ("unsup", "sup", "joint", "sup-unsup", "joint-unsup")
# ConSERT's two views of each contrastive stage, from yym6472/ConSERT's scripts.
CONSERT_STAGE_VIEWS = {
    # scripts/chinese/unsup-consert-base-*.sh: --da_final_1 feature_cutoff
    # --cutoff_rate_final_1 0.2 --da_final_2 shuffle
    "unsup": ["feature_cutoff:0.2", "shuffle"],
    # scripts/sup-consert-joint-base.sh: --data_augmentation_strategy cutoff
    # --cutoff_direction row --cutoff_rate 0.1 (against the sentence as is)
    "joint": ["none", "token_cutoff:0.1"],
    # second stage of scripts/sup-consert-sup-unsup-base.sh: cutoff, column, 0.1
    "sup-unsup": ["none", "feature_cutoff:0.1"],
    # second stage of scripts/sup-consert-joint-unsup-base.sh: shuffle
    "joint-unsup": ["none", "shuffle"],
}
# ConSERT's views: the value each takes (`split_view`).
VIEW_VALUES = {
    "shuffle": None,
    "token_cutoff": "rate",
    "feature_cutoff": "rate",
    "span_cutoff": "rate",
    "dropout": "rate",
    "adversarial": "norm",
}


def split_view(text):
    """`(name, value)` of a view spec `name[:value]`; `("none", None)`.

    Rates (cutoffs, dropout) must be in [0, 1), `adversarial`'s noise norm
    above 0; `shuffle` takes no value; a rate left out is the view's
    default. Raises ValueError naming the spec.
    """
    name, colon, value = text.partition(":")
    if name == "none" and not colon:
        return name, None
    if name not in VIEW_VALUES:
        raise ValueError(f"unknown view {name!r}; choose from none, {', '.join(VIEW_VALUES)}")
    kind = VIEW_VALUES[name]
    if not colon:
        return name, None
    if kind is None:
        raise ValueError(f"the {name} view takes no value; got {text!r}")
    bounded = arguments.rate if kind == "rate" else arguments.positive_number
    try:
        return name, bounded(value)
    except argparse.ArgumentTypeError as error:
        raise ValueError(f"view {text!r}: the {kind} {error}") from None


def two_views(text):
    """An argparse type: ConSERT's two views, each checked by `split_view`."""
    views = arguments.comma_list(text)
    if len(views) != 2:
        raise argparse.ArgumentTypeError(f"ConSERT takes two views; got {len(views)} in {text!r}")
    for view in views:
        try:
            split_view(view)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return views


# The protocols of the multilingual STS-B table (`recipes/multilingual_sts.py`):
# Su's and clean, and `stsb`, whose whitening statistics come from the dev
# split that every stsb-multi-mt language has, and whose training sentences
# from the train split where the language has one.
MULTILINGUAL_PROTOCOLS = ("stsb", "su", "clean")


def stsb_task(language):
    """The task name of a stsb-multi-mt language in results: `STS-B-de`."""
    return f"STS-B-{language}"


def two_text_views(text):
    """An argparse type: two CLEAR text views (`kcse.data.text_view_from_spec`)."""
    from kcse.data.text_views import text_view_from_spec

    views = arguments.comma_list(text)
    if len(views) != 2:
        raise argparse.ArgumentTypeError(
            f"--text-views takes two views; got {len(views)} in {text!r}")
    for view in views:
        try:
            # A synonym table is read later (--synonyms); any one checks the spec.
            text_view_from_spec(view, synonyms={"_": ["_"]})
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return views


def postprocessing_list(text):
    """An argparse type: post-processings of `--postprocess`; whitening always."""
    names = arguments.choices_list(("whitening", "flow"))(text)
    return ["whitening"] + [name for name in names if name != "whitening"]


def comparison_parser(doc, output, poolings=DEFAULT_POOLINGS, languages=None):
    """The recipes' shared arguments; `doc` is the recipe's docstring.

    `output` is the default results folder; `poolings` the default ones.
    The training settings default to None: the protocol's, or the
    method's `protocol_defaults`. With `languages` (the default
    `--data-dir` of stsb-multi-mt), the grid's tasks are stsb-multi-mt
    languages (`--languages`) instead of Su's Chinese tasks.
    """
    parser = arguments.Parser(
        description=doc.split("\n\n")[0],
        epilog=doc.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    group = parser.add_argument_group("grid")
    group.add_argument("--models", type=arguments.comma_list, default=["e5-small"],
                       help="Su's names (BERT, RoBERTa, NEZHA, WoBERT, RoFormer, "
                       "SimBERT, SimBERT-small, SimBERT-tiny) under "
                       "--checkpoint-root, e5-small, a keras-hub preset, a local "
                       "folder, or PATH:family (default: e5-small)")
    group.add_argument("--poolings", type=arguments.choices_list(POOLINGS),
                       default=list(poolings),
                       help=f"P1..P4 (default: {','.join(poolings)}; Su: "
                       "P1,P2,P3,P4; P2 is skipped without a pooler), also "
                       "last2avg, max and wk (SBERT-WK's layer weighting, "
                       "needs 6+ layers)")
    if languages is None:
        group.add_argument("--tasks", type=arguments.choices_list(CHINESE_TASKS),
                           default=["STS-B"],
                           help="ATEC, BQ, LCQMC, PAWSX, STS-B (default: STS-B)")
        group.add_argument("--protocol", choices=sorted(PROTOCOLS), default="su")
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
    group.add_argument("--checkpoint-root", type=pathlib.Path,
                       help="folder holding the original checkpoint folders")
    if languages is None:
        group.add_argument("--data-dir", type=pathlib.Path, default=None,
                           help="<TASK>/<TASK>.{train,valid,test}.data folders "
                           "(default: the Chinese STS-B bundled with kcse)")
    else:
        group.add_argument("--data-dir", type=pathlib.Path, default=languages,
                           help="folder holding stsb_multi_mt/stsb-<language>-"
                           "{train,dev,test}.csv (PhilipMay/stsb-multi-mt; dev "
                           "and test for every language, train where there is one)")
    group.add_argument("--output", type=pathlib.Path, default=output)
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
    group.add_argument("--plot", action="store_true",
                       help="a PNG per cell: gold vs cosine, raw and trained "
                       "(needs matplotlib); with --diagnostics, a second one of them")
    group.add_argument("--postprocess", type=postprocessing_list, default=["whitening"],
                       help="what is scored beside the raw vectors without "
                       "training: whitening (BERT-whitening, column b, always) "
                       "and flow (BERT-flow, Li et al. 2020: a Glow flow "
                       "trained by maximum likelihood on the vectors b whitens "
                       "with; a column beside b), e.g. whitening,flow")
    group.add_argument("--diagnostics", action="store_true",
                       help="anisotropy diagnostics of the raw and trained encoder "
                       "per cell, in results.json: token-embedding norm and "
                       "3-NN distance by frequency rank (BERT-flow's Table 2), "
                       "Spearman with the top-k frequent tokens removed from "
                       "average pooling (ConSERT's Table 1), alignment and "
                       "uniformity (Wang & Isola) on the test split "
                       "(kcse.evaluation.anisotropy_report; ~1 min per report "
                       "for e5-small)")
    add_verbose_argument(parser)
    add_training_arguments(parser)
    add_speed_arguments(parser)
    group.add_argument("--trained-splits", type=arguments.choices_list(SPLITS),
                       help="splits column c is scored on (default: "
                       "test; a and b are scored on every split)")
    return parser


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
    policy (`kcse.precision.set_precision`), which every model built from
    then on computes in. `args.compilation_cache` becomes the folder of
    JAX's persistent compilation cache in use, or None.
    """
    import keras

    from kcse import compilation
    from kcse.precision import set_precision

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


def add_verbose_argument(parser):
    parser.add_argument("--verbose", action="store_true",
                        help="show TensorFlow's start-up and device messages")


def add_training_arguments(parser):
    """The protocol's settings, as flags (None: the protocol's or method's)."""
    settings = parser.add_argument_group(
        "training (defaults: the protocol's, i.e. Su's, unless the method's differ)")
    settings.add_argument("--sentences", type=arguments.positive_integer,
                          default=DEFAULT_SENTENCES,
                          help="unlabelled training sentences per task (Su: "
                          "10000; PAWSX always uses all; default "
                          f"{DEFAULT_SENTENCES} to save time on a CPU)")
    settings.add_argument("--epochs", type=arguments.positive_integer)
    settings.add_argument("--batch-size", type=arguments.integer(minimum=SMALLEST_BATCH),
                          help="sentences per (global) batch, at least "
                          f"{SMALLEST_BATCH}: in-batch negatives")
    settings.add_argument("--learning-rate", type=arguments.positive_number)
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
    settings.add_argument("--temperature", type=arguments.positive_number)
    settings.add_argument("--negatives", choices=["both_views", "cross_view"])
    settings.add_argument("--max-length", type=arguments.positive_integer,
                          help="tokens (Su: 64)")
    settings.add_argument("--long-max-length", type=arguments.positive_integer,
                          help="PAWSX's (Su: 128)")
    settings.add_argument("--eval-every", type=arguments.positive_integer,
                          help="steps between valid scores (clean protocol)")
    settings.add_argument("--select-on-valid", action=argparse.BooleanOptionalAction,
                          help="keep the best step on valid (default: the "
                          "protocol's: clean yes, su no)")


def add_method_arguments(parser, names):
    """The flags of the methods `names` (of `METHOD_NAMES`)."""
    if "simcse" in names:
        group = parser.add_argument_group("SimCSE's text views (CLEAR)")
        group.add_argument("--text-views", type=two_text_views,
                           default=METHOD_DEFAULTS["text_views"],
                           help="train SimCSE on two text views of each sentence "
                           "instead of the sentence twice (dropout stays on): "
                           "word_deletion[:R], span_deletion[:R], reordering[:R[:PAIRS]], "
                           "synonym_substitution[:R] (needs --synonyms); e.g. "
                           "word_deletion:0.3,reordering:0.3 (Wu et al. 2020, CLEAR; "
                           "Chinese is segmented with jieba)")
        group.add_argument("--synonyms", type=pathlib.Path,
                           default=METHOD_DEFAULTS["synonyms"],
                           help="synonym table for synonym_substitution: a line "
                           "per word, word<TAB>synonym synonym ...")
    if "consert" in names:
        group = parser.add_argument_group("ConSERT")
        group.add_argument("--views", type=two_views,
                           default=METHOD_DEFAULTS["views"],
                           help="two views for every contrastive stage: none, "
                           "shuffle, token_cutoff:R, feature_cutoff:R, "
                           "span_cutoff:R, dropout:R, adversarial:NORM (default: "
                           "ConSERT's scripts' by stage: unsup "
                           "feature_cutoff:0.2,shuffle (chinese/unsup-consert-"
                           "base-*.sh); joint none,token_cutoff:0.1 "
                           "(sup-consert-joint-base.sh); the unsup stage of "
                           "sup-unsup none,feature_cutoff:0.1 and of joint-unsup "
                           "none,shuffle (sup-consert-*-unsup-base.sh))")
        group.add_argument("--mode", choices=CONSERT_MODES, default=METHOD_DEFAULTS["mode"])
        group.add_argument("--contrastive-weight", type=arguments.non_negative_number,
                           default=METHOD_DEFAULTS["contrastive_weight"],
                           help="α, ConSERT's cl_rate, on its NT-Xent (the two "
                           "directions summed) in every contrastive stage "
                           "(default 0.15: --cl_rate 0.15 in ConSERT's scripts)")
        group.add_argument("--nli-learning-rate", type=arguments.positive_number,
                           default=METHOD_DEFAULTS["nli_learning_rate"],
                           help="learning rate of the NLI stage, one epoch (default "
                           "2e-5: ConSERT's main.py, which sup-consert-joint-"
                           "base.sh keeps)")
    if "sg_opt" in names:
        group = parser.add_argument_group("SG-OPT")
        group.add_argument("--projection-dim", type=arguments.positive_integer,
                           default=METHOD_DEFAULTS["projection_dim"],
                           help="width of the projection head (4096)")
        group.add_argument("--regularization", type=arguments.non_negative_number,
                           default=METHOD_DEFAULTS["regularization"],
                           help="λ on Σ‖θ_T − θ_F‖² (0.1)")
    if "ct" in names:
        group = parser.add_argument_group("Contrastive Tension")
        group.add_argument("--negative-pairs", type=arguments.positive_integer,
                           default=METHOD_DEFAULTS["negative_pairs"],
                           help="K, negative sentence pairs per positive pair; "
                           "--batch-size (pairs) must be a multiple of K + 1 "
                           "(default 7, with batch 16: Contrastive-Tension's "
                           "Training.py)")
    if "sup_simcse" in names:
        group = parser.add_argument_group("supervised SimCSE")
        group.add_argument("--hard-negative-weight", type=arguments.number(),
                           default=METHOD_DEFAULTS["hard_negative_weight"])
    if {"consert", "sup_simcse"} & set(names):
        parser.add_argument(
            "--nli", type=pathlib.Path,
            help="SNLI / CNSD JSON-lines file: ConSERT's supervised modes; "
            "supervised SimCSE's triplets (default: from the task's train labels)")


# Each method's own flags (`add_method_arguments`), by destination.
METHOD_FLAGS = {
    "views": ("consert",), "mode": ("consert",), "contrastive_weight": ("consert",),
    "nli_learning_rate": ("consert",),
    "projection_dim": ("sg_opt",), "regularization": ("sg_opt",),
    "hard_negative_weight": ("sup_simcse",), "nli": ("consert", "sup_simcse"),
    "text_views": ("simcse",), "synonyms": ("simcse",), "negative_pairs": ("ct",),
}
METHOD_DEFAULTS = {
    "views": None, "mode": "unsup", "contrastive_weight": 0.15, "nli_learning_rate": 2e-5,
    "projection_dim": 4096, "regularization": 0.1, "hard_negative_weight": 0.0, "nli": None,
    "text_views": None, "synonyms": None, "negative_pairs": 7,
}


def check_method_arguments(method, args):
    """Flags of `method` that depend on each other or on files.

    A flag of another method (`kcse train --method simcse --views ...`)
    would be ignored, so it is an error.
    """
    for name, methods in METHOD_FLAGS.items():
        if (method not in methods and hasattr(args, name)
                and getattr(args, name) != METHOD_DEFAULTS[name]):
            flag = "--" + name.replace("_", "-")
            raise arguments.UsageError(
                f"{flag} is a flag of {' and '.join(methods)}, not of --method {method}")
    if method == "consert" and args.mode != "unsup" and args.nli is None:
        raise arguments.UsageError(f"--mode {args.mode} trains on NLI pairs: give --nli FILE")
    if getattr(args, "nli", None) is not None:
        arguments.check_input_file(args.nli, "--nli")
    if method == "ct":
        batch = args.batch_size or 16
        if batch % (args.negative_pairs + 1):
            raise arguments.UsageError(
                f"--batch-size {batch} must be a multiple of --negative-pairs + 1 "
                f"({args.negative_pairs + 1}): each batch holds whole groups of "
                "one positive and K negative pairs")
    views = getattr(args, "text_views", None) or []
    substitutes = any(view.startswith("synonym_substitution") for view in views)
    if substitutes and args.synonyms is None:
        raise arguments.UsageError("--text-views synonym_substitution needs --synonyms FILE")
    if getattr(args, "synonyms", None) is not None:
        if not substitutes:
            raise arguments.UsageError(
                "--synonyms is used by the synonym_substitution text view only")
        arguments.check_input_file(args.synonyms, "--synonyms")
        args.synonym_table = read_synonyms(args.synonyms, views)


def read_synonyms(path, views):
    """The synonym table of `--synonyms`, read and checked before any work.

    `kcse.data.read_synonym_table` reads it; the synonym_substitution views
    of `views` take it (`text_view_from_spec`). An unreadable file, a bad
    line or a table without any synonym is a UsageError naming the file
    (and line).
    """
    from kcse.data.text_views import read_synonym_table
    from kcse.data.text_views import text_view_from_spec

    try:
        table = read_synonym_table(path)
        substitutions = [text_view_from_spec(view, table) for view in views
                         if view.startswith("synonym_substitution")]
    except OSError as error:
        raise arguments.UsageError(
            f"--synonyms {path}: {error.strerror or error}") from None
    except ValueError as error:  # MalformedLineError names the file and line.
        text = " ".join(str(error).split())
        raise arguments.UsageError(
            f"--synonyms {text if str(path) in text else f'{path}: {text}'}") from None
    if not any(view.synonyms for view in substitutions):
        raise arguments.UsageError(
            f"--synonyms {path}: no word with a synonym; give a line per word, "
            "word<TAB>synonym synonym ...")
    return table


def check_comparison_arguments(args, method):
    """Everything of a recipe's `args` that can be checked without TensorFlow."""
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
    if args.plot and not _importable("matplotlib"):
        raise arguments.UsageError('--plot needs matplotlib: pip install -e ".[plot]"')
    check_method_arguments(method, args)
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


def recipe_main(method_name, doc, output, argv=None, poolings=DEFAULT_POOLINGS,
                languages=None):
    """A comparison recipe's `main`: its method's flags, checks, then the grid.

    `languages`: the default `--data-dir` of stsb-multi-mt for a grid over
    its languages (`comparison_parser`). Returns the `ResultStore`; a bad
    argument or input exits 2 with one line, failed cells exit 1 after the
    others ran.
    """
    parser = comparison_parser(doc, output, poolings, languages)
    add_method_arguments(parser, [method_name])
    try:
        args = parser.parse_args(argv)
        check_comparison_arguments(args, method_name)
    except arguments.UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        sys.exit(2)
    with one_line_stops(parser.prog, lambda: finished_cells(args.output)):
        return run_recipe(parser.prog, args, method_name)


@contextlib.contextmanager
def one_line_stops(prog, kept):
    """Ends a recipe that cannot write (a full disk) or is interrupted
    (Ctrl-C, or what a library made of it) with one line and exit code 1
    or 130; `kept()` says in words what the run wrote before."""
    interrupts.install()
    try:
        yield
    except atomic_files.WriteError as error:
        print(f"{prog}: error: {error}; {kept()}", file=sys.stderr)
        sys.exit(1)
    except BaseException as error:
        if not interrupts.caused(error):
            raise
        print(f"{prog}: interrupted; {kept()}", file=sys.stderr)
        sys.exit(130)


def finished_cells(output):
    """What results.json in `output` keeps of this run, in words."""
    count = atomic_files.written.count(pathlib.Path(output) / "results.json")
    if not count:
        return "no cell finished, nothing written"
    return f"{output}/results.json keeps the {count} cell(s) this run finished"


def run_recipe(prog, args, method_name):
    """`recipe_main`'s work once the arguments are checked."""
    from kcse.tensorflow_start import start_tensorflow

    arguments.one_line_warnings(prog)
    start_tensorflow(args.verbose)
    try:
        start_distributed(args)
    except arguments.UsageError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        sys.exit(2)
    from kcse.experiments import comparison

    try:
        method = comparison.method_from_args(method_name, args)
    except (OSError, ValueError) as error:  # The contents of --nli.
        print(f"{prog}: error: {' '.join(str(error).split())}", file=sys.stderr)
        sys.exit(2)
    with keeping_dtype_policy():
        print(start_speed(args))  # Before any model is built.
        try:
            return comparison.run_comparison(args, method)
        except comparison.ComparisonError as error:
            print(f"{prog}: error: {error}", file=sys.stderr)
            sys.exit(error.exit_code)
