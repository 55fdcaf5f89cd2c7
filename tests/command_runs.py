"""Running the `kcse` command in tests: in a new process (what a shell
runs, its stderr whole) or in this one (the console script's `main`,
without an interpreter and TensorFlow start each)."""

import os
import re
import subprocess
import sys

from kcse.commands.main import main

# `kcse train --prefix` of the commands' trained model (tests/conftest.py's
# `trained_command`): tokens that change every vector.
PREFIX = "问："


# TensorFlow's log lines as the tests recognise them (any absl record, the
# absl preamble), independently of `kcse.foundation.keras_start`'s patterns.
TENSORFLOW_LOG_LINE = re.compile(r"^(?:[IWEF]\d{4} |WARNING: All log messages before absl)",
                                 re.MULTILINE)


def kcse_command(*arguments, log_level="3"):
    """`kcse` with `arguments` in a new process: its `CompletedProcess`.

    `log_level` is its TF_CPP_MIN_LOG_LEVEL (None: unset, kcse's own).
    """
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    if log_level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = log_level
    return subprocess.run(
        [sys.executable, "-m", "kcse.commands.main", *map(str, arguments)],
        capture_output=True, text=True, env=env,
    )


def assert_ok(run):
    """The stdout of a `kcse_command` run, which must have exited 0."""
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


def kcse_in_process(capsys, *arguments):
    """The stdout of `kcse` with `arguments` run by `main` in this process,
    which must have returned 0."""
    code = main([str(argument) for argument in arguments])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    return captured.out


def train_arguments(folder, model, *extra):
    """`kcse train` of `trained_command`'s model and task, to `folder/run`."""
    return [str(argument) for argument in (
        "train", "--model", model, "--pooling", "P1", "--data-dir", folder / "data",
        "--task", "STS-B", "--protocol", "su", "--sentences", "64",
        "--batch-size", "16", "--output", folder / "run", *extra)]
