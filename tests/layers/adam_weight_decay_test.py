"""Tests for kcse.layers.adam_weight_decay.AdamWeightDecay against a numpy
transcription of the authors' optimizer (tests/bert_flow_reference.py,
bohanli/BERT-flow's optimization_bert_flow.py)."""

import keras
import numpy as np

import bert_flow_reference as reference
from kcse.layers.adam_weight_decay import AdamWeightDecay


def test_optimizer_is_the_authors_adam_weight_decay():
    """Three steps equal optimization_bert_flow.py's (clip 1.0 of the
    authors' pair loss = clip 0.5 of kcse's mean, whose gradient is half)."""
    rng = np.random.default_rng(0)
    shapes = [(3, 4), (5,)]
    params = [rng.normal(size=s) for s in shapes]
    variables = [keras.Variable(p.astype("float32")) for p in params]
    optimizer = AdamWeightDecay()
    m = [np.zeros(s) for s in shapes]
    v = [np.zeros(s) for s in shapes]
    for scale in (3.0, 0.05, 1.0):  # the first clipped, the second not
        grads = [rng.normal(size=s) * scale for s in shapes]
        optimizer.apply_gradients(
            zip([g.astype("float32") for g in grads], variables)
        )
        params, m, v = reference.adam_weight_decay_step(
            params, [2 * g for g in grads], m, v, learning_rate=1e-3
        )
        for variable, param in zip(variables, params):
            np.testing.assert_allclose(np.asarray(variable), param, atol=1e-6)
