"""A model of token dicts run over texts: chunked, length-sorted, padding-trimmed batches.

`kcse.SentenceEncoder.encode` and every other pass of a model over many
texts (the grid's poolings, the anisotropy diagnostics, the `kcse encode`
command) go through `predict_in_length_order` or `predict_in_chunks`: the
texts stream through in chunks, each tokenised, sorted by length and run in
batches whose padding is cut to the batch's longest text, by a compiled
predict function cached for the model, or split over devices.
"""

import contextlib
import itertools
import math
import weakref

import keras
import numpy as np
from keras import ops

from kcse.foundation import compat
from kcse import distribution
from kcse.foundation import interrupts
from kcse.foundation import progress
from kcse.foundation.compilation import compiles_per_shape
from kcse.foundation.compilation import padded_length
from kcse.foundation.truncation import truncated_texts
from kcse.foundation.truncation import warn_if_truncated

# Sequence lengths of batches are rounded up to a multiple of 8
# (`kcse.foundation.compilation.LENGTH_BUCKET`, see `bucket_length`) or, where each
# input shape is compiled (JAX, XLA), to a power of two of at least this.
COARSE_MIN_LENGTH = 16
# Sentences `predict_in_chunks` tokenises and sorts by length at a time:
# its memory is flat in the number of sentences beyond the output array.
ENCODE_CHUNK_SIZE = 4096
# Texts of a chunk the preprocessor packs at a time: keras-hub's Python
# packer holds a few hundred bytes per token slot of its output while it
# pads (4096 texts at multilingual-e5-small's 512 tokens: 0.37 GB).
PREPROCESS_CHUNK_SIZE = 256


def predict_in_length_order(
    model, preprocessor, texts, batch_size=64, warn_truncation=False
):
    """`model`'s outputs for every one of `texts`, in input order.

    `model` is a Keras model of token dicts whose output is an array or a
    dict of arrays (kept as such), or a function of one batch of token
    arrays to such outputs (`kcse.OnnxEncoder`: ONNX Runtime); `texts` a
    non-empty sequence of str.
    The texts are taken in alphabetical order, so that repeated texts fall
    in one chunk of `predict_in_chunks` and are encoded once, and their
    outputs written into arrays preallocated in input order: memory holds
    the texts, the outputs and one chunk. With `warn_truncation`, one
    `TruncationWarning` counts the texts cut to the preprocessor's maximum
    length.
    """
    texts = np.asarray(texts, dtype=object).reshape(-1)
    if len(texts) == 0:
        raise ValueError("predict_in_length_order needs at least one text.")
    alphabetical = np.argsort(texts, kind="stable")
    outputs = None
    for rows, chunk_outputs in predict_in_chunks(
        model, preprocessor, texts[alphabetical], batch_size, warn_truncation, len(texts)
    ):
        if outputs is None:
            outputs = keras.tree.map_structure(
                lambda array: np.empty((len(texts),) + array.shape[1:], array.dtype),
                chunk_outputs,
            )
        for output, array in zip(
            keras.tree.flatten(outputs), keras.tree.flatten(chunk_outputs)
        ):
            output[alphabetical[rows]] = array
    return outputs


def predict_in_chunks(
    model, preprocessor, texts, batch_size=64, warn_truncation=False, total=None
):
    """Yields `(rows, outputs)`: `model`'s outputs for `texts`, chunk by chunk.

    `texts` is any iterable of str, read lazily `ENCODE_CHUNK_SIZE` at a
    time, so memory stays flat however many there are. Each chunk's
    distinct texts are tokenised, sorted by length and run once, in
    batches of `batch_size` whose padding is cut to the batch's longest
    text (for a Keras model rounded up, see `bucket_length`); `rows` is the `slice` of positions in
    `texts` of the chunk and `outputs` their outputs in that order (an
    array, or a dict of arrays for a model with a dict of outputs).

    Batches go through `batch_runner(model)`: a compiled predict function
    cached for the model (`predict_function`), or `predict` where batches
    are split over devices. Padding never counts, so the outputs equal the
    model's on full-length inputs (up to float rounding). With `warn_truncation`, one
    `TruncationWarning` after the last chunk counts the texts cut to the
    preprocessor's maximum length. Where a command reports progress
    (`kcse.foundation.progress`), each batch counts its texts, of `total`.
    """
    with progress.task("encoding", total, "sentence") as encoded:
        yield from _predict_in_chunks(model, preprocessor, iter(texts), batch_size,
                                      warn_truncation, encoded)


