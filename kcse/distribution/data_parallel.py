"""Training on several processes (machines) with Keras 3's JAX distribution.

Keras 3 runs `fit` on several processes through JAX: every process calls
`keras.distribution.initialize` (which starts `jax.distributed`) and sets a
`keras.distribution.DataParallel` over the devices of all processes. Each
process then runs the same program on its own share of each global batch:
Keras cuts every batch of a `tf.data.Dataset` into one contiguous block per
process, and the train step, jitted over global arrays, sees the whole
batch, so a kcse objective's in-batch negatives are those of the global
batch, exactly as on one device.

The processes join the `Cluster` that `kcse.distribution.cluster` reads from
Keras' `KERAS_DISTRIBUTION_*` variables. TensorFlow's
`MultiWorkerMirroredStrategy` is not a way: Keras 3's `fit` does not run
under it (keras-team/keras#20585).
"""

import contextlib
import sys


def start_data_parallel(cluster):
    """Joins `cluster` and trains data-parallel over every process's devices.

    Starts `jax.distributed` through `keras.distribution.initialize` (which
    also gives every process the same Keras seed) and sets a
    `keras.distribution.DataParallel` over all the cluster's devices;
    returns it. Call it in every process before any model is built or any
    JAX computation runs. Then give every process the same global data
    (the same sentences, seed and batch size): `fit` feeds each process its
    block of every global batch (`batch_size` is the global batch; it must
    split evenly over the devices, and a last, partial batch is left out).

    Raises:
        RuntimeError: the Keras backend is not JAX (multi-process
            training in Keras 3 is JAX's; set `KERAS_BACKEND=jax`).

    Example:
    ```python
    # In every process, with KERAS_BACKEND=jax and the KERAS_DISTRIBUTION_*
    # variables set (without them, as here, nothing starts):
    import os

    from kcse import distribution

    if distribution.JOB_ADDRESSES in os.environ:
        distribution.start_data_parallel(distribution.cluster_from_environment())
    # ... build the encoder and objective, then fit on the global data.
    ```
    """
    import keras

    if keras.config.backend() != "jax":
        raise RuntimeError(
            "multi-process training needs the JAX backend (Keras 3 trains "
            "across processes through jax.distributed); set KERAS_BACKEND=jax, "
            f"got {keras.config.backend()!r}. On one machine, TensorFlow's "
            "tf.distribute.MirroredStrategy trains on several GPUs."
        )
    import jax

    keras.distribution.initialize(
        cluster.job_addresses, cluster.num_processes, cluster.process_id
    )
    parallel = keras.distribution.DataParallel(devices=jax.devices())
    keras.distribution.set_distribution(parallel)
    return parallel


def process_count():
    """How many processes share each batch: 1 outside a multi-process run.

    Example:
    ```python
    from kcse.distribution import process_count

    process_count()  # 1 (no cluster started here)
    ```
    """
    parallel = _data_parallel()
    return 1 if parallel is None else parallel.num_processes


def is_chief():
    """Whether this process writes results: process 0, or a lone process.

    Example:
    ```python
    from kcse.distribution import is_chief

    assert is_chief()  # no cluster started here
    ```
    """
    if process_count() == 1:
        return True
    import jax

    return jax.process_index() == 0


@contextlib.contextmanager
def every_process_predicts():
    """Inside, `predict` (and `encode`) runs on the whole input in every process.

    In a multi-process run Keras would split `predict`'s input over the
    processes and return arrays that no process holds whole; evaluation
    (`kcse.evaluation`, the STS scores of `kcse train`) instead runs the
    same prediction in every process, with the data-parallel distribution
    lifted inside the block. Every process must run the same predictions
    (the weights live on the devices of all of them); build no model
    inside. Outside a multi-process run it changes nothing.

    Example:
    ```python
    import numpy as np
    from kcse.distribution import every_process_predicts

    with every_process_predicts():  # no cluster here: a plain block
        vectors = np.ones((2, 3))
    ```
    """
    if process_count() == 1:
        yield
        return
    import keras

    parallel = _data_parallel()
    keras.distribution.set_distribution(None)
    try:
        yield
    finally:
        keras.distribution.set_distribution(parallel)


def check_global_batch_size(batch_size, sample_count=None):
    """In a multi-process run, whether `batch_size` splits over the devices.

    Every global batch is split evenly over all the cluster's devices and
    a last, partial batch is left out, so `batch_size` must be a multiple
    of the device count (and at most `sample_count`, when given). Raises
    `ValueError` naming `batch_size`; does nothing outside a multi-process
    run.

    Example:
    ```python
    from kcse.distribution import check_global_batch_size

    check_global_batch_size(7, sample_count=100)  # no cluster: any size
    ```
    """
    if process_count() == 1:
        return
    devices = _data_parallel().device_mesh.devices.size
    if batch_size % devices:
        raise ValueError(
            f"batch_size={batch_size} is the global batch of a multi-process "
            f"run and must split evenly over its {devices} devices"
        )
    if sample_count is not None and batch_size > sample_count:
        raise ValueError(
            f"batch_size={batch_size} exceeds the {sample_count} training "
            "samples; a multi-process run trains on full global batches only"
        )


def check_global_dataset(dataset):
    """In a multi-process run, whether `dataset`'s batches have a fixed size.

    Keras gives each process its block of every batch of a
    `tf.data.Dataset` and must know the global batch size for it: batch
    with `dataset.batch(global_batch_size, drop_remainder=True)`. Raises
    `ValueError`; does nothing outside a multi-process run.

    Example:
    ```python
    import tensorflow as tf
    from kcse.distribution import check_global_dataset

    check_global_dataset(tf.data.Dataset.range(5).batch(2))  # no cluster
    ```
    """
    if process_count() == 1:
        return
    import tensorflow as tf

    sizes = {
        spec.shape[0] if spec.shape.rank else None
        for spec in tf.nest.flatten(dataset.element_spec)
    }
    if None in sizes or len(sizes) != 1:
        raise ValueError(
            "a multi-process run needs a tf.data.Dataset of global batches of "
            "one fixed size, to give each process its block of each: batch it "
            "with .batch(global_batch_size, drop_remainder=True)"
        )


def _data_parallel():
    """The JAX distribution set in this process, or None."""
    if "keras" not in sys.modules:
        return None  # None was set; importing Keras (TensorFlow) takes seconds.
    import keras

    if keras.config.backend() != "jax":
        return None
    return keras.distribution.distribution()
