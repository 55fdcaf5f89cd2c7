"""Compiled programs: which runs compile per input shape, and reusing them.

Under JAX (`jax.jit`) and with XLA on TensorFlow (`jit_compile=True`, Keras'
default on a GPU), every new input shape is a new program to compile: about
19 s for BERT-base on an H200, against ~20 ms a train step. kcse therefore
gives such runs few shapes: training batches are padded to a fixed set of
lengths (`padded_length`; by default the preprocessor's full length, one
shape) and encoding batches to powers of two; and JAX's persistent
compilation cache (`use_compilation_cache`) lets a later model of the same
shape, in this process or another, load its programs from disk (~3 s a
shape) instead of compiling them again.
"""

import os
import pathlib

# Where steps are not compiled per shape, batch lengths are rounded up to a
# multiple of this.
LENGTH_BUCKET = 8
# The folder of JAX's persistent compilation cache, unless
# `KCSE_COMPILATION_CACHE` names another.
DEFAULT_CACHE = pathlib.Path("~/.cache/kcse/xla")


def compiles_per_shape(model):
    """Whether `model`'s compiled functions are compiled anew for each input shape.

    True under JAX (`jax.jit`) and with XLA (`jit_compile` on TensorFlow,
    `torch.compile`), once `model` is compiled (or, for predict, by
    default). TensorFlow without XLA (its default on CPU) traces one
    function for all shapes, and PyTorch runs eagerly: finer buckets then
    cost nothing and pad less.
    """
    return bool(model.jit_compile) and not model.run_eagerly


def padded_length(longest, full_length, lengths=None):
    """The length a training batch whose longest sequence has `longest` tokens is padded to.

    `lengths`: the allowed lengths (ints), or None for every multiple of
    `LENGTH_BUCKET` (runs that do not compile per shape). The smallest allowed length of
    at least `longest`; `full_length` when there is none.

    ```python
    from kcse.foundation.compilation import padded_length

    assert padded_length(13, 64) == 16  # multiples of 8
    assert padded_length(13, 64, lengths=(32, 64)) == 32
    assert padded_length(40, 64, lengths=(32,)) == 64
    ```
    """
    if lengths is None:
        return min(LENGTH_BUCKET * -(-max(longest, 1) // LENGTH_BUCKET), full_length)
    fitting = [length for length in lengths if longest <= length <= full_length]
    return min(fitting) if fitting else full_length


def trim_padding(features, lengths=None):
    """Cuts a padded token batch to its longest sequence, rounded up.

    The cut falls after the last position any row's mask covers: the
    longest sequence for right padding (as kcse's preprocessors pad), and
    no token lost for a mask with gaps or left padding.

    Sequences are padded to the preprocessor's full length; a batch of short
    sentences then spends most of its compute on padding, which never counts
    in kcse's poolings. The length is rounded up to a multiple of 8, or with
    `lengths` (for steps compiled per shape) to the smallest of them that
    holds the longest sequence (the full length beyond them), so compiled
    train steps are reused: `padded_length` in TensorFlow ops, used by
    training batches and the SavedModel's signatures. Boolean masks become
    int32 (under tf.distribute Keras reduces a sample batch with MEAN, which
    has no bool kernel).
    """
    import tensorflow as tf

    mask = tf.cast(features["padding_mask"], "int32")
    full_length = tf.shape(mask)[-1]
    # At least 1: an empty batch's maximum is the smallest int32.
    longest = tf.maximum(tf.reduce_max(mask * tf.range(1, full_length + 1)), 1)
    if lengths is None:
        length = tf.minimum(-(-longest // LENGTH_BUCKET) * LENGTH_BUCKET, full_length)
    else:
        allowed = tf.constant(sorted(lengths), "int32")
        fitting = tf.boolean_mask(
            allowed, (allowed >= longest) & (allowed <= full_length)
        )
        length = tf.reduce_min(tf.concat([fitting, [full_length]], axis=0))
    return {
        key: tf.cast(value, "int32")[..., :length]
        if value.dtype == tf.bool
        else value[..., :length]
        for key, value in features.items()
    }


def on_accelerator():
    """Whether Keras' backend computes on a GPU or TPU by default."""
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.default_backend() != "cpu"
    if backend == "tensorflow":
        import tensorflow as tf

        return bool(tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("TPU"))
    if backend == "torch":
        import torch

        return torch.cuda.is_available()
    return False


def compilation_cache_folder(folder=None):
    """The persistent cache folder: `folder`, `$KCSE_COMPILATION_CACHE` or the default."""
    folder = folder or os.environ.get("KCSE_COMPILATION_CACHE") or DEFAULT_CACHE
    return pathlib.Path(folder).expanduser()


def use_compilation_cache(folder=None):
    """Turns on JAX's persistent compilation cache in `folder`; returns the folder.

    Every program XLA compiles from now on is written there (whatever its
    compile time or size), and a program compiled before, by any process
    with the same JAX version and device, is read back instead of compiled.
    Only JAX keeps such a cache: on another backend nothing is done and
    None is returned. The recipes call it on accelerators (`--compilation-cache`).

    ```python
    import tempfile

    import keras
    from kcse.foundation.compilation import use_compilation_cache

    folder = use_compilation_cache(tempfile.mkdtemp())
    assert (folder is None) == (keras.backend.backend() != "jax")
    ```
    """
    import keras

    if keras.backend.backend() != "jax":
        return None
    import jax

    folder = compilation_cache_folder(folder)
    folder.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder
