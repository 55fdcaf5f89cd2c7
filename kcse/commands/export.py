"""`kcse export`: --model as a SavedModel for TF Serving, a
sentence-transformers or Hugging Face folder, or an ONNX model."""

import importlib.util
import json
import pathlib

from kcse.commands.checks import SubcommandChecks
from kcse.commands.common import CommandFailed
from kcse.commands.common import add_model_arguments
from kcse.commands.common import keep_prefix
from kcse.commands.common import load_encoder
from kcse.commands.common import one_line
from kcse.export.formats import FORMATS as EXPORT_FORMATS
from kcse.export.formats import ONNX_PACKAGES
from kcse.export.formats import QUANTIZATIONS
from kcse.export.formats import SENTENCE_TRANSFORMERS_POOLING
from kcse.export.formats import TENSORFLOW_FORMATS
from kcse.foundation import progress
from kcse.foundation.arguments import UsageError
from kcse.foundation.keras_start import start_keras
from kcse.layers.pooling_rules import DEFAULT_POOLING
from kcse.layers.pooling_rules import resolve_pooling
from kcse.models.model_sources import SU_MODELS


def add_parser(subparsers):
    """`kcse export`'s sub-parser, in `kcse`'s `subparsers`."""
    export = subparsers.add_parser(
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
    add_model_arguments(export, DEFAULT_POOLING["kcse export"])
    export.add_argument("--output", type=pathlib.Path, required=True,
                        help="the folder to write (a SavedModel's: serving/NAME/VERSION)")
    export.add_argument("--format", choices=EXPORT_FORMATS, default=EXPORT_FORMATS[0],
                        help="what to write (docs/serving_and_export.md)")
    export.add_argument("--normalize", action="store_true",
                        help="L2-normalise the vectors (not for --format huggingface, "
                        "which holds no pooling)")
    export.add_argument("--quantize", choices=QUANTIZATIONS, default=None,
                        help="--format onnx: also write model_int8.onnx, most dense "
                        "weights int8 (ONNX Runtime's dynamic quantisation)")
    export.add_argument("--overwrite", action="store_true",
                        help="replace a non-empty --output folder")
    export.set_defaults(run=run, inputs=(), output_kind="folder", replaces="OUTPUT",
                        checks=SubcommandChecks(needs_tensorflow=needs_tensorflow,
                                                model=check_flags, reads=read_paths))


def needs_tensorflow(args):
    """`--format F` when that format needs TensorFlow, else None."""
    return f"--format {args.format}" if args.format in TENSORFLOW_FORMATS else None


def read_paths(args):
    """`(flag, path)` read beside the model: the train.json beside a .keras
    file, which goes into a sentence-transformers folder's model card."""
    if not args.model.endswith(".keras"):
        return []
    return [("--model", pathlib.Path(args.model).with_name("train.json"))]


def check_flags(args):
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


def run(args):
    """`kcse export`: loads --model and writes it in --format."""
    start_keras(args.verbose)
    from kcse.export.formats import UnsupportedExportError
    from kcse.export.saved_model import ExportCheckError

    encoder, prefix, source = load_encoder(args)
    keep_prefix(encoder, prefix)  # Not in the Hugging Face folder: no place for it.
    if args.format != "tf_saved_model":
        if args.normalize:
            encoder.normalize = True
        options = {"overwrite": args.overwrite}
        if args.format == "sentence_transformers":
            options["training"] = training_record(args.model)
            options["base_model"] = args.model
            options["base_source"] = source
        if args.format == "onnx":
            options["quantize"] = args.quantize
        if args.format == "huggingface" and args.model in SU_MODELS:
            options["published_as"] = args.model  # His published cells stay beside it.
        try:
            with progress.task(f"writing {args.format}", unit=None):
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
        with progress.task("writing and checking the SavedModel", unit=None):
            signatures = encoder.export(args.output, normalize=args.normalize or None,
                                        overwrite=args.overwrite)
    except ExportCheckError as error:
        raise CommandFailed(" ".join(str(error).split())) from None
    print(f"wrote {args.output} with signatures {', '.join(signatures)}"
          + (f"; clients prepend {prefix!r} to sentences (default_prompt())" if prefix
             else "; no default prompt"))


def training_record(model):
    """`kcse train`'s train.json beside a .keras `model`, or None."""
    path = pathlib.Path(model).with_name("train.json")
    if not model.endswith(".keras") or not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UsageError(f"{path}: not kcse train's record ({one_line(error, path)})") from None
