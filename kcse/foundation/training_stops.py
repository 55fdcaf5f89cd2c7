"""What stops a `fit`: a NaN or infinite loss, and Ctrl-C.

Every `EncoderObjective.fit` (and `BertFlow.adapt`) trains with
`StopOnNonFiniteLoss` and `StopOnInterrupt`: a broken loss raises
`NonFiniteLossError`, naming its step, and a Ctrl-C that `kcse.foundation.interrupts`
recorded stops training at the next step.
"""

import math
import threading

import keras

from kcse.foundation import interrupts


class NonFiniteLossError(RuntimeError):
    """Training stopped: the loss became NaN or infinite at `step`.

    Example:

    A tiny random encoder and a learning rate far too high: step 1's update
    breaks the weights (`run_eagerly=True` only skips graph tracing).

    ```python
    import keras
    import keras_hub
    import kcse

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                  "a", "cat", "dog", "sat", "ran", "the"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="cls")
    simcse = kcse.SimCSE(encoder)
    simcse.compile(optimizer=keras.optimizers.Adam(1e30), run_eagerly=True)
    try:
        simcse.fit(["the cat sat", "a dog ran", "the dog sat", "a cat ran"],
                   batch_size=2, epochs=1, verbose=0)
    except kcse.objectives.NonFiniteLossError as error:
        stopped = error  # nothing of this run should be kept
    stopped.step, stopped.loss  # (2, nan)
    str(stopped)  # 'the training loss became nan at step 2; training stopped'
    ```
    """

    def __init__(self, step, loss):
        super().__init__(
            f"the training loss became {loss} at step {step}; training stopped"
        )
        self.step = step
        self.loss = loss


class StopOnNonFiniteLoss(keras.callbacks.Callback):
    """Raises `NonFiniteLossError` at the first step whose loss is NaN/Inf.

    Keras' `TerminateOnNaN` only ends `fit` quietly, after which a caller
    would go on to save a broken model; raising makes the failure
    impossible to miss. Steps are counted from 1 across epochs. Every
    `EncoderObjective.fit` uses it; for another model:

    ```python
    # model, x, y: any compiled keras.Model and its data.
    try:
        model.fit(x, y, callbacks=[kcse.foundation.training_stops.StopOnNonFiniteLoss()])
    except kcse.objectives.NonFiniteLossError as error:
        print(error.step, error.loss)  # nothing of this run should be kept
    ```

    Args:
        async_safe: bool. Let Keras run the check in a thread beside the
            training loop (JAX; `EncoderObjective.fit` sets it on
            accelerators): reading each step's loss then never stalls the
            device. The first non-finite step still stops training, a step
            or a few later (`stop_training`), and the error, raised when the
            epoch ends, names that first step and its loss.
    """

    def __init__(self, async_safe=False):
        super().__init__()
        self.async_safe = async_safe
        self._lock = threading.Lock()

    def on_train_begin(self, logs=None):
        self.steps_before_epoch = 0
        self.steps_in_epoch = 0
        self.first_non_finite = None

    def on_epoch_begin(self, epoch, logs=None):
        self.steps_before_epoch += self.steps_in_epoch
        self.steps_in_epoch = 0

    def on_train_batch_end(self, batch, logs=None):
        # `batch` (not a count) numbers the step: with `async_safe` the
        # calls may run out of order.
        step = self.steps_before_epoch + batch + 1
        loss = (logs or {}).get("loss")
        with self._lock:
            self.steps_in_epoch = max(self.steps_in_epoch, batch + 1)
            if loss is None or math.isfinite(float(loss)):
                return
            if self.first_non_finite is None or step < self.first_non_finite[0]:
                self.first_non_finite = (step, float(loss))
        if not self.async_safe:
            raise NonFiniteLossError(step, float(loss))
        self._model.stop_training = True  # `.model` would sync JAX's state.

    def on_epoch_end(self, epoch, logs=None):
        if self.first_non_finite is not None:  # Only found asynchronously.
            raise NonFiniteLossError(*self.first_non_finite)


class StopOnInterrupt(keras.callbacks.Callback):
    """Stops training at the step after a Ctrl-C that `kcse.foundation.interrupts`
    recorded, and raises `KeyboardInterrupt` when `fit` ends.

    Every `EncoderObjective.fit` uses it. It reads no logs, so Keras may run
    it beside the training loop (`async_safe`): it never stalls a device.
    """

    def __init__(self):
        super().__init__()
        self.async_safe = True

    def on_train_batch_end(self, batch, logs=None):
        if interrupts.interrupted():
            self._model.stop_training = True  # `.model` would sync JAX's state.

    def on_train_end(self, logs=None):
        interrupts.check()
