"""Training on labelled sentence pairs with a pair loss (CoSENT by default)."""

import keras

from kcse.losses.cosent import CoSENT
from kcse.objectives.encoder_objective import EncoderObjective


@keras.saving.register_keras_serializable(package="kcse")
class PairObjective(EncoderObjective):
    """Trains a `kcse.SentenceEncoder` on labelled sentence pairs.

    Both sentences of a pair go through the encoder; `loss` compares the
    pair's two vectors, `y_pred` of shape `(batch, 2, dim)`, with its label.
    The default, `kcse.losses.CoSENT`, ranks the cosines of the batch by
    label (Su Jianlin's CoSENT, trained on each task's train split in
    text2vec's Chinese results). Training updates the encoder in place.

    `fit` takes `x=(sentences1, sentences2)` and `y=labels`, or a
    `tf.data.Dataset` of `((sentence1, sentence2), label)`.

    Args:
        encoder: a `kcse.SentenceEncoder`.
        loss: a `keras.losses.Loss` of `(labels, (batch, 2, dim) vectors)`;
            `kcse.losses.CoSENT()` when None.

    Example:

    A tiny random encoder; real training starts from a pretrained one,
    e.g. `kcse.SentenceEncoder.from_preset("bert_tiny_en_uncased",
    pooling="last_avg")`. `run_eagerly=True` only skips graph tracing for
    this toy run.

    ```python
    import keras
    import keras_hub
    import kcse

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                  "a", "cat", "dog", "sat", "ran", "the", "is", "sitting"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="last_avg")
    model = kcse.PairObjective(encoder, kcse.losses.CoSENT(scale=20.0))
    model.compile(optimizer=keras.optimizers.Adam(2e-5), run_eagerly=True)
    history = model.fit(
        (["a cat sat", "a dog ran", "the cat ran"],
         ["a cat is sitting", "the cat sat", "a dog sat"]),
        [5.0, 1.0, 0.5], batch_size=3, epochs=1, verbose=0,
    )
    history.history["loss"]  # one float per epoch, e.g. [0.9]
    ```
    """

    def __init__(self, encoder, loss=None, **kwargs):
        super().__init__(encoder, **kwargs)
        self.objective_loss = CoSENT() if loss is None else loss

    def call(self, inputs, training=None):
        return self.encode_columns(inputs, training, 2, "sentence pairs")

    def get_config(self):
        config = super().get_config()
        config["loss"] = keras.losses.serialize(self.objective_loss)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["loss"] = keras.losses.deserialize(config["loss"])
        return super().from_config(config)
