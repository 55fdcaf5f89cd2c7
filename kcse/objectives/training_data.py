"""What `EncoderObjective.fit` takes as data, and in-memory samples as a tf.data pipeline.

In-memory samples (a list, array, tuple of columns or dict) are checked
(`is_in_memory`, `sample_count`), tokenised (`token_batches.token_arrays`)
and batched into a `tf.data.Dataset` reshuffled every epoch from Python's
seed (`training_dataset`, `reshuffled`); a `tf.data.Dataset` is taken as
given (`is_tf_dataset`). Where TensorFlow cannot be imported,
`token_batches.py` feeds numpy batches instead.
"""

import random
import sys

import keras
import numpy as np


def training_dataset(
    x, y=None, sample_weight=None, batch_size=None, shuffle=True,
    drop_single_last=False, drop_remainder=False,
):
    """A batched `tf.data.Dataset` of in-memory samples, reshuffled each epoch.

    Examples are batched `batch_size` at a time (32 by default), as
    `keras.Model.fit` does with arrays. A tuple `x` is one input of several
    columns (pairs, triplets), not `(x, y)`. With `drop_single_last`, a last
    batch of exactly one sample is left out (each epoch's last sample after
    reshuffling, so a different one every epoch); with `drop_remainder`,
    a last, partial batch is left out (a multi-process run needs full global
    batches to give every process its block of each).
    """
    import tensorflow as tf

    samples = x
    if y is not None or sample_weight is not None or isinstance(x, tuple):
        samples = keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
    dataset = tf.data.Dataset.from_tensor_slices(samples)
    if shuffle:
        dataset = reshuffled(dataset)
    batch_size = batch_size or 32
    count = int(dataset.cardinality())
    if drop_single_last and count > 1 and count % batch_size == 1:
        dataset = dataset.take(count - 1)
    return dataset.batch(batch_size, drop_remainder=drop_remainder)


def reshuffled(dataset):
    """`dataset` (finite, in memory) in a new random order at every epoch.

    The orders are numpy permutations from a generator seeded by Python's
    `random` (which `keras.utils.set_random_seed` and
    `kcse.experiments.training.seed_run` seed), so they depend on that seed
    only: not on TensorFlow's global seed or on how many random ops the
    process made before, as `Dataset.shuffle`'s would.
    """
    import tensorflow as tf

    count = int(dataset.cardinality())
    columns = dataset.batch(max(count, 1)).get_single_element()
    generator = np.random.default_rng(random.randrange(2**63))

    def order():
        yield generator.permutation(count)

    indices = tf.data.Dataset.from_generator(
        order, output_signature=tf.TensorSpec((count,), tf.int64)
    ).unbatch()
    return indices.map(
        lambda i: tf.nest.map_structure(lambda column: tf.gather(column, i), columns)
    ).apply(tf.data.experimental.assert_cardinality(count))


def static_batch_size(samples):
    """The static leading size shared by the tensors of `samples`, or None."""
    import tensorflow as tf

    sizes = {
        value.shape[0] for value in tf.nest.flatten(samples)
        if isinstance(value, tf.Tensor) and value.shape.rank
    }
    return sizes.pop() if len(sizes) == 1 else None


def with_batch_size(samples, rows):
    """`samples` with their leading dimension set to `rows` (when known)."""
    if rows is None:
        return samples
    import tensorflow as tf

    return tf.nest.map_structure(
        lambda value: tf.ensure_shape(value, [rows, *value.shape[1:]])
        if isinstance(value, tf.Tensor) and value.shape.rank else value,
        samples,
    )


def is_tf_dataset(x):
    """Whether `x` is a `tf.data.Dataset` (without importing TensorFlow)."""
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(x, tf.data.Dataset)


def tensorflow_importable():
    """Whether TensorFlow can be imported (imports it)."""
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        return False
    return True


def require_tensorflow(what):
    """Raises ImportError naming `what` when TensorFlow cannot be imported."""
    if not tensorflow_importable():
        raise ImportError(
            f"{what} kcse needs TensorFlow (tf.data): pip install tensorflow "
            "tensorflow-text. Without it, train in one process on in-memory data."
        )


def is_in_memory(x):
    """Whether `x` is a list, tuple, dict or array rather than a data stream."""
    return isinstance(x, (list, tuple, dict)) or hasattr(x, "__array__")


def sample_count(x):
    """The number of samples of in-memory `x`; columns must agree in length."""
    columns = list(x.values()) if isinstance(x, dict) else x
    if not isinstance(x, (tuple, dict)):
        return len(x)
    lengths = [len(column) for column in columns]
    if len(set(lengths)) > 1:
        raise ValueError(
            f"The columns of x differ in length: {', '.join(map(str, lengths))}."
        )
    return lengths[0] if lengths else 0
