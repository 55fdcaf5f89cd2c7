"""Training steps as a `kcse.foundation.progress` task.

Every `EncoderObjective.fit` counts its steps with `StepCounter` when a
command reports progress (`progress.reporting`), in place of Keras' own
bar: a live bar on a terminal, a line at least every 30 s in a log.
"""

import keras


class StepCounter(keras.callbacks.Callback):
    """Adds each finished training step to `task` (a `progress.task`),
    whose total is set when training begins (steps per epoch × epochs),
    and shows the last step's loss as its `status`.

    It keeps the step's logs without reading them, so Keras may call it off
    the training thread (`async_safe`): no step waits for it. The loss is
    read only when a line or the bar is drawn.
    """

    async_safe = True

    def __init__(self, task):
        super().__init__()
        self.task, self.logs = task, None
        task.status = self.loss_text

    def loss_text(self):
        loss = (self.logs or {}).get("loss")
        return "" if loss is None else f"loss {float(loss):.4g}"

    def on_train_begin(self, logs=None):
        steps, epochs = self.params.get("steps"), self.params.get("epochs") or 1
        if steps:
            self.task.set_total(steps * epochs)

    def on_train_batch_end(self, batch, logs=None):
        self.logs = logs
        self.task.add(1)
