"""`kcse train`: trains --model with --method on --task's sentences and
writes OUTPUT/encoder.keras and OUTPUT/train.json (its Spearman before and
after)."""

import pathlib

from kcse.commands.checks import SubcommandChecks
from kcse.commands.common import CommandFailed
from kcse.commands.common import add_model_arguments
from kcse.commands.common import keep_prefix
from kcse.commands.common import load_encoder
from kcse.commands.common import one_line
from kcse.data.chinese import CHINESE_TASKS
from kcse.experiments import command_line
from kcse.experiments import methods
from kcse.experiments import protocols
from kcse.foundation import arguments
from kcse.foundation import atomic_files
from kcse.foundation.arguments import UsageError
from kcse.foundation.keras_start import start_keras
from kcse.layers.pooling_rules import DEFAULT_POOLING
from kcse.models.model_sources import keeps_pooling


def add_parser(subparsers):
    """`kcse train`'s sub-parser, in `kcse`'s `subparsers`."""
    train = subparsers.add_parser(
        "train", help="train an encoder with a method on a task's sentences",
        description="Trains --model with --method on --task's data under\n"
        "--protocol; writes OUTPUT/encoder.keras and OUTPUT/train.json (test\n"
        "Spearman before and after), and prints them. Every setting left out is\n"
        "the method's paper's (the method registry, listed below with its source).",
        epilog=command_line.paper_settings_epilog(methods.METHODS),
        formatter_class=arguments.RawDescriptionHelpFormatter,
    )
    add_model_arguments(train, DEFAULT_POOLING["kcse train"],
                        "the pooling the method's paper reports, its scoring_pooling "
                        f"below, else {DEFAULT_POOLING['kcse train']}",
                        max_length=False)  # The protocol's flag.
    train.add_argument("--method", choices=tuple(methods.METHODS), default="simcse",
                       help="the training method (its paper's settings below)")
    train.add_argument("--task", choices=CHINESE_TASKS, default="STS-B",
                       help="Su's Chinese task whose sentences train and whose "
                       "test split is scored")
    train.add_argument("--data-dir", type=pathlib.Path,
                       help="<TASK>/<TASK>.{train,valid,test}.data folders "
                       "(default: the Chinese STS-B bundled with kcse)")
    train.add_argument("--protocol", choices=("su", "clean"), default="clean",
                       help=command_line.PROTOCOL_HELP)
    train.add_argument("--output", type=pathlib.Path, required=True,
                       help="folder for encoder.keras and train.json")
    train.add_argument("--seed", type=arguments.seed, default=0,
                       help="seed of the training run (data order, dropout)")
    train.add_argument("--overwrite", action="store_true",
                       help="replace an encoder.keras already in --output")
    command_line.add_training_arguments(train)
    command_line.add_speed_arguments(train)
    command_line.add_method_arguments(train, methods.METHODS)
    train.set_defaults(run=run, inputs=(), output_kind="folder",
                       replaces="OUTPUT/encoder.keras",
                       checks=SubcommandChecks(model=choose_pooling, inputs=check_inputs,
                                               reads=read_paths))


def choose_pooling(args):
    """--pooling left out: the method's (`scoring_pooling`), unless the
    model keeps its own (a .keras file, a sentence-transformers folder)."""
    if args.pooling is None and not keeps_pooling(args.model):
        args.pooling = scoring_pooling(args.method)


def scoring_pooling(method):
    """The pooling `kcse train --method method` scores with by default:
    the one its paper reports (the registry's `scoring_pooling`; the
    recipes' row), else `DEFAULT_POOLING["kcse train"]` (last_avg)."""
    return methods.METHODS[method].paper("scoring_pooling") or DEFAULT_POOLING["kcse train"]


def check_inputs(args):
    """--data-dir's task files, the method's flags and files, the speed
    and --distributed flags, before any work."""
    if args.data_dir is not None:
        arguments.check_input_folder(args.data_dir, "--data-dir")
    command_line.check_task_files(args.data_dir, [args.task])
    command_line.check_method_arguments(args.method, args)
    command_line.check_train_file(args, args.method)
    command_line.check_speed_arguments(args)
    command_line.check_distributed(args)


def read_paths(args):
    """`(flag, path)` read beside the model: --data-dir (the bundled one by
    default), --train-file and the method's files (--nli, --synonyms)."""
    from kcse.data.chinese import BUNDLED_CHINESE_STS

    return ([("--data-dir", args.data_dir or BUNDLED_CHINESE_STS)]
            + command_line.read_files(args, args.method))


def run(args):
    """`kcse train`: reads the task, starts Keras, trains and writes."""
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
        run = train_once(method, encoder, data, protocol, args.task, args.seed, prefix)
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
        "method_title": method.title, "citation": method.citation,
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
