"""Starting Keras, and TensorFlow where it runs, without their start-up lines.

Importing TensorFlow writes C++ log lines to the process's stderr before
its logging is configured (oneDNN, cudart, CPU features, cuInit), and
`TF_CPP_MIN_LOG_LEVEL` does not reach all of them. The `kcse` command and
the recipes call `start_keras` after their arguments are checked: it
imports Keras and keras-hub (which imports TensorFlow wherever TensorFlow
is installed, on any backend) and, on the TensorFlow backend, TensorFlow
and its devices, with file descriptor 2 sent to a temporary file, then
writes back whatever is not one of those start-up lines (a real error
stays visible). On JAX kcse itself never imports TensorFlow: a machine
without it runs every feature but the TensorFlow-only ones.
"""

import contextlib
import importlib
import os
import re
import sys
import tempfile

from kcse.foundation.backend_choice import chosen_backend

# TensorFlow's start-up lines: absl INFO and WARNING records, the absl
# preamble, the CPU-feature note's second line, and cuInit on a machine
# without a GPU.
START_UP_LINE = re.compile(
    rb"^(?:[IW]\d{4} |E\d{4} .*cuInit|WARNING: All log messages before absl"
    rb"|To enable the following instructions)"
)


def start_keras(verbose=False):
    """Imports Keras and keras-hub, and TensorFlow on its backend, hiding
    their start-up lines unless `verbose`.

    Sets `TF_CPP_MIN_LOG_LEVEL=3` when the environment does not set it:
    TensorFlow's C++ records, ERROR included, stay off the terminal during
    the run too (e.g. "oneDNN supports DT_INT64 only on platforms with
    AVX-512" while training on this CPU); its failures still arrive as
    Python exceptions. Safe to call more than once.
    """
    if verbose or "tensorflow" in sys.modules:
        _import_keras()
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    with _stderr_to_file() as captured:
        _import_keras()
        if chosen_backend() == "tensorflow":
            tensorflow = importlib.import_module("tensorflow")
            tensorflow.config.list_physical_devices()  # Device discovery logs (cuInit).
    _write_stderr([line for line in captured if not START_UP_LINE.match(line)])


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
