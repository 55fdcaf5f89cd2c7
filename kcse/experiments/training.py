"""One training run of a method, as the grid's column c and `kcse train` do it.

`train_once` is the one path from a loaded encoder to a trained one:
dropout as the protocol says, valid selection when it asks, every random
number drawn from the run's seed, the method's fit, and a record of what
ran. The grid calls it once per seed of a cell, from the model's initial
weights; `kcse train` once.
"""

import dataclasses
import random
import time

import numpy as np

from kcse.evaluation.sts_evaluator import STSEvaluator
from kcse.models.layer_taps import set_hidden_dropout


def seed_run(seed, encoder):
    """Draws every random number of one training run from `seed`.

    Python's and numpy's generators (data order, layers built afterwards)
    and each Keras `SeedGenerator` of `encoder` (its dropout masks) are set
    from `seed`, so a run gives the same numbers whatever ran before it in
    the process: a resumed cell equals the one a full run computes.
    TensorFlow's global seed is left alone: setting it again clears the
    resources tokenizers hold (SentencePiece).

    Example:
    ```python
    seed_run(1, encoder)
    SimCSEMethod().train(encoder, data, protocol, "STS-B", 1, "")
    # The same two lines from the same initial weights give the same encoder.
    ```
    """
    random.seed(seed)
    np.random.seed(seed)
    states = [v for v in encoder.variables if v.path.endswith("seed_generator_state")]
    values = np.random.SeedSequence(seed).generate_state(len(states)) >> 1
    for state, value in zip(states, values):
        state.assign(np.array([value, 0]).astype(state.dtype))


def valid_selection(encoder, data, protocol, prefix, batch_size=64):
    """Callbacks keeping the best step on valid, if the protocol says so."""
    if not protocol.select_on_valid:
        return []
    valid = data["valid"]
    return [
        STSEvaluator(
            encoder,
            ([prefix + s for s in valid.sentences1],
             [prefix + s for s in valid.sentences2], valid.scores),
            every_n_steps=protocol.eval_every,
            batch_size=batch_size,
            restore_best_weights=True,
        )
    ]


@dataclasses.dataclass
class TrainingRun:
    """What `train_once` did: the trained encoder (the one given, or the
    method's own around it: `Method.encoder_to_train`) and its record."""

    encoder: object
    seed: int
    samples: int
    seconds: float
    kept_step: int = None


def train_once(method, encoder, data, protocol, task, seed, prefix,
               encode_batch_size=64):
    """Trains `encoder` by `method` on `task`'s `data` (`{split: pairs}`),
    from its current weights, with every random number drawn from `seed`.

    The backbone's hidden dropout becomes the protocol's; with
    `protocol.select_on_valid` the best step on valid is kept. Raises the
    method's errors (`NonFiniteLossError` for a loss that turned NaN/Inf).
    Its steps show as progress where a command reports it
    (`kcse.foundation.progress`). Returns a `TrainingRun`.
    """
    encoder = method.encoder_to_train(encoder, seed)
    set_hidden_dropout(encoder.backbone, protocol.hidden_dropout)
    callbacks = valid_selection(encoder, data, protocol, prefix, encode_batch_size)
    began = time.time()
    seed_run(seed, encoder)
    samples = method.train(encoder, data, protocol, task, seed, prefix, callbacks)
    return TrainingRun(encoder, seed, samples, time.time() - began,
                       callbacks[0].best_step if callbacks else None)
