"""ConSERT: contrastive learning on embedding-level views, with NLI modes."""

import keras
from keras import ops

from kcse.models.layer_taps import embedding_stage
from kcse.models.layer_taps import transformer_states
from kcse.layers.nli_classifier import NLIClassifier
from kcse.layers.view_augmentation import AdversarialPerturbation
from kcse.layers.view_augmentation import TokenShuffle
from kcse.layers.view_specs import CONSERT_SCRIPT_VIEWS
from kcse.layers.view_specs import view_from_spec
from kcse.losses.nt_xent_loss import NTXentLoss
from kcse.objectives.embedding_gradient import check_gradient_backend
from kcse.objectives.embedding_gradient import gradient_of
from kcse.objectives.encoder_objective import EncoderObjective
from kcse.foundation.validation import check_count
from kcse.foundation.validation import check_number

MODES = ("unsup", "sup", "joint")
# Inside a training batch, the NLI labels the adversarial view needs.
LABELS = "nli_labels"


def consert_views(mode):
    """ConSERT's two view layers for `mode` (None: the sentence as it is):
    its scripts' (`kcse.layers.view_specs.CONSERT_SCRIPT_VIEWS`, the method
    registry's `views` paper setting); `"sup"`, without a contrastive term,
    keeps unsup's."""
    specs = CONSERT_SCRIPT_VIEWS["joint" if mode == "joint" else "unsup"]
    return tuple(view_from_spec(spec) for spec in specs)


