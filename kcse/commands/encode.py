"""`kcse encode`: the vectors of every line of a text or JSON lines file
(or of one shard of its lines), written to .npy or .jsonl as they come."""

import argparse
import itertools
import json
import pathlib
import typing

import numpy as np

from kcse.commands.checks import SubcommandChecks
from kcse.commands.common import add_model_arguments
from kcse.commands.common import load_encoder
from kcse.commands.encode_writer import EncodeWriter
from kcse.foundation import arguments
from kcse.foundation import atomic_files
from kcse.foundation import progress
from kcse.foundation.arguments import UsageError
from kcse.export.formats import ONNX_PACKAGES
from kcse.export.formats import QUANTIZATIONS
from kcse.foundation.keras_start import start_keras
from kcse.layers.pooling_rules import DEFAULT_POOLING
from kcse.onnx_runtime import CACHE_VARIABLE
from kcse.onnx_runtime import DEFAULT_CACHE
from kcse.onnx_runtime import missing_packages


def add_parser(subparsers):
    """`kcse encode`'s sub-parser, in `kcse`'s `subparsers`."""
    encode = subparsers.add_parser(
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
    add_model_arguments(encode, DEFAULT_POOLING["kcse encode"])
    encode.add_argument("--input", type=pathlib.Path, required=True,
                        help="a text file (one sentence a line) or a .jsonl file")
    encode.add_argument("--output", type=pathlib.Path, required=True,
                        help="a .npy or .jsonl file")
    encode.add_argument("--field", default="text", help="jsonl input: the text field")
    encode.add_argument("--batch-size", type=arguments.positive_integer, default=64,
                        help="sentences encoded at a time")
    encode.add_argument("--normalize", action="store_true", help="L2-normalise")
    encode.add_argument("--runtime", choices=RUNTIMES, default=RUNTIMES[0],
                        help="keras: the encoder itself; onnxruntime: ONNX Runtime on the "
                        "CPU, running the encoder's ONNX export, made once into "
                        f"${CACHE_VARIABLE} (default {DEFAULT_CACHE}) and reused, with "
                        "the same vectors (needs the onnx extra and TensorFlow)")
    encode.add_argument("--quantize", choices=QUANTIZATIONS, default=None,
                        help="--runtime onnxruntime: run the export's int8 model (ONNX "
                        "Runtime's dynamic quantisation; faster, a little less exact)")
    encode.add_argument("--shard", type=shard, default=Shard(1, 1), metavar="K/N",
                        help="encode lines K, K+N, K+2N, ... only (1 <= K <= N; "
                        "default 1/1, every line)")
    encode.add_argument("--overwrite", action="store_true",
                        help="replace a file already at --output")
    encode.set_defaults(run=run, inputs=("input",), output_kind="file", replaces="OUTPUT",
                        output_suffixes=(".npy", ".jsonl"),
                        checks=SubcommandChecks(needs_tensorflow=needs_tensorflow,
                                                flags=check_flags))


# `kcse encode --runtime`: what runs the encoder's batches.
RUNTIMES = ("keras", "onnxruntime")


def needs_tensorflow(args):
    """`--runtime onnxruntime`, whose export is converted from TensorFlow, else None."""
    return "--runtime onnxruntime" if args.runtime == "onnxruntime" else None


def check_flags(args):
    """--quantize only with --runtime onnxruntime, which needs the onnx extra."""
    if args.quantize is not None and args.runtime != "onnxruntime":
        raise UsageError(f"--quantize {args.quantize}: only --runtime onnxruntime "
                         "runs a quantised model")
    missing = missing_packages() if args.runtime == "onnxruntime" else []
    if missing:
        raise UsageError(f"--runtime onnxruntime needs the packages {', '.join(ONNX_PACKAGES)} "
                         f"(pip install 'kcse[onnx]'); missing: {', '.join(missing)}")


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


def run(args):
    """`kcse encode`: checks every line, then encodes the shard's, writing as it goes."""
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
    from kcse.batched_prediction import predict_in_chunks

    encoder, prefix, _ = load_encoder(args, inference_only=True)
    model = encoder
    if args.runtime == "onnxruntime":
        from kcse.onnx_runtime import OnnxEncoder

        try:
            with progress.task("ONNX model (exported once, then cached)", unit=None):
                model = OnnxEncoder(encoder, quantize=args.quantize)
        except (ValueError, RuntimeError) as error:  # RuntimeError: no export on JAX.
            raise UsageError(f"--runtime onnxruntime: {args.model}: {error}") from None
        print(f"runtime: ONNX Runtime, {model.folder}")
    numbered_texts = args.shard.lines(read_texts(args.input, args.field))
    records = None
    if args.output.suffix == ".jsonl":
        # Read in step twice: by the encoder (a chunk ahead), for the records.
        numbered_texts, records = itertools.tee(numbered_texts)
    texts = (prefix + text for _, text in numbered_texts)
    with atomic_files.replacing(args.output, replace=args.overwrite) as temporary:
        with EncodeWriter(temporary, count, args.field, records, args.output) as writer:
            for rows, vectors in predict_in_chunks(model, encoder.preprocessor, texts,
                                                   args.batch_size, warn_truncation=True,
                                                   total=count):
                vectors = vectors.astype("float32")
                if args.normalize:
                    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
                writer.write(rows, vectors)
    index, every = args.shard
    held = "every line" if every == 1 else (
        f"lines {index}, {index + every}, {index + 2 * every}, ... (shard {index}/{every})")
    print(f"wrote {count} vectors of dimension {writer.dimension} to {args.output}: "
          f"{held} of {args.input}")