def _predict_in_chunks(model, preprocessor, texts, batch_size, warn_truncation, encoded):
    run = batch_runner(model)
    keras_model = isinstance(model, keras.Model)
    coarse = keras_model and compiles_per_shape(model)
    start = truncated = 0
    full_length = None
    while chunk := list(itertools.islice(texts, ENCODE_CHUNK_SIZE)):
        interrupts.check()  # A Ctrl-C the command recorded stops here.
        unique, inverse = np.unique(np.asarray(chunk, dtype=object), return_inverse=True)
        inverse = inverse.reshape(-1)
        features, full_length = packed_features(preprocessor, unique, coarse)
        lengths = features["padding_mask"].astype(bool).sum(axis=1)
        order = np.argsort(-lengths, kind="stable")
        if warn_truncation:
            cut = np.zeros(len(unique), bool)
            full = lengths >= full_length
            cut[full] = truncated_texts(preprocessor, unique[full])
            truncated += int(cut[inverse].sum())
        batches = []
        for batch_start in range(0, len(order), batch_size):
            rows = order[batch_start : batch_start + batch_size]
            longest = int(lengths[rows].max())
            # A function of one batch (ONNX Runtime) compiles nothing per
            # shape: its batches are cut to their longest text exactly.
            length = bucket_length(longest, full_length, coarse) if keras_model else longest
            if coarse:  # The same batch shape for the last batch too.
                rows = np.resize(rows, batch_size)
            batches.append({key: value[rows, :length] for key, value in features.items()})
        sorted_outputs = run(batches, lambda index: encoded.add(
            min(batch_size, len(order) - index * batch_size)))
        encoded.add(len(chunk) - len(unique))  # Repeated texts, encoded once.
        # Row i of the sorted outputs is distinct text order[i] (rows past
        # them repeat others in a last batch); then expand.
        positions = np.empty_like(order)
        positions[order] = np.arange(len(order))
        yield slice(start, start + len(chunk)), keras.tree.map_structure(
            lambda array: array[positions][inverse], sorted_outputs
        )
        start += len(chunk)
    if warn_truncation:
        warn_if_truncated(truncated, start, full_length)


def packed_features(preprocessor, texts, coarse=False):
    """`(features, full_length)`: `preprocessor`'s arrays for `texts`, padding trimmed.

    The texts are packed `PREPROCESS_CHUNK_SIZE` at a time; the arrays
    (a dict of numpy `(len(texts), length)`) keep the columns of the
    longest text's `bucket_length` (with `coarse`), so that every batch of
    them can be cut to its own; `full_length` is the preprocessor's padded
    length (a text that fills it may have been cut).
    """
    parts = [
        {key: ops.convert_to_numpy(value) for key, value in
         preprocessor(list(texts[start : start + PREPROCESS_CHUNK_SIZE])).items()}
        for start in range(0, len(texts), PREPROCESS_CHUNK_SIZE)
    ]
    full_length = parts[0]["padding_mask"].shape[1]
    longest = max(int(part["padding_mask"].astype(bool).sum(axis=1).max()) for part in parts)
    width = bucket_length(longest, full_length, coarse)
    features = {
        key: np.concatenate([part[key][:, :width] for part in parts]) for key in parts[0]
    }
    return features, full_length


def bucket_length(length, full_length, coarse=False):
    """The padded length of a batch whose longest text has `length` tokens.

    A multiple of 8 (`kcse.foundation.compilation.padded_length`), or with `coarse`
    (for functions compiled once per input shape) a power of two of at
    least `COARSE_MIN_LENGTH` (16); never beyond `full_length`.
    """
    if not coarse:
        return padded_length(length, full_length)
    bucket = max(COARSE_MIN_LENGTH, 2 ** math.ceil(math.log2(max(length, 1))))
    return min(bucket, full_length)


