"""The writer subprocess of kill_test.py: rewrites one file until it is killed.

`python kill_writer.py KIND` imports what writes of KIND need ("encoder":
Keras, TensorFlow and kcse's encoder, and builds the encoder to save,
seconds of CPU; "results": kcse's results store only), prints "ready"
and waits on stdin for one JSON command naming what to write and where.
It then rewrites that file in a loop, appending the number of each
completed write to the progress file, until it is killed. It exits when
stdin closes, so that it never outlives the test process.
"""

import json
import os
import sys
import threading

from kcse.experiments.results.store import ResultStore
from results_cells import CELLS
from results_cells import grid_cell


def serve(kind):
    """Prints "ready", then runs the one command read from stdin until killed.

    A command is ["encoder", folder, progress] or ["results", folder,
    progress], of the `kind` the writer was started for.
    """
    # Keras, TensorFlow and the encoder to save: seconds, before "ready".
    arguments_before = [new_encoder()] if kind == "encoder" else []
    print("ready", flush=True)
    line = sys.stdin.readline()
    if not line:
        return
    name, *arguments = json.loads(line)
    assert name == kind, (name, kind)
    threading.Thread(target=exit_when_stdin_closes, daemon=True).start()
    {"encoder": save_encoders, "results": write_results}[name](*arguments_before, *arguments)


def exit_when_stdin_closes():
    sys.stdin.read()
    os._exit(1)


def new_encoder():
    """The encoder an "encoder" writer saves (the test's old one has seed 0;
    the test builds this one too, for its weights)."""
    import kcse
    from conftest import tiny_bert
    from conftest import tiny_preprocessor

    return kcse.SentenceEncoder(tiny_bert(seed=1), tiny_preprocessor(), pooling="cls")


def save_encoders(encoder, folder, progress):
    saves = 0
    while True:
        encoder.save(folder + "/encoder.keras")
        saves += 1
        report(progress, saves)


def write_results(folder, progress):
    store = ResultStore(folder)
    number = 0
    while True:
        number += 1
        store.add(*write(number))
        report(progress, number)


def write(number):
    """Write `number` (from 1) stores cell `(number - 1) % CELLS` again."""
    return grid_cell((number - 1) % CELLS, number)


def report(progress, number):
    with open(progress, "a") as file:
        file.write(f"{number}\n")


if __name__ == "__main__":
    serve(sys.argv[1])
