"""The base of every training objective: a Task wrapping a SentenceEncoder."""

import keras
import keras_hub
from keras import ops


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
        samples = super().preprocess_samples(x, y, sample_weight)
        if keras.config.backend() != "tensorflow":
            return samples
        # Boolean masks as int32: Keras reduces a sample batch with MEAN when
        # building under tf.distribute, which has no kernel for bool.
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(samples)
        x = keras.tree.map_structure(
            lambda value: (
                ops.cast(value, "int32")
                if keras.backend.standardize_dtype(value.dtype) == "bool"
                else value
            ),
            x,
        )
        return keras.utils.pack_x_y_sample_weight(x, y, sample_weight)

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