def batch_runner(model):
    """A function running `model` on a list of token batches, outputs joined.

    The outputs are numpy arrays (or a dict of them), a row per row of the
    batches, in order; `done(i)`, if given, is called when batch i is done. On one device each batch goes through
    `predict_function(model)`, with no data pipeline between batches, so
    the speed is steady. Where `predict` splits batches over devices (a
    `tf.distribute` strategy with several replicas, or a
    `keras.distribution`), the batches go through `predict` as a
    `tf.data.Dataset`. In a multi-process run (`kcse.distribution`) every
    process encodes every batch. A `model` that is no Keras model is a
    function of one batch, called on each in turn.
    """
    if not isinstance(model, keras.Model):
        return each_batch(model)
    if distribution.process_count() > 1:

        def run_everywhere(batches, done=None):
            with distribution.every_process_predicts():
                return batch_runner(model)(batches, done)

        return run_everywhere
    if not splits_batches(model):
        return each_batch(predict_function(model))

    def run(batches, done=None):
        import tensorflow as tf

        dataset = tf.data.Dataset.from_generator(
            lambda: iter(batches),
            output_signature={
                key: tf.TensorSpec((None, None), value.dtype)
                for key, value in batches[0].items()
            },
        ).apply(tf.data.experimental.assert_cardinality(len(batches)))
        # keras.Model's, not a Task's: the batches are tokenised already.
        outputs = keras.Model.predict(model, dataset, verbose=0)
        for index in range(len(batches)) if done else ():
            done(index)
        return outputs

    return run


def each_batch(predict):
    """`batch_runner`'s function running `predict` on each batch in turn."""

    def run(batches, done=None):
        outputs = []
        for index, batch in enumerate(batches):
            outputs.append(predict(batch))
            if done:
                done(index)
        return keras.tree.map_structure(lambda *arrays: np.concatenate(arrays), *outputs)

    return run


# TensorFlow: each model's `tf.function`s by input signature. The functions
# hold the model weakly, so an entry goes with its model.
TENSORFLOW_PREDICT_FUNCTIONS = weakref.WeakKeyDictionary()


def predict_function(model):
    """`model`'s outputs (numpy) for one token batch, by a cached compiled function.

    On TensorFlow, a `tf.function` of `model(batch, training=False)` with
    `(None, None)` input shapes: traced once for every batch shape, and
    kept for the model (with XLA when `model.jit_compile` is set). On
    other backends, Keras' `predict_on_batch` (of `keras.Model`, not a
    Task's: the batches are tokenised already), whose predict function
    Keras keeps on the model: `jax.jit`, compiled once per input shape
    (see `compiles_per_shape`), or eager PyTorch.
    """
    if keras.backend.backend() != "tensorflow":
        return lambda batch: keras.Model.predict_on_batch(model, batch)
    import tensorflow as tf

    functions = TENSORFLOW_PREDICT_FUNCTIONS.setdefault(model, {})
    reference = weakref.ref(model)

    def predict(batch):
        signature = tuple((key, value.dtype.name) for key, value in sorted(batch.items()))
        tracing = contextlib.nullcontext()
        if signature not in functions:
            functions[signature] = tf.function(
                lambda inputs: reference()(inputs, training=False),
                input_signature=[
                    {key: tf.TensorSpec((None, None), dtype) for key, dtype in signature}
                ],
                jit_compile=bool(model.jit_compile),
            )
            # The graph, and the weights it captured, go with the model.
            tracing = compat.released_custom_gradients()
        with tracing:
            outputs = functions[signature](batch)
        return keras.tree.map_structure(lambda tensor: tensor.numpy(), outputs)

    return predict


def splits_batches(model):
    """Whether `predict` splits each batch over several devices."""
    if keras.distribution.distribution() is not None:
        return True
    return (
        keras.backend.backend() == "tensorflow"
        and model.distribute_strategy.num_replicas_in_sync > 1
    )
