"""Starting Keras, and TensorFlow where it runs, without their start-up lines.

Importing TensorFlow writes C++ log lines to the process's stderr before
its logging is configured (oneDNN, cudart, CPU features, cuInit), and
`TF_CPP_MIN_LOG_LEVEL` does not reach all of them. The `kcse` command and
the recipes call `start_keras` after their arguments are checked, and
`import kcse` starts Keras the same way when a public name first needs it
(`kcse.SentenceEncoder`: `quiet_start` around the import, in
`kcse.public_api.exports`). Either imports Keras and keras-hub (which
imports TensorFlow wherever TensorFlow is installed, on any backend) and,
on the TensorFlow backend, TensorFlow and its devices, with file
descriptor 2 sent to a temporary file, then writes back whatever is not a
start-up line `TF_CPP_MIN_LOG_LEVEL` hides (a real error stays visible).

`TF_CPP_MIN_LOG_LEVEL` is the user's to set: a value set before kcse starts
TensorFlow is kept, and its start-up lines are hidden as that level hides
TensorFlow's other records (0: all shown, 1: INFO hidden, 2: WARNING too,
3: ERROR too); unset, kcse sets it to 3. The commands' `--verbose` shows
everything. On JAX kcse itself never imports TensorFlow: a machine
without it runs every feature but the TensorFlow-only ones.
"""

import contextlib
import importlib
import os
import re
import sys
import tempfile

# TensorFlow's start-up lines, each with its severity, the highest
# `TF_CPP_MIN_LOG_LEVEL` that still shows it: absl INFO records, the
# absl preamble and the CPU-feature note's second line (0), absl WARNING
# records (1), and cuInit's ERROR on a machine without a GPU (2).
START_UP_LINES = (
    (0, re.compile(rb"^(?:I\d{4} |WARNING: All log messages before absl"
                   rb"|To enable the following instructions)")),
    (1, re.compile(rb"^W\d{4} ")),
    (2, re.compile(rb"^E\d{4} .*cuInit")),
)
# What kcse sets `TF_CPP_MIN_LOG_LEVEL` to when the user has not.
QUIET_LEVEL = "3"


def start_keras(verbose=False):
    """Imports Keras and keras-hub, and TensorFlow on its backend, hiding
    their start-up lines unless `verbose` (`quiet_start`).

    `TF_CPP_MIN_LOG_LEVEL=3` when the environment does not set it keeps
    TensorFlow's C++ records, ERROR included, off the terminal during the
    run too (e.g. "oneDNN supports DT_INT64 only on platforms with
    AVX-512" while training on this CPU); its failures still arrive as
    Python exceptions. Safe to call more than once.
    """
    with quiet_start(verbose):
        _import_keras()


@contextlib.contextmanager
def quiet_start(verbose=False):
    """A block that may start TensorFlow, without its start-up lines.

    Unless `verbose` or TensorFlow already started, sets
    `TF_CPP_MIN_LOG_LEVEL` to `QUIET_LEVEL` where it is unset (unset again
    after a block that did not import TensorFlow), sends file descriptor 2
    to a temporary file during the block and, when the block imported
    TensorFlow on its backend, TensorFlow's device discovery (cuInit), then
    writes back every line but the start-up lines that level hides
    (`hidden`). An exception in the block writes back every line.
    """
    if verbose or "tensorflow" in sys.modules:
        yield
        return
    users = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    level = os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", QUIET_LEVEL)
    with _stderr_to_file() as captured:
        yield
        if "tensorflow" in sys.modules:
            # Imported here: it loads kcse.foundation.arguments, which a
            # public name that needs no TensorFlow (kcse.data's) does not.
            from kcse.foundation.backend_choice import chosen_backend

            if chosen_backend() == "tensorflow":
                sys.modules["tensorflow"].config.list_physical_devices()  # cuInit's lines.
        elif users is None:
            del os.environ["TF_CPP_MIN_LOG_LEVEL"]
    _write_stderr([line for line in captured if not hidden(line, level)])


def hidden(line, level):
    """Whether `line` (bytes) is a start-up line `TF_CPP_MIN_LOG_LEVEL=level` hides."""
    try:
        level = int(level)
    except ValueError:
        level = 0  # TensorFlow reads what is not a number as 0.
    return any(severity < level and pattern.match(line)
               for severity, pattern in START_UP_LINES)


def _import_keras():
    """Imports Keras and keras-hub; a `UsageError` naming keras.json for the
    `ValueError` Keras raises as it starts on a setting there it rejects
    (`"floatx": "float8"`)."""
    from kcse.foundation.arguments import UsageError
    from kcse.foundation.backend_choice import keras_json_path

    try:
        importlib.import_module("keras")
    except ValueError as error:
        raise UsageError(f"{keras_json_path()}: Keras cannot start with it: "
                         f"{' '.join(str(error).split())}") from None
    importlib.import_module("keras_hub")


@contextlib.contextmanager
def _stderr_to_file():
    """Sends file descriptor 2 to a temporary file; yields the list of its lines.

    The list is filled when the block ends; after an exception every
    captured line is written back before the exception goes on.
    """
    captured = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as file:
        os.dup2(file.fileno(), 2)
        try:
            yield captured
        except BaseException:
            _restore(saved, file, captured)
            _write_stderr(captured)
            raise
        _restore(saved, file, captured)


def _restore(saved, file, captured):
    sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
    file.seek(0)
    captured.extend(file.readlines())


def _write_stderr(lines):
    if lines:
        sys.stderr.buffer.write(b"".join(lines))
        sys.stderr.flush()
