"""SG-OPT: self-guided contrastive learning with a frozen copy's layers."""

import keras
from keras import ops

from kcse.models.layer_taps import embedding_layers
from kcse.models.layer_taps import hidden_states_model
from kcse.distribution.cross_replica import scale_for_replicas
from kcse.layers.pooling_rules import PIVOT_POOLINGS
from kcse.layers.sentence_pooling import masked_max
from kcse.layers.sentence_pooling import masked_mean
from kcse.losses.self_guided_loss import SelfGuidedLoss
from kcse.objectives.encoder_objective import EncoderObjective
from kcse.objectives.heads import bert_dense
from kcse.foundation.validation import check_count
from kcse.foundation.validation import check_number


# The pivots' pooling over tokens, by `pooling_rules.PIVOT_POOLINGS` name.
POOL_PIVOTS = {"mean": masked_mean, "max": masked_max}


def _head_layer(units):
    """`nn.Linear` + `nn.GELU()` as SG-BERT initialises them (`loss.py`,
    `Loss`: `weight.data.normal_(0.0, 0.02)`, zero biases), exact (erf) GELU
    (keras.activations.gelu: approximate=False)."""
    return bert_dense(units, "gelu")


@keras.saving.register_keras_serializable(package="kcse")
class SGOpt(EncoderObjective):
    """Self-Guided Contrastive Learning, SG-OPT (Kim et al., ACL 2021).

    BERT_F, a frozen copy of the encoder's backbone as it is when `SGOpt` is
    built, gives each sentence one pivot per layer: the mean over real
    tokens of its embeddings and of every block's output. BERT_T, the
    encoder's own backbone, is trained with its embedding stage frozen (in
    place: those layers stay non-trainable afterwards). The encoder's
    sentence vector c_i (SG-OPT uses `pooling="cls"`) and the pivots pass
    through one shared projection head, Dense–GELU–Dense–GELU of width
    `projection_dim` (exact, erf GELU), into `kcse.losses.SelfGuidedLoss`
    (L^opt3), plus `regularization` · Σ‖θ_T − θ_F‖² over the backbone's
    weights. As in the authors' code (galsang/SG-BERT, `loss.py`, `Loss`),
    the head's kernels start as normal(0, 0.02) draws (BERT's
    `initializer_range`, untruncated) and its biases at zero. The head is
    used in training only. Under a `tf.distribute` strategy the pivots of
    every replica are gathered, and the regulariser, which every replica
    computes in full, is divided by the replica count so that the summed
    gradients equal one device's.

    `fit` takes unlabelled sentences, as `kcse.SimCSE`.

    The ablations of the paper and the options of the authors' `training.py`
    are arguments: `variant` picks the loss (SG-OPT's L^opt3, or L^opt2,
    L^opt1 and SG's L^base, which compare c_i with one pivot: a layer drawn
    uniformly for each sentence at every step); `pivot_pooling` is the
    pivots' pooling over tokens (the authors' `pooling2`: mean, or max as
    the slides describe); `pivot_layers` the layers that give pivots (the
    authors' `lmin`, `lmax`); `projection=False` leaves the head out (the
    "− projection head" row).

    Args:
        encoder: a `kcse.SentenceEncoder` without dimension-reducing
            whitening.
        projection_dim: int. Width of the projection head.
        temperature: float. τ.
        regularization: float. λ.
            These three default to SG-OPT's, the method registry's paper
            settings (`kcse.experiments.methods.sg_opt.PAPER_SETTINGS`, with
            their sources).
        variant: `"opt3"` (default), `"opt2"`, `"opt1"` or `"base"`; see
            `kcse.losses.SelfGuidedLoss`.
        pivot_pooling: `"mean"` (default) or `"max"` over the real tokens.
        pivot_layers: `(first, stop)`: the layers first .. stop − 1 give
            pivots, 0 being the embeddings and `num_layers` the last block;
            `None` (default) for all of them, as the authors' `lmin=0`,
            `lmax=-1`. Their draw indexes the kept layers from `lmin`
            rather than 0, so with `lmin > 0` it can fall outside them;
            kcse draws among the kept layers.
        projection: bool. Whether the vectors pass through the head (True).
        seed: int or None. Seed of the layer draws of the one-pivot
            variants.

    `fit` raises `ValueError` for a batch size below 2 (the other sentences'
    pivots are the negatives) and leaves out a last in-memory batch of one
    sentence.

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
                  "a", "cat", "dog", "sat", "ran", "the"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="cls")
    sg_opt = kcse.SGOpt(encoder, projection_dim=32)
    sg_opt.compile(optimizer=keras.optimizers.Adam(5e-5), run_eagerly=True)
    history = sg_opt.fit(["the cat sat", "a dog ran", "the dog sat", "a cat ran"],
                         batch_size=2, epochs=1, verbose=0)
    history.history["loss"]  # one float per epoch, e.g. [3.7]
    ```
    """

    in_batch_negatives = True

    def __init__(
        self,
        encoder,
        projection_dim=4096,
        temperature=0.01,
        regularization=0.1,
        variant="opt3",
        pivot_pooling="mean",
        pivot_layers=None,
        projection=True,
        seed=None,
        **kwargs,
    ):
        super().__init__(encoder, **kwargs)
        backbone = encoder.backbone
        if pivot_pooling not in PIVOT_POOLINGS:
            raise ValueError(
                f"pivot_pooling must be one of {', '.join(PIVOT_POOLINGS)}; "
                f"got {pivot_pooling!r}."
            )
        layer_count = backbone.num_layers + 1  # The embeddings, then each block.
        first, stop = (0, layer_count) if pivot_layers is None else pivot_layers
        if not 0 <= first < stop <= layer_count:
            raise ValueError(
                "pivot_layers must be (first, stop) with 0 <= first < stop <= "
                f"{layer_count} (the embeddings and {backbone.num_layers} "
                f"blocks); got {pivot_layers!r}."
            )
        if encoder.output_dim != backbone.hidden_dim:
            raise ValueError(
                "SGOpt compares the sentence vector with pooled hidden states, "
                f"so they need one width; the encoder gives {encoder.output_dim}"
                f" and the backbone's states {backbone.hidden_dim}."
            )
        self.projection_dim = check_count(projection_dim, "projection_dim")
        self.temperature = check_number(temperature, "temperature", above=0)
        self.regularization = check_number(regularization, "regularization", minimum=0)
        self.variant = variant
        self.pivot_pooling = pivot_pooling
        self.pivot_layers = None if pivot_layers is None else (first, stop)
        self.pivot_range = (first, stop)
        self.seed = seed

        # === Layers ===
        self.fixed_backbone = type(backbone).from_config(backbone.get_config())
        self.fixed_backbone.set_weights(backbone.get_weights())
        self.fixed_backbone.trainable = False
        self.fixed_states = hidden_states_model(self.fixed_backbone)
        for layer in embedding_layers(backbone):
            layer.trainable = False
        self.projection = None
        if projection:
            self.projection = keras.Sequential(
                [_head_layer(projection_dim), _head_layer(projection_dim)],
                name="projection_head",
            )
            self.projection.build((None, None, backbone.hidden_dim))
        self.objective_loss = SelfGuidedLoss(temperature, variant)
        if variant != "opt3":
            self.layer_sampler = keras.random.SeedGenerator(seed)

    def call(self, inputs, training=None):
        sentences = self.encoder(inputs, training=training)
        states = self.fixed_states(inputs, training=False)["hidden_states"]
        first, stop = self.pivot_range
        pool = POOL_PIVOTS[self.pivot_pooling]
        mask = inputs["padding_mask"]
        pivots = ops.stack([pool(state, mask) for state in states[first:stop]], axis=1)
        if self.variant != "opt3":
            pivots = self.one_layer_per_sentence(pivots)
        vectors = ops.concatenate([ops.expand_dims(sentences, 1), pivots], axis=1)
        if self.projection is None:
            return vectors
        return self.projection(vectors, training=training)

    def one_layer_per_sentence(self, pivots):
        """`(batch, 1, dim)`: each sentence's pivot of one layer, drawn
        uniformly from `pivots`' layers (SG-BERT's `torch.randint`)."""
        layers = pivots.shape[1]
        drawn = keras.random.randint(
            (ops.shape(pivots)[0],), 0, layers, seed=self.layer_sampler
        )
        chosen = ops.one_hot(drawn, layers, dtype=pivots.dtype)
        return ops.expand_dims(ops.einsum("bl,bld->bd", chosen, pivots), 1)

    def weight_distance(self):
        """Σ‖θ_T − θ_F‖² over the backbone's weights."""
        return ops.sum(
            ops.stack(
                [
                    ops.sum(ops.square(tuned - fixed))
                    for tuned, fixed in zip(
                        self.encoder.backbone.weights, self.fixed_backbone.weights
                    )
                ]
            )
        )

    def objective(self, y, y_pred, sample_weight):
        loss = self.objective_loss(None, y_pred, sample_weight)
        return loss + self.regularization * scale_for_replicas(self.weight_distance())

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "projection_dim": self.projection_dim,
                "temperature": self.temperature,
                "regularization": self.regularization,
                "variant": self.variant,
                "pivot_pooling": self.pivot_pooling,
                "pivot_layers": self.pivot_layers,
                "projection": self.projection is not None,
                "seed": self.seed,
            }
        )
        return config
