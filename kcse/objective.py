"""The base of every training objective: a Task wrapping a SentenceEncoder."""

import math
import random

import keras
import keras_hub
import numpy as np
import tensorflow as tf
from keras import ops


def training_dataset(x, y=None, sample_weight=None, batch_size=None, shuffle=True):
    """A batched `tf.data.Dataset` of in-memory samples, reshuffled each epoch.

    Examples are batched `batch_size` at a time (32 by default), as
    `keras.Model.fit` does with arrays. A tuple `x` is one input of several
    columns (pairs, triplets), not `(x, y)`.
    """
    samples = x
    if y is not None or sample_weight is not None or isinstance(x, tuple):
        samples = keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
    dataset = tf.data.Dataset.from_tensor_slices(samples)
    if shuffle:
        dataset = reshuffled(dataset)
    return dataset.batch(batch_size or 32)


def reshuffled(dataset):
    """`dataset` (finite, in memory) in a new random order at every epoch.

    The orders are numpy permutations from a generator seeded by Python's
    `random` (which `keras.utils.set_random_seed` and
    `kcse.experiments.methods.seed_run` seed), so they depend on that seed
    only: not on TensorFlow's global seed or on how many random ops the
    process made before, as `Dataset.shuffle`'s would.
    """
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


def trim_padding(features, multiple=8):
    """Cuts a padded token batch to its longest sequence, rounded up.

    Sequences are padded to the preprocessor's full length; a batch of short
    sentences then spends most of its compute on padding, which never counts
    in kcse's poolings. The length is rounded up to `multiple` so compiled
    train steps are reused. Boolean masks become int32 (under tf.distribute
    Keras reduces a sample batch with MEAN, which has no bool kernel).
    """
    mask = tf.cast(features["padding_mask"], "int32")
    longest = tf.reduce_max(tf.reduce_sum(mask, axis=-1))
    length = tf.minimum(
        (longest + multiple - 1) // multiple * multiple, tf.shape(mask)[-1]
    )
    return {
        key: tf.cast(value, "int32")[..., :length]
        if value.dtype == tf.bool
        else value[..., :length]
        for key, value in features.items()
    }


class NonFiniteLossError(RuntimeError):
    """Training stopped: the loss became NaN or infinite at `step`."""

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
    try:
        model.fit(x, y, callbacks=[kcse.objective.StopOnNonFiniteLoss()])
    except kcse.objective.NonFiniteLossError as error:
        print(error.step, error.loss)  # nothing of this run should be kept
    ```
    """

    def on_train_begin(self, logs=None):
        self.step = 0

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(float(loss)):
            raise NonFiniteLossError(self.step, float(loss))


def _is_in_memory(x):
    """Whether `x` is a list, tuple, dict or array rather than a data stream."""
    return isinstance(x, (list, tuple, dict)) or hasattr(x, "__array__")


class EncoderObjective(keras_hub.models.Task):
    """A trainable objective around a `kcse.SentenceEncoder`.

    Subclasses define `call` (what the encoder produces for a batch) and set
    `objective_loss`, a `keras.losses.Loss` of `(y, y_pred, sample_weight)`,
    or override `objective` when the loss has several terms; losses added
    by layers are summed to it. The objective shares the
    encoder's layers, so training it trains the encoder in place; `fit`
    accepts raw text, tokenised by the encoder's preprocessor inside the
    input pipeline: a batch of strings, or a tuple of k batches (k
    sentences per sample, e.g. pairs or triplets), which becomes token
    arrays of shape `(batch, k, length)` (see `encode_columns`).

    Args:
        encoder: a `kcse.SentenceEncoder`.
    """

    objective_loss = None

    def __init__(self, encoder, **kwargs):
        kwargs.setdefault("compile", False)
        super().__init__(**kwargs)
        self.encoder = encoder
        self.preprocessor = encoder.preprocessor

    def preprocess_samples(self, x, y=None, sample_weight=None):
        """Tokenises a batch and trims its padding (runs inside tf.data)."""
        if isinstance(x, tuple) and self.preprocessor is not None:
            columns = [self.preprocessor(column) for column in x]
            x = {
                key: tf.stack([column[key] for column in columns], axis=1)
                for key in columns[0]
            }
            return keras.utils.pack_x_y_sample_weight(
                trim_padding(x), y, sample_weight
            )
        samples = super().preprocess_samples(x, y, sample_weight)
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(samples)
        if isinstance(x, dict) and "padding_mask" in x:
            x = trim_padding(x)
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)

    def encode_columns(self, inputs, training=None, columns=None, kind=""):
        """Vectors `(batch, k, dim)` of token arrays `(batch, k, length)`.

        With `columns`, samples must hold that many sentences (`kind` names
        them in the error).
        """
        given = inputs["token_ids"].shape
        if columns is not None and (len(given) != 3 or given[1] != columns):
            raise ValueError(
                f"{type(self).__name__} trains on {kind}: pass a tuple of "
                f"{columns} string columns; got token arrays of shape {given}."
            )
        shape = ops.shape(inputs["token_ids"])
        flat = {
            key: ops.reshape(value, (-1, shape[-1]))
            for key, value in inputs.items()
        }
        vectors = self.encoder(flat, training=training)
        return ops.reshape(vectors, (shape[0], shape[1], -1))

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        losses = [self.objective(y, y_pred, sample_weight)]
        losses += [self._aggregate_additional_loss(loss) for loss in self.losses]
        return ops.sum(ops.stack(losses))

    def objective(self, y, y_pred, sample_weight):
        """The training loss of a batch (before layers' added losses)."""
        return self.objective_loss(y, y_pred, sample_weight)

    def fit(self, x=None, y=None, batch_size=None, shuffle=True, callbacks=None,
            **kwargs):
        """Trains the encoder; see `keras.Model.fit`.

        `x` is raw text (or token dicts): a list or array, or a tuple of
        them (several sentences per sample), which is reshuffled every epoch
        when `shuffle` (in-batch negatives depend on which sentences share a
        batch), or a `tf.data.Dataset`, which is used as given (shuffle it
        yourself; a sample of several sentences is `((s1, s2, ...), y)`, or
        `((s1, s2, ...),)` without labels).

        The encoder trains exactly the variables its pooling uses (the
        pooler only for P2), and a NaN or infinite loss stops training at
        once with `NonFiniteLossError` (step and loss).
        """
        self.encoder.train_used_layers_only()
        callbacks = [StopOnNonFiniteLoss(), *(callbacks or [])]
        if _is_in_memory(x):
            x = training_dataset(
                x, y, kwargs.pop("sample_weight", None), batch_size, shuffle
            )
            y = batch_size = None
        return super().fit(
            x, y, batch_size=batch_size, shuffle=False, callbacks=callbacks, **kwargs
        )

    def compile(self, optimizer="auto", **kwargs):
        """Configures training; `"auto"` is Adam with learning rate 1e-5."""
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(1e-5)
        super().compile(optimizer=optimizer, **kwargs)

    def get_config(self):
        return {"encoder": keras.layers.serialize(self.encoder), "name": self.name}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.layers.deserialize(config["encoder"])
        return cls(**config)
