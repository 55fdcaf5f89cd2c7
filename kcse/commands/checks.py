"""What every `kcse` subcommand's arguments pass before any work.

`check_arguments` checks the files, folders, model and flags in one
order for every subcommand, calling the subcommand's own checks
(`SubcommandChecks`, set as the sub-parser's `checks` default) at their
places; `claiming` and `check_replaced` keep one run from writing over
another's output or over what the user did not ask to replace.
"""

import contextlib
import pathlib
import typing

from kcse.foundation import arguments
from kcse.foundation import atomic_files
from kcse.foundation import file_locks
from kcse.foundation.arguments import UsageError
from kcse.foundation.backend_choice import check_backend
from kcse.models.model_sources import check_model
from kcse.models.model_sources import pooling_problem


def no_tensorflow(args):
    """A subcommand whose flags need no TensorFlow of their own."""
    return None


def no_check(args):
    """A subcommand without a check at that place."""


def nothing_read(args):
    """A subcommand that reads no file beside --model and its inputs."""
    return []


class SubcommandChecks(typing.NamedTuple):
    """A subcommand's own checks, each a function of the parsed `args`.

    `needs_tensorflow`: what of the flags needs TensorFlow, in words, or
    None (`check_backend`); `flags`: flags that depend on each other,
    before any file is looked at; `model`: once --model is known to exist,
    before its pooling is checked; `inputs`: after the pooling, the
    subcommand's own input files; `reads`: `(flag, path)` of the files and
    folders it reads beside --model, --checkpoint-root and its inputs.
    """

    needs_tensorflow: typing.Callable = no_tensorflow
    flags: typing.Callable = no_check
    model: typing.Callable = no_check
    inputs: typing.Callable = no_check
    reads: typing.Callable = nothing_read


def check_arguments(args):
    """Files, folders, models and flags that depend on each other, before any work."""
    checks = args.checks
    check_backend(checks.needs_tensorflow(args))
    checks.flags(args)
    for name in args.inputs:
        value = getattr(args, name)
        for path in value if isinstance(value, list) else [value]:
            arguments.check_input_file(path, f"--{name}")
    if args.checkpoint_root is not None:
        arguments.check_input_folder(args.checkpoint_root, "--checkpoint-root")
    check_model(args.model, "--model", args.checkpoint_root)
    if args.model.endswith(".keras") and args.checkpoint_root is not None:
        raise UsageError("--checkpoint-root is for checkpoint names; --model is a .keras file")
    checks.model(args)
    try:  # What the model's files say; else after it loads.
        problem = pooling_problem(args.model, args.pooling, args.checkpoint_root)
    except ValueError as error:  # A config file of the model that is not JSON.
        raise UsageError(f"--model {args.model}: {error}") from None
    if problem is not None:
        raise UsageError(f"--pooling {args.pooling}: {problem}; use another pooling")
    checks.inputs(args)
    check_outputs(args)


def check_outputs(args):
    """Where the command writes: writable, apart from what it reads and
    from each other; `args.claimed`, what this process claims."""
    if args.output_kind:
        arguments.check_output(args.output, "--output", folder=args.output_kind == "folder",
                               suffixes=getattr(args, "output_suffixes", ()))
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
    (a file, a folder, `PATH:family`'s folder), --checkpoint-root, --input,
    --data, and what the subcommand's `reads` adds (train: --data-dir, the
    bundled one by default, --train-file and method files (--nli,
    --synonyms); evaluate: --data-dir; export: the train.json beside a
    .keras file)."""
    paths = []
    for name in args.inputs:
        value = getattr(args, name)
        paths += [(f"--{name}", path) for path in (value if isinstance(value, list) else [value])]
    model = args.model.rsplit(":", 1)[0] if ":" in args.model else args.model
    if args.model.endswith(".keras") or pathlib.Path(model).exists():
        paths.append(("--model", pathlib.Path(model)))
    if args.checkpoint_root is not None:
        paths.append(("--checkpoint-root", args.checkpoint_root))
    return paths + args.checks.reads(args)


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
