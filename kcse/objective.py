"""The base of every training objective: a Task wrapping a SentenceEncoder."""

import keras
import keras_hub
import tensorflow as tf


def training_dataset(x, y=None, sample_weight=None, batch_size=None, shuffle=True):
    """A batched `tf.data.Dataset` of in-memory samples, reshuffled each epoch.

    Examples are batched `batch_size` at a time (32 by default), as
    `keras.Model.fit` does with arrays.
    """
    samples = x
    if y is not None or sample_weight is not None:
        samples = keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
    dataset = tf.data.Dataset.from_tensor_slices(samples)
    if shuffle:
        dataset = dataset.shuffle(
            int(dataset.cardinality()), reshuffle_each_iteration=True
        )
    return dataset.batch(batch_size or 32)


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


def _is_in_memory(x):
    """Whether `x` is a list, tuple, dict or array rather than a data stream."""
    return isinstance(x, (list, tuple, dict)) or hasattr(x, "__array__")


class EncoderObjective(keras_hub.models.Task):
    """A trainable objective around a `kcse.SentenceEncoder`.

    Subclasses define `call` (what the encoder produces for a batch) and
    `compute_loss`. The objective shares the encoder's layers, so training it
    trains the encoder in place; `fit` accepts raw text, tokenised by the
    encoder's preprocessor inside the input pipeline.

    Args:
        encoder: a `kcse.SentenceEncoder`.
    """

    def __init__(self, encoder, **kwargs):
        kwargs.setdefault("compile", False)
        super().__init__(**kwargs)
        self.encoder = encoder
        self.preprocessor = encoder.preprocessor

    def preprocess_samples(self, x, y=None, sample_weight=None):
        """Tokenises a batch and trims its padding (runs inside tf.data)."""
        samples = super().preprocess_samples(x, y, sample_weight)
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(samples)
        if isinstance(x, dict) and "padding_mask" in x:
            x = trim_padding(x)
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)

    def fit(self, x=None, y=None, batch_size=None, shuffle=True, **kwargs):
        """Trains the encoder; see `keras.Model.fit`.

        `x` is raw text (or token dicts): a list or array, which is
        reshuffled every epoch when `shuffle` (in-batch negatives depend on
        which sentences share a batch), or a `tf.data.Dataset`, which is used
        as given (shuffle it yourself).
        """
        if _is_in_memory(x):
            x = training_dataset(
                x, y, kwargs.pop("sample_weight", None), batch_size, shuffle
            )
            y = batch_size = None
        return super().fit(x, y, batch_size=batch_size, shuffle=False, **kwargs)

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
