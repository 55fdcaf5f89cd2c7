"""The `tf.distribute` strategy of one machine's GPUs."""

import keras


def choose_strategy():
    """MirroredStrategy over all visible GPUs when there are several.

    Returns None (one device) otherwise, and on backends other than
    TensorFlow.

    Example:
    ```python
    import contextlib

    from kcse.distribution import choose_strategy

    strategy = choose_strategy()  # None here: at most one GPU
    with strategy.scope() if strategy else contextlib.nullcontext():
        pass  # build and compile the objective
    ```
    """
    if keras.config.backend() != "tensorflow":
        return None
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) < 2:
        return None
    return tf.distribute.MirroredStrategy([gpu.name for gpu in gpus])
