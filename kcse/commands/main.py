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

import sys

from kcse.commands import encode
from kcse.commands import evaluate
from kcse.commands import export
from kcse.commands import train
from kcse.commands.checks import check_arguments
from kcse.commands.checks import check_replaced
from kcse.commands.checks import claiming
from kcse.commands.common import CommandFailed
from kcse.foundation import arguments
from kcse.foundation import atomic_files
from kcse.foundation import interrupts
from kcse.foundation import progress
from kcse.foundation.arguments import UsageError

# The subcommands, in the order `kcse --help` lists them.
SUBCOMMANDS = (train, evaluate, encode, export)


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
            with progress.reporting(not getattr(args, "quiet", False)):
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
    """The `kcse` parser: each subcommand's sub-parser (its module's `add_parser`)."""
    parser = arguments.Parser(
        prog="kcse",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=arguments.RawDescriptionHelpFormatter,
    )
    subparsers = parser.add_subparsers(dest="command", parser_class=arguments.Parser)
    for subcommand in SUBCOMMANDS:
        subcommand.add_parser(subparsers)
    return parser


if __name__ == "__main__":
    sys.exit(main())
