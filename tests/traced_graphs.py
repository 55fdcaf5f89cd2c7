"""Whether the graphs TensorFlow traces for an encoder outlive it.

Each check runs in a fresh process: pytest itself keeps objects of a test
alive. The encoder is tiny, with kcse's GELU, whose custom gradient is what
made TensorFlow keep every traced graph (`kcse.foundation.compat.released_custom_gradients`).
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

before = graphs()
backbone = tiny_bert(dropout=0.1)
for block in backbone.transformer_layers:
    compat.set_feedforward_activation(block, ACTIVATIONS["gelu"])
encoder = kcse.SentenceEncoder(backbone, tiny_preprocessor(), pooling="cls")
if sys.argv[1] == "encode":
    encoder.encode(TINY_SENTENCES)
else:
    simcse = kcse.SimCSE(encoder, rematerialize=sys.argv[1] == "fit_recomputed")
    simcse.compile(optimizer=keras.optimizers.Adam(1e-3))
    simcse.fit(TINY_SENTENCES, batch_size=len(TINY_SENTENCES), epochs=1, verbose=0)
traced = graphs()
simcse = None
del encoder, backbone, block
print(traced - before, graphs() - before)
"""


def graphs_left(action):
    """`(traced, left)`: graphs `action` traced, and those left after `del`.

    `action`: "encode", "fit" or "fit_recomputed" (SimCSE, with
    `rematerialize=True`).
    """
    finished = subprocess.run(
        [sys.executable, "-c", SCRIPT, action], cwd=TESTS, capture_output=True,
        text=True, timeout=300, env={**os.environ, "PYTHONPATH": TESTS},
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    traced, left = map(int, finished.stdout.split()[-2:])
    return traced, left
