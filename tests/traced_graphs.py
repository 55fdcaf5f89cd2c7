"""Whether the graphs TensorFlow traces for an encoder outlive it.

Each check runs in a fresh process: pytest itself keeps objects of a test
alive. The encoder is tiny, with kcse's GELU, whose custom gradient is what
made TensorFlow keep every traced graph (`kcse.foundation.compat.released_custom_gradients`).
Several actions can share the process, one after another: each counts the
graphs from where the one before left them.
"""

import os
import subprocess
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))

SCRIPT = """
import gc, sys
import keras
import kcse
from conftest import TINY_SENTENCES, tiny_bert, tiny_preprocessor
from kcse.foundation import compat
from kcse.models.bert_backbone import ACTIVATIONS

def graphs():
    gc.collect()  # frees the model; its cached functions become garbage
    gc.collect()
    return sum(type(o).__name__ == "FuncGraph" for o in gc.get_objects())

def traced_by(action):
    # The graphs once `action` ran; its model goes when this returns.
    backbone = tiny_bert(dropout=0.1)
    for block in backbone.transformer_layers:
        compat.set_feedforward_activation(block, ACTIVATIONS["gelu"])
    encoder = kcse.SentenceEncoder(backbone, tiny_preprocessor(), pooling="cls")
    if action == "encode":
        encoder.encode(TINY_SENTENCES)
    else:
        simcse = kcse.SimCSE(encoder, rematerialize=action == "fit_recomputed")
        simcse.compile(optimizer=keras.optimizers.Adam(1e-3))
        simcse.fit(TINY_SENTENCES, batch_size=len(TINY_SENTENCES), epochs=1, verbose=0)
    return graphs()

for action in sys.argv[1:]:
    before = graphs()
    traced = traced_by(action)
    print(traced - before, graphs() - before)
"""


def graphs_left_each(actions):
    """`[(traced, left), ...]` for `actions` run in turn in one fresh process:
    the graphs each traced, and those left once its model was deleted.

    An action: "encode", "fit" or "fit_recomputed" (SimCSE, with
    `rematerialize=True`).
    """
    finished = subprocess.run(
        [sys.executable, "-c", SCRIPT, *actions], cwd=TESTS, capture_output=True,
        text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(
            [TESTS, *filter(None, [os.environ.get("PYTHONPATH")])])},
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    lines = finished.stdout.strip().splitlines()[-len(actions):]
    return [tuple(map(int, line.split())) for line in lines]


def graphs_left(action):
    """`(traced, left)`: graphs `action` traced, and those left after `del`
    (`graphs_left_each` of `action` alone)."""
    return graphs_left_each([action])[0]
