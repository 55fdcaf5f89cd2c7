"""Encoders saved by an earlier layout of kcse still load and encode the same.

`tests/saved_models/` holds `.keras` files written by kcse at commit 9a4277f
(before the experiments layer and several modules moved), with the vectors
that kcse computed for them (`saved_models/make_files.py`).
"""

import json
import pathlib
import subprocess
import sys

FOLDER = pathlib.Path(__file__).resolve().parent / "saved_models"
NAMES = ("bert_whitening", "bert_wk", "roformer")
# Largest difference allowed from the stored vectors. WK pooling's QR
# decompositions come out 1.6e-5 apart on an AMD EPYC (AVX-512) from the
# machine that wrote the files; a weight loaded wrongly moves a vector by
# far more.
TOLERANCE = {"bert_whitening": 1e-6, "bert_wk": 1e-4, "roformer": 1e-6}

# A fresh process that imports kcse, then Keras: as a user's script does.
LOAD = """
import json, sys
import kcse
import keras
import numpy as np
folder, names = sys.argv[1], sys.argv[2:]
sentences = ["the cat sat on the mat", "a dog ran fast", "blue mat"]
result = {}
for name in names:
    encoder = keras.saving.load_model(f"{folder}/{name}.keras")
    expected = np.load(f"{folder}/{name}.npy")
    result[name] = [type(encoder).__name__, type(encoder.backbone).__name__,
                    float(np.max(np.abs(encoder.encode(sentences) - expected)))]
print(json.dumps(result))
"""


def test_encoders_saved_by_the_previous_layout_load_and_encode_the_same():
    run = subprocess.run([sys.executable, "-c", LOAD, str(FOLDER), *NAMES],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    loaded = json.loads(run.stdout.strip().splitlines()[-1])
    assert loaded["bert_whitening"][:2] == ["SentenceEncoder", "BertBackbone"]
    assert loaded["roformer"][:2] == ["SentenceEncoder", "RoFormerBackbone"]
    for name in NAMES:
        assert loaded[name][2] <= TOLERANCE[name], name
