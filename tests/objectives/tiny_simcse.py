"""The tiny SimCSE objective of simcse_test.py and its JAX worker scripts.

Apart from simcse_test, whose torch references (Hugging Face transformers)
take seconds to import: data_parallel_worker.py and
simcse_jax_data_parallel.py import this module, in each of their processes.
"""

import keras
import numpy as np

import kcse
from authors_references import bojone_simcse_loss
from authors_references import princeton_simcse_loss
from conftest import TINY_SENTENCES as SENTENCES
from conftest import tiny_bert
from conftest import tiny_preprocessor


def make_simcse(weights=None, negatives="both_views", dropout=0.0, pooling="P3",
                **options):
    encoder = kcse.SentenceEncoder(
        tiny_bert(dropout=dropout), tiny_preprocessor(), pooling=pooling
    )
    if weights is not None:
        encoder.set_weights(weights)
    simcse = kcse.SimCSE(encoder, temperature=0.05, negatives=negatives, **options)
    simcse.compile(optimizer=keras.optimizers.SGD(0.01))
    return simcse


# The authors' loss of each `negatives` mode (tests/authors_references.py).
AUTHORS_LOSS = {
    "both_views": bojone_simcse_loss,
    "cross_view": princeton_simcse_loss,
}


def eval_views(encoder):
    """Two views of each of SENTENCES as the encoder gives them without
    dropout (the objectives here have none, so both views are equal)."""
    vectors = encoder.predict(SENTENCES, verbose=0)
    return np.stack([vectors, vectors], axis=1)
