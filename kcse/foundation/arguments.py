"""Checked command-line values: a bad flag is one line, before any work.

The `kcse` command and the recipes build their parsers from these. Nothing
here imports Keras or TensorFlow, so `--help` and every argument error
return at once. A failure is a `UsageError`, which the commands print as
one line, `<command>: error: <message>`, and exit with code 2.

```python
parser = kcse.foundation.arguments.Parser(prog="demo")
parser.add_argument("--batch-size", type=kcse.foundation.arguments.integer(minimum=2))
parser.parse_args(["--batch-size", "1"])
# UsageError: argument --batch-size: must be an integer >= 2; got '1' ...
```
"""

import argparse
import ast
import difflib
import importlib.util
import math
import os
import pathlib
import warnings
import zipfile

from kcse.foundation.validation import MIN_SEQUENCE_LENGTH

# Random seeds reach numpy, whose seeds are 32-bit unsigned.
SEED_LIMIT = 2**32


class UsageError(Exception):
    """A problem with the user's arguments or files: one line, exit 2.

    `command` is the (sub)command it is about, when known.
    """

    def __init__(self, message, command=None):
        super().__init__(message)
        self.command = command


class ShowDefaults:
    """A help formatter mixin: a flag whose default is a value (not None or
    False) ends its help with `(default: VALUE)`, unless the help already
    says its default (in words: "default: the model's limit").

    A list default is shown comma-separated, as it is written on the
    command line (`--models e5-small,BERT`).
    """

    def _get_help_string(self, action):
        text = super()._get_help_string(action)
        default = action.default
        if default is None or default is False or default is argparse.SUPPRESS \
                or "default" in text.lower():
            return text
        shown = ",".join(map(str, default)) if isinstance(default, (list, tuple)) else default
        return f"{text} (default: {str(shown).replace('%', '%%')})"


class HelpFormatter(ShowDefaults, argparse.HelpFormatter):
    """`--help` with each flag's default (`ShowDefaults`); descriptions re-wrapped."""


