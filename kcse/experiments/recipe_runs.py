"""A comparison recipe's run: its flags parsed and checked, the grids run,
one line and an exit code for whatever stops it.

Every recipe (`recipes/chinese_simcse.py`, `consert.py`, `sg_opt.py`,
`sup_simcse.py`, ...) is `recipe_main` with its method; ConSERT's sweeps
(`kcse.experiments.sweeps`) run several grids through `run_grids`. The
flags and their checks are `kcse.experiments.command_line`'s.
"""

import contextlib
import pathlib
import sys

from kcse.foundation import arguments
from kcse.foundation import atomic_files
from kcse.foundation import interrupts
from kcse.foundation import progress
from kcse.experiments.command_line import add_method_arguments
from kcse.experiments.command_line import check_comparison_arguments
from kcse.experiments.command_line import comparison_parser
from kcse.experiments.command_line import keeping_dtype_policy
from kcse.experiments.command_line import method_poolings
from kcse.experiments.command_line import start_distributed
from kcse.experiments.command_line import start_speed
from kcse.experiments.methods import METHODS


def recipe_main(method_name, doc, output, argv=None, poolings=None,
                languages=None, choose_method=False):
    """A comparison recipe's `main`: its method's flags, checks, then the grid.

    `poolings`: the default rows (None: the method's, `method_poolings`).
    `languages`: the default `--data-dir` of stsb-multi-mt for a grid over
    its languages (`comparison_parser`). With `choose_method`, `--method`
    picks any method of the registry (default: `method_name`) and every
    method's flags are there. Returns the `ResultStore`; a bad argument or
    input exits 2 with one line, failed cells exit 1 after the others ran.
    """
    names = list(METHODS) if choose_method else [method_name]
    parser = comparison_parser(doc, output, poolings, languages, methods=names)
    if choose_method:
        parser.add_argument("--method", choices=tuple(METHODS), default=method_name,
                            help="the method of column c (default: %(default)s)")
    add_method_arguments(parser, names)
    try:
        args = parser.parse_args(argv)
        method_name = args.method if choose_method else method_name
        args.poolings = args.poolings or method_poolings(method_name)
        check_comparison_arguments(args, method_name)
    except arguments.UsageError as error:
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        sys.exit(2)
    with one_line_stops(parser.prog, lambda: finished_cells(args.output)):
        return run_recipe(parser.prog, args, method_name)


@contextlib.contextmanager
def one_line_stops(prog, kept):
    """Ends a recipe that cannot write (a full disk) or is interrupted
    (Ctrl-C, or what a library made of it) with one line and exit code 1
    or 130, and one whose Keras cannot start (`start_keras`'s
    UsageError) with exit code 2; `kept()` says in words what the run
    wrote before."""
    interrupts.install()
    try:
        yield
    except arguments.UsageError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        sys.exit(2)
    except atomic_files.WriteError as error:
        print(f"{prog}: error: {error}; {kept()}", file=sys.stderr)
        sys.exit(1)
    except BaseException as error:
        if not interrupts.caused(error):
            raise
        print(f"{prog}: interrupted; {kept()}", file=sys.stderr)
        sys.exit(130)


def finished_cells(output):
    """What results.json in `output` keeps of this run, in words."""
    count = atomic_files.written.count(pathlib.Path(output) / "results.json")
    if not count:
        return "no cell finished, nothing written"
    return f"{output}/results.json keeps the {count} cell(s) this run finished"


def run_recipe(prog, args, method_name):
    """`recipe_main`'s work once the arguments are checked; returns the
    `ResultStore` (exit 1 after the grid when cells failed)."""
    store, keys = run_grids(prog, [args], method_name)[0]
    write_mteb_output(args, [(store, keys)])
    exit_for_failed_cells(prog, store, keys)
    return store


def write_mteb_output(args, grids):
    """`--mteb-output`: the finished cells of `grids` (`(store, keys)` of
    each grid run) as MTEB result files (`kcse.experiments.mteb_cells`),
    written by process 0 of a multi-process run."""
    from kcse import distribution
    from kcse.experiments.mteb_cells import write_cells_as_mteb

    if getattr(args, "mteb_output", None) is None or not distribution.is_chief():
        return
    cells = [store.cells[key] for store, keys in grids for key in keys if key in store.cells]
    folders = write_cells_as_mteb(args.mteb_output, cells)
    print(f"MTEB results: {len(folders)} model(s) in {args.mteb_output / 'results'}")


def run_grids(prog, runs, method_name):
    """Starts TensorFlow once, then runs the grid of each checked argument
    namespace of `runs` with `method_name`'s method (a sweep's values);
    returns their `(store, keys)`. A bad input exits 2 with one line."""
    from kcse.foundation.keras_start import start_keras

    arguments.one_line_warnings(prog)
    try:
        start_keras(runs[0].verbose)  # A keras.json Keras rejects: a UsageError.
        start_distributed(runs[0])
    except arguments.UsageError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        sys.exit(2)
    from kcse.experiments import comparison
    from kcse.experiments.methods import method_from_args

    try:
        methods = [method_from_args(method_name, args) for args in runs]
    except (OSError, ValueError) as error:  # The contents of --nli.
        print(f"{prog}: error: {' '.join(str(error).split())}", file=sys.stderr)
        sys.exit(2)
    with keeping_dtype_policy():
        print(start_speed(runs[0]))  # Before any model is built.
        try:
            raw_cache = {}  # The raw vectors, encoded once for every run.
            with progress.reporting(not runs[0].quiet):
                return [comparison.run_comparison(args, method, raw_cache=raw_cache)
                        for args, method in zip(runs, methods)]
        except comparison.ComparisonError as error:
            print(f"{prog}: error: {error}", file=sys.stderr)
            sys.exit(error.exit_code)


def exit_for_failed_cells(prog, store, keys):
    """Exit 1 with one line naming each failed cell of `keys`, if any."""
    from kcse.experiments import comparison

    try:
        comparison.check_cells(store, keys)
    except comparison.CellsFailed as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        sys.exit(error.exit_code)