@keras.saving.register_keras_serializable(package="kcse")
class ConSERT(EncoderObjective):
    """ConSERT training of a `kcse.SentenceEncoder` (Yan et al., 2021).

    Each sentence is encoded twice, once per augmentation of `views`
    (`kcse.layers.TokenShuffle`, `TokenCutoff`, `FeatureCutoff`,
    `SpanCutoff`, `EmbeddingDropout`, `AdversarialPerturbation`, or None
    for none), applied between
    the backbone's embedding stage and its transformer stack; the encoder's
    pooling makes the two vectors, and NT-Xent (`kcse.losses.NTXentLoss`:
    2N−2 negatives, the two directions summed as in ConSERT's code) pulls
    them together. Under a `tf.distribute` strategy the views of every
    replica are gathered.

    `mode` chooses the training signal, as ConSERT's
    `AdvCLSoftmaxLoss.forward` (yym6472/ConSERT,
    `sentence_transformers/losses/AdvCLSoftmaxLoss.py`):
    - `"unsup"`: `contrastive_weight` · NT-Xent on unlabelled sentences
      (ConSERT's `--cl_loss_only`, which still weights the loss by
      `--cl_rate`); `fit(sentences)`.
    - `"sup"`: NLI softmax only, `NLIClassifier` on (r1, r2, |r1 − r2|,
      max(r1, r2)²) of the un-augmented pair; `fit((premises, hypotheses),
      labels)`.
    - `"joint"`: softmax + `contrastive_weight` · (NT-Xent over the views of
      the premises + NT-Xent over the views of the hypotheses), each column
      with its own in-batch negatives; same data as `"sup"`.
    The adversarial view perturbs each sentence along the gradient of the
    NLI loss with respect to its embedding output, so it needs `"joint"`
    (and the TensorFlow or JAX backend, which takes that gradient inside the
    step: `kcse.objectives.embedding_gradient`).
    ConSERT's `sup-unsup` and `joint-unsup` are a `"sup"` or `"joint"` fit
    on NLI followed by an `"unsup"` fit on the target sentences with the
    same encoder (`recipes/consert.py` does both).

    Every default is ConSERT's: `views` (`consert_views`), `temperature`,
    `contrastive_weight` and `max_square` are the method registry's paper
    settings (`kcse.experiments.methods.consert.PAPER_SETTINGS`, each with
    its source in yym6472/ConSERT), as are the batch size, length,
    learning rates and poolings that belong to `compile`, `fit` and the
    encoder, which `recipes/consert.py` and `kcse train --method consert`
    read from there.

    Args:
        encoder: a `kcse.SentenceEncoder`. ConSERT trains with last-layer
            mean pooling (the registry's `training_pooling`).
        views: two augmentation layers (or None for an un-augmented view);
            None: ConSERT's for `mode` (`consert_views`).
        temperature: float. The registry's `temperature`.
        mode: `"unsup"`, `"sup"` or `"joint"`.
        contrastive_weight: float. α, ConSERT's `cl_rate`: the weight of
            NT-Xent in `"unsup"` and `"joint"` (the registry's
            `contrastive_weight`).
        num_classes: int. NLI classes for `"sup"` / `"joint"`.
        max_square: bool. The NLI head's features include max(r1, r2)²
            (the registry's `nli_max_square`); False: (r1, r2, |r1 − r2|),
            the paper's eq. 2 and SBERT's.

    In `"unsup"` and `"joint"` modes (in-batch negatives), `fit` raises
    `ValueError` for a batch size below 2 and leaves out a last in-memory
    batch of one sample; `"sup"` trains on any batch size.

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
                  "a", "cat", "dog", "sat", "ran", "the"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="last_avg")
    consert = kcse.ConSERT(
        encoder,
        views=(kcse.layers.FeatureCutoff(0.2), kcse.layers.TokenShuffle()),
    )
    consert.compile(optimizer=keras.optimizers.Adam(5e-7), run_eagerly=True)
    history = consert.fit(["the cat sat", "a dog ran", "the dog sat", "a cat ran"],
                          batch_size=2, epochs=1, verbose=0)
    history.history["loss"]  # one float per epoch, e.g. [0.27]
    ```
    """

    def __init__(
        self,
        encoder,
        views=None,
        temperature=0.1,
        mode="unsup",
        contrastive_weight=0.15,
        num_classes=3,
        max_square=True,
        **kwargs,
    ):
        super().__init__(encoder, **kwargs)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}; got {mode!r}.")
        if views is None:
            views = consert_views(mode)
        views = tuple(views)
        if len(views) != 2:
            raise ValueError(f"ConSERT needs two views; got {len(views)}.")
        self.adversarial = any(
            isinstance(view, AdversarialPerturbation) for view in views
        )
        if self.adversarial and mode != "joint":
            raise ValueError(
                "The adversarial view takes the gradient of the supervised NLI "
                f"loss, so it needs labelled pairs and mode='joint'; got "
                f"mode={mode!r}."
            )
        if self.adversarial:
            check_gradient_backend("ConSERT's adversarial view")
        self.views = views
        self.temperature = check_number(temperature, "temperature", above=0)
        self.mode = mode
        self.in_batch_negatives = mode != "sup"
        self.contrastive_weight = check_number(contrastive_weight, "contrastive_weight",
                                               minimum=0)
        self.num_classes = check_count(num_classes, "num_classes", minimum=2)
        self.max_square = max_square
        self.objective_loss = NTXentLoss(temperature)
        self.classifier = None
        if mode != "unsup":
            self.classifier = NLIClassifier(
                num_classes, max_square=max_square, name="nli_classifier"
            )
            self.classifier.build((None, encoder.output_dim))
            self.classification_loss = keras.losses.SparseCategoricalCrossentropy(
                from_logits=True
            )

    def train_step(self, *args):
        """Keras' step (`(data,)` on TensorFlow, `(state, data)` on JAX); with
        the adversarial view, the batch's labels join its inputs, which `call`
        perturbs along the gradient of the NLI loss."""
        if self.adversarial:
            *state, data = args
            x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
            if y is None:
                raise ValueError("The adversarial view needs NLI labels: fit(x, y).")
            x = dict(x, **{LABELS: y})
            args = (*state, keras.utils.pack_x_y_sample_weight(x, y, sample_weight))
        return super().train_step(*args)

    def view(self, inputs, augmentation, training=None, gradient=None):
        """Sentence vectors of `inputs` under one augmentation (or None).

        `gradient` is the adversarial view's: the NLI loss's gradient with
        respect to the embedding output.
        """
        backbone = self.encoder.backbone
        mask = inputs["padding_mask"]
        position_ids = None
        if isinstance(augmentation, TokenShuffle):
            position_ids = augmentation(mask, training=training)
        embeddings = embedding_stage(backbone, inputs, position_ids, training)
        if isinstance(augmentation, AdversarialPerturbation):
            embeddings, mask = augmentation(
                embeddings, mask, gradient=gradient, training=training
            )
        elif augmentation is not None and position_ids is None:
            embeddings, mask = augmentation(embeddings, mask, training=training)
        states = transformer_states(backbone, embeddings, mask, training)
        return self.encoder.pool(states, mask)

    def _nli_logits(self, vectors):
        pairs = ops.reshape(vectors, (-1, 2, ops.shape(vectors)[-1]))
        return self.classifier(pairs[:, 0], pairs[:, 1])

    def _adversarial_gradient(self, sentences, labels, training):
        """d(NLI loss)/d(embedding output) of premise-hypothesis rows."""
        backbone = self.encoder.backbone
        mask = sentences["padding_mask"]
        embeddings = embedding_stage(backbone, sentences, None, training)

        def nli_loss(embeddings):
            states = transformer_states(backbone, embeddings, mask, training)
            logits = self._nli_logits(self.encoder.pool(states, mask))
            return self.classification_loss(labels, logits)

        return gradient_of(nli_loss, embeddings)

    def _views(self, inputs, training, labels=None):
        gradient = None
        if self.adversarial and training:
            gradient = self._adversarial_gradient(inputs, labels, training)
        return ops.stack(
            [self.view(inputs, view, training, gradient) for view in self.views],
            axis=1,
        )

    def call(self, inputs, training=None):
        shape = inputs["token_ids"].shape
        columns = shape[1] if len(shape) == 3 else None
        if self.mode == "unsup":
            if columns is not None:
                raise ValueError(
                    "ConSERT mode 'unsup' trains on single sentences; got "
                    f"{columns} sentences per sample."
                )
            return {"views": self._views(inputs, training)}
        labels = inputs.get(LABELS)
        inputs = {key: value for key, value in inputs.items() if key != LABELS}
        pairs = self.encode_columns(
            inputs, training, 2,
            f"(premise, hypothesis) pairs with NLI labels in mode {self.mode!r}",
        )
        outputs = {"logits": self.classifier(pairs[:, 0], pairs[:, 1])}
        if self.mode == "joint":
            flat = {
                key: ops.reshape(value, (-1, ops.shape(value)[-1]))
                for key, value in inputs.items()
            }
            views = self._views(flat, training, labels)
            # (pairs, 2 sentences, 2 views, dim): premises, then hypotheses.
            outputs["views"] = ops.reshape(
                views, (-1, 2, 2, ops.shape(views)[-1])
            )
        return outputs

    def objective(self, y, y_pred, sample_weight):
        if self.mode == "unsup":
            return self.contrastive_weight * self.objective_loss(
                None, y_pred["views"], sample_weight
            )
        if y is None:
            raise ValueError(
                f"ConSERT mode {self.mode!r} needs NLI labels: fit(x, y)."
            )
        loss = self.classification_loss(y, y_pred["logits"], sample_weight)
        if self.mode == "joint":
            # ConSERT: contrastive_loss_a + contrastive_loss_b, one NT-Xent
            # per column with that column's in-batch negatives.
            views = y_pred["views"]
            loss = loss + self.contrastive_weight * (
                self.objective_loss(None, views[:, 0])
                + self.objective_loss(None, views[:, 1])
            )
        return loss

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "views": [
                    None if view is None else keras.layers.serialize(view)
                    for view in self.views
                ],
                "temperature": self.temperature,
                "mode": self.mode,
                "contrastive_weight": self.contrastive_weight,
                "num_classes": self.num_classes,
                "max_square": self.max_square,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["views"] = [
            None if view is None else keras.layers.deserialize(view)
            for view in config["views"]
        ]
        return super().from_config(config)
