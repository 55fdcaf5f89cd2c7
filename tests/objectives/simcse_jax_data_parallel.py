"""Run by simcse_test.py under KERAS_BACKEND=jax with 2 host devices.

One SimCSE step on one device and under `keras.distribution.DataParallel`
on two, from the same weights; prints the differences as JSON.
"""

import json

import jax
import keras
import numpy as np

from conftest import one_step
from tiny_simcse import SENTENCES
from tiny_simcse import make_simcse

assert keras.config.backend() == "jax"
initial = make_simcse().encoder.get_weights()
single_loss, single_weights = one_step(make_simcse(initial), SENTENCES)
keras.distribution.set_distribution(
    keras.distribution.DataParallel(devices=jax.devices())
)
parallel_loss, parallel_weights = one_step(make_simcse(initial), SENTENCES)
print(
    json.dumps(
        {
            "devices": len(jax.devices()),
            "loss_difference": abs(parallel_loss - single_loss),
            "weight_difference": max(
                float(np.abs(a - b).max())
                for a, b in zip(parallel_weights, single_weights)
            ),
            "weight_change": max(
                float(np.abs(a - b).max())
                for a, b in zip(single_weights, initial)
            ),
        }
    )
)
