"""Global in-batch negatives under `tf.distribute`.

Under a `tf.distribute` strategy each replica sees its slice of the global
batch; contrastive losses gather every replica's embeddings so that the
negatives are global, exactly as on one device with the whole batch. Under
JAX `keras.distribution.DataParallel` the loss is traced on the global batch
already and nothing needs gathering, across processes too: Keras joins
each process's block of a batch into one global array before the jitted
step (`kcse.distribution.data_parallel`;
tests/distribution/data_parallel_test.py).
"""

import keras
from keras import ops


def gather_across_replicas(values):
    """All-gathers `values` along axis 0 across `tf.distribute` replicas.

    Returns `(gathered, offset, num_replicas)`: the global batch, the
    position of this replica's first row in it, and the replica count.
    Gradients flow back to every replica. Outside a multi-replica
    `tf.distribute` context (and on other backends) returns
    `(values, 0, 1)`. Replicas may hold different numbers of rows (a last,
    partial batch).

    Example:
    ```python
    import numpy as np
    import tensorflow as tf
    from kcse.distribution import gather_across_replicas

    values = np.arange(6, dtype="float32").reshape(3, 2)
    gathered, offset, replicas = gather_across_replicas(values)
    assert gathered is values and (offset, replicas) == (0, 1)  # no strategy

    # In a replica function each replica gets the global batch; with one
    # device (as here) that is its own rows.
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])

    @tf.function(autograph=False)
    def gather(x):
        return strategy.run(gather_across_replicas, args=(x,))

    gathered, offset, replicas = gather(tf.constant(values))
    gathered.shape, int(offset), int(replicas)  # (TensorShape([3, 2]), 0, 1)
    ```
    """
    if keras.config.backend() != "tensorflow":
        return values, 0, 1
    import tensorflow as tf

    context = tf.distribute.get_replica_context()
    if context is None or context.num_replicas_in_sync == 1:
        return values, 0, 1
    gathered = context.all_gather(values, axis=0)
    sizes = context.all_gather(tf.shape(values)[:1], axis=0)
    offset = tf.reduce_sum(sizes[: context.replica_id_in_sync_group])
    return gathered, ops.cast(offset, "int32"), context.num_replicas_in_sync


def global_mean_weight(local_rows, global_rows, num_replicas):
    """Per-row factor making Keras' per-replica mean a global mean.

    Keras averages each replica's loss over its own rows and then the
    replicas equally; when replicas hold different numbers of rows (a
    partial last batch) that is not the mean over the global batch. Scaling
    each row by `local_rows * num_replicas / global_rows` makes it so; with
    equal shares the factor is 1.
    """
    return ops.cast(local_rows * num_replicas, "float32") / ops.cast(
        global_rows, "float32"
    )


def scale_for_replicas(value):
    """Divides a hand-computed loss term by the `tf.distribute` replica count.

    Keras losses do this themselves: each replica's gradients are summed,
    so every replica contributes 1/replicas of a term that all of them
    compute in full (a weight regulariser). Identity elsewhere.
    """
    if keras.config.backend() != "tensorflow":
        return value
    import tensorflow as tf

    replicas = tf.distribute.get_strategy().num_replicas_in_sync
    return value / replicas if replicas > 1 else value
