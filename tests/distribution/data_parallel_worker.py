"""Run by data_parallel_test.py under KERAS_BACKEND=jax: one process of a run.

With the KERAS_DISTRIBUTION_* variables set, the process joins that cluster
(`kcse.distribution`) and trains on its share of every global batch;
without them it trains alone on the whole of each: the reference. Either
way it trains the same SimCSE objectives on the same sentences and writes
what came out to the .npz file named on the command line.
"""

import os
import sys

from kcse import distribution

if distribution.JOB_ADDRESSES in os.environ:
    # Before anything runs a JAX computation.
    distribution.start_data_parallel(distribution.cluster_from_environment())

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from conftest import one_step  # noqa: E402
from tiny_simcse import AUTHORS_LOSS  # noqa: E402
from tiny_simcse import SENTENCES  # noqa: E402
from tiny_simcse import eval_views  # noqa: E402
from tiny_simcse import make_simcse  # noqa: E402

assert keras.config.backend() == "jax"
results = {"processes": distribution.process_count()}

# One SGD step on the global batch of 8 sentences.
initial = make_simcse().encoder.get_weights()
simcse = make_simcse(initial)
results["step_loss"], step_weights = one_step(simcse, SENTENCES)
for index, weight in enumerate(step_weights):
    results[f"step_weight_{index}"] = weight
results["weight_change"] = max(
    np.abs(a - b).max() for a, b in zip(step_weights, initial)
)

# Then two epochs of reshuffled batches of 4: every process must draw the
# same order and take its own rows of each batch.
sentences = SENTENCES + [" ".join(reversed(s.split())) for s in SENTENCES]
history = simcse.fit(sentences, batch_size=4, epochs=2, verbose=0)
results["epoch_losses"] = np.array(history.history["loss"])
with distribution.every_process_predicts():
    results["vectors"] = simcse.encoder.encode(SENTENCES)

if results["processes"] > 1:
    # A global batch that does not split over the devices, and a dataset
    # whose batches have no fixed size, are refused before training.
    for name, x in [
        ("odd_batch", SENTENCES[:3]),
        ("unsized_dataset", tf.data.Dataset.from_tensor_slices(SENTENCES).batch(4)),
    ]:
        try:
            simcse.fit(x, batch_size=3 if name == "odd_batch" else None, verbose=0)
            results[name] = "accepted"
        except ValueError as error:
            results[name] = str(error)

    # A last, partial batch (10 = 4 + 4 + 2) is left out: 2 steps.
    class CountSteps(keras.callbacks.Callback):
        steps = 0

        def on_train_batch_end(self, batch, logs=None):
            CountSteps.steps += 1

    simcse.fit(sentences[:10], batch_size=4, verbose=0, callbacks=[CountSteps()])
    results["partial_epoch_steps"] = CountSteps.steps
else:
    # Negatives drawn from each process's half of the batch instead of the
    # global batch: the authors' losses of the halves
    # (tests/authors_references.py), which the test shows to differ.
    views = eval_views(make_simcse(initial).encoder)
    results["per_process_negatives_loss"] = (
        AUTHORS_LOSS["both_views"](views[:4], 0.05)
        + AUTHORS_LOSS["both_views"](views[4:], 0.05)
    ) / 2

np.savez(sys.argv[1], **results)
