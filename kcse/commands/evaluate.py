"""`kcse evaluate`: Spearman and Pearson of --model on labelled pair files,
or the English STS table of the SimCSE and ConSERT papers (--suite); and
C-MTEB's result files of those scores (--mteb-output)."""

import pathlib
import time

from kcse.commands.checks import SubcommandChecks
from kcse.commands.common import CommandFailed
from kcse.commands.common import add_model_arguments
from kcse.commands.common import load_encoder
from kcse.commands.common import one_line
from kcse.experiments import english_sts
from kcse.foundation import arguments
from kcse.foundation import atomic_files
from kcse.foundation.arguments import UsageError
from kcse.foundation.keras_start import start_keras
from kcse.layers.pooling_rules import DEFAULT_POOLING


def add_parser(subparsers):
    """`kcse evaluate`'s sub-parser, in `kcse`'s `subparsers`."""
    evaluate = subparsers.add_parser(
        "evaluate", help="Spearman / Pearson of an encoder on STS files",
        description="Scores --model on labelled pair files (senteval_cn "
        ".data, stsb-multi-mt .csv, SemEval STS .tsv, SICK .txt) and prints "
        "a table of Spearman and Pearson ×100; or, with --suite english-sts, "
        "prints the English table of the SimCSE and ConSERT papers.",
    )
    add_model_arguments(evaluate, DEFAULT_POOLING["kcse evaluate"])
    evaluate.add_argument("--data", type=pathlib.Path, nargs="+",
                          help="labelled pair files to score, a table row each, "
                          "named by its file stem")
    evaluate.add_argument("--suite", choices=(english_sts.SUITE,),
                          help="instead of --data: STS12-16 (each year's sub-corpora "
                          "pooled, one Spearman: 'all', as princeton-nlp/SimCSE's "
                          "evaluation.py reports; and SentEval's 'wmean' of the "
                          "sub-corpora, a row beside it), STS-B and SICK-R test, and "
                          "their average, Spearman x100, from --data-dir")
    evaluate.add_argument("--data-dir", type=pathlib.Path,
                          help="--suite english-sts: the folder holding sts_en/STS12.."
                          "STS16/*.test.tsv, sts_en/SICK/SICK_test_annotated.txt and "
                          "stsb_multi_mt/stsb-en-test.csv (laid out as ../shared/data), "
                          "or SentEval's data folder as its get_transfer_data.bash lays "
                          "it out (downstream/STS/STS12-en-test/STS.input.*.txt, ...)")
    evaluate.add_argument("--markdown", type=pathlib.Path,
                          help="--suite english-sts: also write the table here")
    evaluate.add_argument("--batch-size", type=arguments.positive_integer, default=64,
                          help="sentences encoded at a time")
    evaluate.add_argument("--json", type=pathlib.Path, help="also write the table here")
    evaluate.add_argument("--mteb-output", type=pathlib.Path, metavar="DIR",
                          help="--data files of C-MTEB's STS tasks (Su's <TASK>.<valid|"
                          "test>.data): also write MTEB result files, "
                          "DIR/results/<model>/<revision>/<Task>.json, which "
                          "mteb.ResultCache(DIR) reads")
    evaluate.add_argument("--overwrite", action="store_true",
                          help="replace a file already at --json or --markdown")
    evaluate.set_defaults(run=run, inputs=("data",), output_kind=None, replaces="JSON",
                            checks=SubcommandChecks(flags=check_flags, reads=read_paths))


def read_paths(args):
    """`(flag, path)` read beside the model and --data: --data-dir, if given."""
    return [] if args.data_dir is None else [("--data-dir", args.data_dir)]


def check_flags(args):
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


def read_pair_files(paths):
    """The labelled pairs of each of `paths`; a file that cannot be read or
    holds none is a UsageError naming it."""
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


def run(args):
    """`kcse evaluate`: the table of --data's files (or of --suite)."""
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
    for path, name, read in zip(args.data, data_names(args.data), pairs):
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
        rows.append({"data": name, "file": str(path)} | result)
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


def data_names(paths):
    """The table's name of each of `paths`: the file's stem (`STS-B.test`,
    `stsb-zh-test`), with as many of its folders as keep the names apart
    (`a/STS-B.test`, `b/STS-B.test`), else the path as given (`x.csv` beside
    `x.data`); a file given twice is numbered (`STS-B.test #2`)."""
    tails = [pathlib.Path(path).with_suffix("").as_posix().split("/") for path in paths]
    depths = [1] * len(tails)
    while True:
        names = ["/".join(tail[-depth:]) if depth <= len(tail) else str(path)
                 for path, tail, depth in zip(paths, tails, depths)]
        clashing = [index for index, name in enumerate(names)
                    if names.count(name) > 1 and depths[index] <= len(tails[index])]
        if not clashing:
            return [name if names[:index].count(name) == 0
                    else f"{name} #{names[:index].count(name) + 1}"
                    for index, name in enumerate(names)]
        for index in clashing:
            depths[index] += 1


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
