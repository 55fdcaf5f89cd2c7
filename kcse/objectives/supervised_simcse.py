"""Supervised SimCSE: (anchor, positive, hard negative) triplets."""

import keras

from kcse.layers.pooling_rules import POOLER_LAYER
from kcse.losses.simcse_loss import SimCSELoss
from kcse.objectives.encoder_objective import EncoderObjective
from kcse.objectives.heads import INITIALIZER_RANGE


@keras.saving.register_keras_serializable(package="kcse")
class SupervisedSimCSE(EncoderObjective):
    """Supervised SimCSE training of a `kcse.SentenceEncoder` on triplets.

    Each sample is an anchor, a positive (for NLI: a hypothesis it entails)
    and a hard negative (a hypothesis it contradicts). Every anchor queries
    the positives and the hard negatives of the whole batch: its own
    positive is the target, everything else a negative, and
    `hard_negative_weight` is added to the logit of its own hard negative
    (princeton-nlp/SimCSE; `kcse.losses.SimCSELoss` with a third view).
    Under a `tf.distribute` strategy the candidates of every replica are
    gathered. Training updates the wrapped encoder in place.

    `fit` takes a tuple of three string columns `(anchors, positives,
    hard_negatives)`, or a `tf.data.Dataset` of `((anchor, positive,
    hard_negative),)`; `kcse.data.nli_triplets` makes them from NLI data.

    Args:
        encoder: a `kcse.SentenceEncoder`.
        temperature: float.
        hard_negative_weight: float.
            Both default to supervised SimCSE's, the method registry's
            paper settings (`kcse.experiments.methods.sup_simcse.PAPER_SETTINGS`,
            with their sources).
        keep_mlp: bool. princeton's supervised setting (`--pooler_type cls`
            without `--mlp_only_train`): a new MLP, Dense + tanh over [CLS]
            (their `MLPLayer`, drawn as BERT's `_init_weights`: normal(0,
            0.02) kernel, zero bias), trains with the encoder and stays at
            test time. It is the encoder's pooler, so `encode`, saving and
            every export carry it (princeton's `simcse_to_huggingface.py`
            renames `mlp` to `pooler` likewise): build the encoder with
            `pooling="pooler", pooler_activation="tanh"`; the pooler's
            pretrained weights are replaced by the new MLP's, as their
            `BertModel(add_pooling_layer=False)` drops them.

    `fit` raises `ValueError` for a batch size below 2 (the other triplets
    are the in-batch negatives) and leaves out a last in-memory batch of one
    triplet.

    Example:

    A tiny random encoder; real training starts from a pretrained one,
    e.g. `kcse.SentenceEncoder.from_preset("bert_tiny_en_uncased",
    pooling="cls")`. `run_eagerly=True` only skips graph tracing for this
    toy run.

    ```python
    import keras
    import keras_hub
    import kcse

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                  "a", "cat", "dog", "sat", "ran", "the", "no", "one"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="cls")
    model = kcse.SupervisedSimCSE(encoder, hard_negative_weight=0.0)
    model.compile(optimizer=keras.optimizers.Adam(5e-5), run_eagerly=True)
    history = model.fit(
        (["the cat sat", "a dog ran"],  # anchors
         ["a cat sat", "the dog ran"],  # positives
         ["no one sat", "a dog sat"]),  # hard negatives
        batch_size=2, epochs=1, verbose=0,
    )
    history.history["loss"]  # one float per epoch, e.g. [1.7]
    ```
    """

    in_batch_negatives = True

    def __init__(
        self, encoder, temperature=0.05, hard_negative_weight=0.0, keep_mlp=False,
        **kwargs
    ):
        if keep_mlp and (encoder.pooling, encoder.pooler_activation) != ("pooler", "tanh"):
            raise ValueError(
                "keep_mlp=True trains princeton's MLP (Dense + tanh over [CLS]) as "
                "the encoder's pooler, which encodes and exports it: build the "
                "encoder with pooling='pooler', pooler_activation='tanh'; got "
                f"pooling={encoder.pooling!r}, pooler_activation="
                f"{encoder.pooler_activation!r}."
            )
        super().__init__(encoder, **kwargs)
        self.temperature = temperature
        self.hard_negative_weight = hard_negative_weight
        self.keep_mlp = bool(keep_mlp)
        if self.keep_mlp:
            draw_mlp_pooler(encoder.backbone)
        self.objective_loss = SimCSELoss(
            temperature, "cross_view", hard_negative_weight=hard_negative_weight
        )

    def call(self, inputs, training=None):
        return self.encode_columns(
            inputs, training, 3, "(anchor, positive, hard negative) triplets"
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "temperature": self.temperature,
                "hard_negative_weight": self.hard_negative_weight,
                "keep_mlp": self.keep_mlp,
            }
        )
        return config


def draw_mlp_pooler(backbone):
    """Draws `backbone`'s pooler Dense anew as princeton's `MLPLayer`:
    normal(0, 0.02) kernel, zero bias (BERT's `_init_weights`)."""
    pooler = backbone.get_layer(POOLER_LAYER)
    draw = keras.initializers.RandomNormal(mean=0.0, stddev=INITIALIZER_RANGE)
    pooler.kernel.assign(draw(pooler.kernel.shape, dtype=pooler.kernel.dtype))
    pooler.bias.assign(keras.ops.zeros(pooler.bias.shape, dtype=pooler.bias.dtype))