class RawDescriptionHelpFormatter(ShowDefaults, argparse.RawDescriptionHelpFormatter):
    """`--help` with each flag's default; descriptions and epilogs as written."""


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (usage stays in `--help`), and
    whose `--help` shows every flag's default (`HelpFormatter` unless
    another `formatter_class` is given)."""

    def __init__(self, *args, formatter_class=HelpFormatter, **kwargs):
        super().__init__(*args, formatter_class=formatter_class, **kwargs)

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)", self.prog)


def integer(minimum=None, maximum=None):
    """An argparse type: an integer in `[minimum, maximum]` (either open)."""

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"must be {_describe('an integer', minimum, maximum)}; got {text!r}"
            ) from None
        if (minimum is not None and value < minimum) or (
            maximum is not None and value > maximum
        ):
            raise argparse.ArgumentTypeError(
                f"must be {_describe('an integer', minimum, maximum)}; got {text!r}"
            )
        return value

    parse.__name__ = "integer"
    return parse


def number(minimum=None, maximum=None, above=None, below=None):
    """An argparse type: a finite float, `minimum <= x <= maximum`, `above < x < below`."""
    bounds = [(minimum, ">="), (above, ">"), (below, "<"), (maximum, "<=")]
    words = " and ".join(f"{sign} {bound:g}" for bound, sign in bounds if bound is not None)
    wanted = f"a finite number{' ' + words if words else ''}"

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or any(
            bound is not None and not compare(value, bound)
            for bound, compare in (
                (minimum, float.__ge__), (above, float.__gt__),
                (below, float.__lt__), (maximum, float.__le__),
            )
        ):
            raise argparse.ArgumentTypeError(f"must be {wanted}; got {text!r}")
        return value

    parse.__name__ = "number"
    return parse


def _describe(kind, minimum, maximum):
    if minimum is not None and maximum is not None:
        return f"{kind} from {minimum} to {maximum}"
    if minimum is not None:
        return f"{kind} >= {minimum}"
    if maximum is not None:
        return f"{kind} <= {maximum}"
    return kind


def sequence_length(text):
    """An argparse type: a token length, an integer >= `MIN_SEQUENCE_LENGTH`
    (3: [CLS], a token and [SEP]; below it every sentence gets one vector)."""
    try:
        return integer(minimum=MIN_SEQUENCE_LENGTH)(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be an integer >= {MIN_SEQUENCE_LENGTH} ([CLS], at least one token and "
            f"[SEP]; shorter, every sentence gets the same vector); got {text!r}") from None


positive_integer = integer(minimum=1)
seed = integer(minimum=0, maximum=SEED_LIMIT - 1)
positive_number = number(above=0)
non_negative_number = number(minimum=0)
# Dropout and cutoff rates: a rate of 1 would drop everything.
rate = number(minimum=0, below=1)


def comma_list(text):
    """`"a, b,c"` -> `["a", "b", "c"]`; an empty list or item is an error.

    An empty item (`"P1,,P3"`, `"P1,"`) is not skipped: it is most likely a
    name left out by mistake.
    """
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise argparse.ArgumentTypeError(f"expected a comma-separated list; got {text!r}")
    if not all(items):
        raise argparse.ArgumentTypeError(
            f"an empty item in {text!r}; give names separated by single commas")
    return items


def choices_list(choices):
    """An argparse type: a comma list whose items are all in `choices`."""

    def parse(text):
        items = comma_list(text)
        unknown = [item for item in items if item not in choices]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(map(repr, unknown))}; choose from {', '.join(choices)}"
            )
        if len(set(items)) != len(items):
            raise argparse.ArgumentTypeError(f"a name is given twice in {text!r}")
        return items

    parse.__name__ = "list"
    return parse


def check_input_file(path, flag):
    """`path` is a readable, non-empty file; else UsageError naming `flag`."""
    path = pathlib.Path(path)
    if path.is_dir():
        raise UsageError(f"{flag} {path}: is a folder; give a file")
    if not path.is_file():
        raise UsageError(f"{flag} {path}: no such file")
    if not os.access(path, os.R_OK):
        raise UsageError(f"{flag} {path}: permission denied")
    if path.stat().st_size == 0:
        raise UsageError(f"{flag} {path}: the file is empty")


def check_input_folder(path, flag):
    path = pathlib.Path(path)
    if path.is_file():
        raise UsageError(f"{flag} {path}: is a file; give a folder")
    if not path.is_dir():
        raise UsageError(f"{flag} {path}: no such folder")


def check_output(path, flag, folder, suffixes=()):
    """`path` can be written: a folder (`folder`) or a file with `suffixes`.

    An existing path of the other kind, a suffix not in `suffixes`, or a
    place that cannot be created or written is a UsageError naming `flag`.
    Whether an existing output may be replaced is the caller's to decide.
    """
    path = pathlib.Path(path)
    if folder and path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path}: is a file; give a folder")
    if not folder and path.is_dir():
        raise UsageError(f"{flag} {path}: is a folder; give a file name")
    if suffixes and path.suffix not in suffixes:
        raise UsageError(f"{flag} {path}: the name must end in {' or '.join(suffixes)}")
    existing = path if folder and path.is_dir() else path.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{flag} {path}: {existing} is a file, not a folder")
    if read_only_file_system(existing):
        raise UsageError(f"{flag} {path}: cannot write in {existing} (read-only file system)")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {path}: cannot write in {existing} (permission denied)")


def check_apart(outputs, inputs):
    """No output is, holds or lies inside an input: kcse never writes over
    what it reads, with or without --overwrite.

    `outputs` and `inputs` are `(flag, path)` pairs. Paths are compared
    resolved (links, `..`, relative paths), and existing files also as
    files (`os.path.samefile`: a hard link is the same file). A clash is a
    UsageError naming both flags and paths.
    """
    for output_flag, output in outputs:
        for input_flag, source in inputs:
            relation = path_relation(output, source)
            if relation is not None:
                raise UsageError(f"{output_flag} {output}: {relation} {input_flag} {source}; "
                                 "kcse never writes over what it reads: choose another "
                                 f"{output_flag}")


def path_relation(output, source):
    """How path `output` stands to path `source`: "is", "holds" (a folder
    above it), "lies inside" (a folder below it), or None (apart)."""
    resolved_output, resolved_source = (pathlib.Path(output).resolve(),
                                        pathlib.Path(source).resolve())
    if resolved_output == resolved_source or _same_file(output, source):
        return "is"
    if resolved_output in resolved_source.parents:
        return "holds"
    if resolved_source in resolved_output.parents:
        return "lies inside"
    return None


def _same_file(first, second):
    try:
        return os.path.samefile(first, second)
    except OSError:  # Either does not exist.
        return False


def read_only_file_system(path):
    """Whether `path` is on a file system mounted read-only (False where unknown)."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # No statvfs on Windows.
        return False


