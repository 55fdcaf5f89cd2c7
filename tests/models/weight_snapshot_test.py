"""WeightSnapshot: a model's weights to disk and back, exactly."""

import keras
import numpy as np

from conftest import tiny_bert
from kcse.models import weight_snapshot
from kcse.models.weight_snapshot import WeightSnapshot


def test_restore_puts_back_every_weight_in_row_blocks(monkeypatch):
    monkeypatch.setattr(weight_snapshot, "ROWS_PER_BLOCK", 7)  # Several blocks per table.
    backbone = tiny_bert()
    counter = keras.Variable(3, dtype="int32", trainable=False)  # A scalar.
    variables = [*backbone.weights, counter]
    initial = [keras.ops.convert_to_numpy(v).copy() for v in variables]
    snapshot = WeightSnapshot(variables)
    assert len(snapshot.paths) == len(variables)
    for variable in variables:
        variable.assign(keras.ops.ones_like(variable) * 5)
    snapshot.restore()
    for variable, value in zip(variables, initial):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), value)
        assert str(keras.ops.convert_to_numpy(variable).dtype) == str(value.dtype)
    # Files hold the values as written (np.load reads them back).
    np.testing.assert_array_equal(np.load(snapshot.paths[0]), initial[0])
    snapshot.close()
    assert not any(path.exists() for path in snapshot.paths)


def test_restore_under_mirrored_strategy(two_cpu_strategy):
    with two_cpu_strategy.scope():
        backbone = tiny_bert()
    initial = backbone.get_weights()
    with WeightSnapshot(backbone.weights) as snapshot:
        backbone.set_weights([w * 0 for w in initial])
        snapshot.restore()
    for a, b in zip(backbone.get_weights(), initial):
        np.testing.assert_array_equal(a, b)


def test_take_replaces_the_kept_values():
    backbone = tiny_bert()
    first = backbone.get_weights()
    with WeightSnapshot(backbone.weights) as snapshot:
        backbone.set_weights([w + 1 for w in first])
        second = backbone.get_weights()
        snapshot.take()
        for kept, value in zip(snapshot.arrays(), second):
            np.testing.assert_array_equal(kept, value)
        backbone.set_weights(first)
        snapshot.restore()
    for a, b in zip(backbone.get_weights(), second):
        np.testing.assert_array_equal(a, b)
