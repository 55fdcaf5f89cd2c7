"""Writes the saved encoders `saved_models_test.py` loads: run it with the
kcse of the layout being frozen, e.g.

    git worktree add /tmp/old 9a4277f
    PYTHONPATH=/tmp/old:tests python tests/saved_models/make_files.py tests/saved_models

Each `<name>.keras` is a tiny random encoder as that kcse saved it, and
`<name>.npy` its vectors of `SENTENCES`, computed by that kcse.
"""

import pathlib
import sys

import keras
import numpy as np

import kcse
from conftest import tiny_bert
from conftest import tiny_preprocessor

SENTENCES = ["the cat sat on the mat", "a dog ran fast", "blue mat"]


def encoders():
    """`{name: encoder}`: the pieces a saved kcse encoder can hold."""
    whitened = kcse.SentenceEncoder(tiny_bert(seed=1), tiny_preprocessor(), pooling="P3")
    whitening = kcse.layers.Whitening()
    whitening.adapt(np.random.default_rng(0).normal(size=(64, 8)).astype("float32"))
    whitened = kcse.SentenceEncoder(whitened.backbone, whitened.preprocessor,
                                    pooling="P3", whitening=whitening, normalize=True)
    wk = kcse.SentenceEncoder(tiny_bert(seed=2, num_layers=6), tiny_preprocessor(),
                              pooling="wk")
    keras.utils.set_random_seed(3)
    roformer = kcse.models.RoFormerBackbone(
        vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16)
    rotary = kcse.SentenceEncoder(roformer, tiny_preprocessor(), pooling="first_last_avg")
    return {"bert_whitening": whitened, "bert_wk": wk, "roformer": rotary}


if __name__ == "__main__":
    folder = pathlib.Path(sys.argv[1])
    for name, encoder in encoders().items():
        encoder.save(folder / f"{name}.keras")
        np.save(folder / f"{name}.npy", encoder.encode(SENTENCES))