def check_model_name(name, flag, checkpoint_root=None, su_checkpoints=(), short_names=(),
                     families=()):
    """What can be checked of a model name without loading anything.

    `.keras` files must exist and be Keras archives (zip files holding
    config.json); folders must exist; Su's names need `checkpoint_root`
    holding their folder; `PATH:family` needs a known family and a folder;
    any other existing file is not a model. Other names are keras-hub
    presets: an unknown one is an error when keras-hub's preset list can be
    read without importing it (`keras_hub_presets`), else it is checked
    when keras-hub loads.
    """
    if name.endswith(".keras"):
        check_input_file(name, flag)
        return check_keras_archive(name, flag)
    if name in su_checkpoints:
        if checkpoint_root is None:
            raise UsageError(f"{flag} {name} needs --checkpoint-root, the folder holding "
                             f"{su_checkpoints[name]}/ (the original release)")
        return check_input_folder(pathlib.Path(checkpoint_root) / su_checkpoints[name], flag)
    if name in short_names or name.startswith(("hf://", "kaggle://")):
        return None
    if ":" in name:
        path, family = name.rsplit(":", 1)
        if family not in families:
            raise UsageError(f"{flag} {name}: unknown family {family!r}; choose from "
                             f"{', '.join(families)}")
        return check_input_folder(path, flag)
    if pathlib.Path(name).is_dir():
        return None
    if pathlib.Path(name).exists():
        raise UsageError(
            f"{flag} {name}: a file, but not a model; give a .keras file, a model "
            f"folder, a model name ({', '.join([*short_names, *su_checkpoints])}) "
            "or a keras-hub preset")
    if os.sep in name or name.startswith(("~", ".")):
        raise UsageError(f"{flag} {name}: no such file or folder")
    presets = keras_hub_presets()
    if presets and name not in presets:
        close = difflib.get_close_matches(name, [*presets, *short_names, *su_checkpoints], n=3)
        raise UsageError(
            f"{flag} {name}: not a .keras file, folder, model name ("
            f"{', '.join([*short_names, *su_checkpoints])}) or keras-hub preset"
            + (f"; did you mean {', '.join(close)}?" if close else "")
        )
    return None


def check_keras_archive(path, flag):
    """`path` (a `.keras` file) is a Keras archive: a zip file with config.json.

    Keras itself says "File not found" of a file that is there but is not a
    zip archive; this says what is wrong, before Keras loads.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError) as error:
        raise UsageError(f"{flag} {path}: not a valid Keras archive ({error}); a .keras "
                         "file is a zip archive holding config.json") from None
    if "config.json" not in names:
        raise UsageError(f"{flag} {path}: not a valid Keras archive (no config.json in "
                         "the zip archive); a .keras file is a zip archive holding config.json")


def keras_hub_presets():
    """keras-hub's preset names, read from its preset files (no import).

    keras-hub declares its presets as dict literals in
    `keras_hub/src/models/*/*_presets.py`; they are parsed, not run. An
    empty set when that layout is not found (then presets are checked when
    keras-hub loads them).
    """
    spec = importlib.util.find_spec("keras_hub")
    if spec is None or not spec.submodule_search_locations:
        return set()
    names = set()
    for root in spec.submodule_search_locations:
        for path in pathlib.Path(root).glob("src/models/*/*_presets.py"):
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, UnicodeDecodeError):
                return set()
            for node in tree.body:
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
                    names.update(
                        key.value for key in node.value.keys
                        if isinstance(key, ast.Constant) and isinstance(key.value, str)
                    )
    return names


def one_line_warnings(prog):
    """Prints Python warnings as `<prog>: warning: <message>`, a line each.

    The default format adds the file, line and source line of kcse's code,
    which says nothing to someone running a command.
    """
    warnings.formatwarning = lambda message, *rest, **kwargs: (
        f"{prog}: warning: {' '.join(str(message).split())}\n")
