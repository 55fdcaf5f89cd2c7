"""What stops a `fit`: a NaN or infinite loss (Ctrl-C: tests/reliability/interrupt_test.py)."""

import keras
import pytest

from kcse.foundation.training_stops import NonFiniteLossError
from kcse.foundation.training_stops import StopOnNonFiniteLoss


def test_the_asynchronous_nan_check_stops_soon_and_names_the_first_step():
    """`async_safe` (on accelerators): the check may run steps behind; it stops
    training at the next step and raises at the epoch's end, naming the first
    non-finite step, counted across epochs."""

    class Model:
        stop_training = False

    check = StopOnNonFiniteLoss(async_safe=True)
    check.set_model(keras.Sequential())
    check._model = Model()
    check.on_train_begin()
    check.on_epoch_begin(0)
    for batch in range(3):
        check.on_train_batch_end(batch, {"loss": 0.5})
    check.on_epoch_end(0)
    check.on_epoch_begin(1)
    # Out of order, as threads may run them: steps 6 and 5 are NaN.
    check.on_train_batch_end(2, {"loss": float("nan")})
    check.on_train_batch_end(0, {"loss": 0.4})
    check.on_train_batch_end(1, {"loss": float("inf")})
    assert check._model.stop_training
    with pytest.raises(NonFiniteLossError, match="became inf at step 5"):
        check.on_epoch_end(1)
