"""Unsupervised SimCSE: dropout views and in-batch negatives."""

import keras
from keras import ops

from kcse.distribution.cross_replica import scale_for_replicas
from kcse.losses.simcse_loss import SimCSELoss
from kcse.models.embedding_lookup import token_embedding
from kcse.objectives.encoder_objective import EncoderObjective
from kcse.objectives.heads import bert_dense
from kcse.objectives.masked_lm import MLM_PROBABILITY
from kcse.objectives.masked_lm import mask_tokens
from kcse.objectives.masked_lm import masked_lm_head
from kcse.objectives.masked_lm import masked_lm_loss
from kcse.objectives.masked_lm import mlm_problem
from kcse.objectives.masked_lm import special_token_ids
from kcse.foundation.validation import check_number


@keras.saving.register_keras_serializable(package="kcse")
class SimCSE(EncoderObjective):
    """Unsupervised SimCSE training of a `kcse.SentenceEncoder`.

    Each batch of sentences is encoded twice in one forward pass (the batch
    is duplicated), so the two copies differ only by dropout; the two views
    of a sentence are positives and the other sentences in-batch negatives
    (`kcse.losses.SimCSELoss`). Training updates the wrapped encoder in
    place: use the encoder for inference afterwards.

    `fit` takes raw strings (a list, or a `tf.data.Dataset` of strings, batched
    or not), preprocessed by the encoder's preprocessor inside the input
    pipeline. It also takes two text views of every sentence, `fit((views_a,
    views_b))` (e.g. CLEAR's deletions and reorderings:
    `kcse.data.text_views`): each view is encoded once, with dropout, and
    the two views of a sentence are the positives. Under a `tf.distribute` strategy the negatives are gathered
    across replicas, so each step sees the global batch as one device would.
    Set the training dropout on the encoder (`hidden_dropout=0.3` for Su's
    setting).

    `mlp_only_train=True` is the paper's unsupervised setting
    (princeton-nlp/SimCSE, `--pooler_type cls --mlp_only_train`): in
    training the sentence vectors pass through a new MLP, Dense + tanh of
    the encoder's width (`MLPLayer`, drawn as BERT's `_init_weights`:
    normal(0, 0.02), zero bias); the MLP belongs to this objective, not to
    the encoder, which encodes, scores and saves without it (their
    "cls_before_pooler"). The paper builds the encoder with
    `pooling="cls"`.

    `mlm_weight > 0` adds princeton-nlp/SimCSE's auxiliary MLM loss
    (`--do_mlm --mlm_weight`, 0.1 in their code): loss = contrastive +
    `mlm_weight` · MLM cross-entropy. Each row of the doubled batch (or
    each text view) is masked anew at every step as their collator masks
    (`kcse.objectives.masked_lm`: `mlm_probability` 0.15 of the tokens that
    are not special or [UNK]; 80% [MASK], 10% a random token, 10% kept),
    encoded again, and a BERT MLM head predicts the chosen tokens: their
    `BertLMPredictionHead` as their `train.py` runs it (keras-hub's
    `MaskedLMHead`: Dense + GELU + LayerNorm, then a decoder to the
    vocabulary plus a bias), untied: the decoder starts as a copy of the
    token embedding and trains apart from it. Where princeton loads the
    checkpoint's pretrained transform, LayerNorm and bias
    (`cls.predictions`), kcse draws them as BERT's `_init_weights`
    (`kcse.objectives.masked_lm`). The head belongs to the objective. The
    whole token embedding trains (random replacements come from the whole
    vocabulary). Under a
    `tf.distribute` strategy each replica averages over its own chosen
    tokens, as their multi-GPU runs do.

    Args:
        encoder: a `kcse.SentenceEncoder`.
        temperature: float. SimCSE's by default (the method registry's,
            `kcse.experiments.methods.simcse.PAPER_SETTINGS`, with its source).
        negatives: `"both_views"` (2N−2 negatives, Su Jianlin / bojone) or
            `"cross_view"` (N−1, princeton-nlp).
        mlp_only_train: bool. Whether the vectors pass through a new MLP
            in training only (False).
        mlm_weight: float. Weight of the MLM loss; 0 (default) leaves it out.
        mlm_probability: float. Share of the tokens MLM chooses (0.15).
        seed: int or None. Seed of the MLM masks.
        same_dropout_mask: bool. Encode each sentence once and use that
            vector as both views: dropout on, but one mask for the pair
            (Gao et al. 2021, Table 3's "Fixed 0.1", the ablation showing
            that the two masks are the augmentation). Not with text views.

    `fit` raises `ValueError` for a batch size below 2 (a lone sentence has
    no negatives) and leaves out a last in-memory batch of one sentence.
    With `mlm_weight > 0`, building raises `ValueError` for an encoder
    without a preprocessor whose tokenizer has [MASK], or without a
    token embedding of the backbone's width.

    Example:

    A tiny random encoder; real training starts from a pretrained one,
    e.g. `kcse.SentenceEncoder.from_preset("bert_tiny_en_uncased",
    pooling="cls", hidden_dropout=0.1)`. `run_eagerly=True` only skips
    graph tracing for this toy run.

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
    encoder = kcse.SentenceEncoder(
        backbone, preprocessor, pooling="cls", hidden_dropout=0.1)
    simcse = kcse.SimCSE(encoder)
    simcse.compile(optimizer=keras.optimizers.Adam(1e-5), run_eagerly=True)
    history = simcse.fit(["the cat sat", "a dog ran", "the dog sat", "a cat ran"],
                         batch_size=2, epochs=1, verbose=0)
    history.history["loss"]  # one float per epoch, e.g. [0.69]
    encoder.encode(["the cat sat"]).shape  # (1, 16): the encoder trained in place
    # princeton-nlp's options: an MLP in training only, and the MLM loss.
    princeton = kcse.SimCSE(encoder, mlp_only_train=True, mlm_weight=0.1)
    ```
    """

    in_batch_negatives = True

    def __init__(
        self, encoder, temperature=0.05, negatives="both_views",
        mlp_only_train=False, mlm_weight=0.0, mlm_probability=MLM_PROBABILITY,
        seed=None, same_dropout_mask=False, **kwargs
    ):
        super().__init__(encoder, **kwargs)
        self.same_dropout_mask = bool(same_dropout_mask)
        self.temperature = check_number(temperature, "temperature", above=0)
        self.negatives = negatives
        self.mlp_only_train = mlp_only_train
        self.mlm_weight = check_number(mlm_weight, "mlm_weight", minimum=0)
        self.mlm_probability = check_number(mlm_probability, "mlm_probability", above=0,
                                            below=1)
        self.seed = seed
        self.mlp = None
        if mlp_only_train:
            self.mlp = bert_dense(encoder.output_dim, "tanh", name="mlp")
            self.mlp.build((None, encoder.output_dim))
        self.mlm_head = None
        if mlm_weight:
            problem = mlm_problem(encoder)
            if problem:
                raise ValueError(f"SimCSE(mlm_weight={mlm_weight}): {problem}.")
            tokenizer = encoder.preprocessor.tokenizer
            self.special_ids = special_token_ids(tokenizer)
            self.mask_id = tokenizer.mask_token_id
            self.mlm_head = masked_lm_head(token_embedding(encoder.backbone))
            self.mask_seed = keras.random.SeedGenerator(seed)
        self.objective_loss = SimCSELoss(temperature, negatives)

    def call(self, inputs, training=None):
        if len(inputs["token_ids"].shape) == 3:  # Two text views per sentence.
            if self.same_dropout_mask:
                raise ValueError("SimCSE(same_dropout_mask=True) encodes one sentence once "
                                 "for both views; it takes no text views.")
            views = self.encode_columns(
                inputs, training, 2, "one sentence, or two text views of it"
            )
        elif self.same_dropout_mask:  # One pass: one dropout mask for both views.
            vectors = self.encoder(inputs, training=training)
            views = ops.stack([vectors, vectors], axis=1)
        else:
            batch = ops.shape(inputs["token_ids"])[0]
            doubled = {
                key: ops.concatenate([value, value], axis=0)
                for key, value in inputs.items()
            }
            vectors = self.encoder(doubled, training=training)
            views = ops.stack([vectors[:batch], vectors[batch:]], axis=1)
        if self.mlp is not None:
            views = self.mlp(views)
        if self.mlm_head is not None and training:
            # An output, not a layer loss: each replica keeps its own, and
            # the masks' and dropout's seeds advance under JAX's stateless
            # train step.
            return views, self.mlm_loss(inputs)
        return views

    def objective(self, y, y_pred, sample_weight):
        if not isinstance(y_pred, tuple):
            return super().objective(y, y_pred, sample_weight)
        views, mlm = y_pred
        loss = super().objective(y, views, sample_weight)
        return loss + self.mlm_weight * scale_for_replicas(mlm)

    def mlm_loss(self, inputs):
        """The MLM loss of a training batch: each row of the doubled batch
        (or each text view) masked by `mask_tokens` and encoded again."""
        length = ops.shape(inputs["token_ids"])[-1]
        rows = {key: ops.reshape(value, (-1, length)) for key, value in inputs.items()}
        if len(inputs["token_ids"].shape) == 2:  # One sentence, encoded twice.
            rows = {key: ops.concatenate([value, value], axis=0) for key, value in rows.items()}
        masked_ids, chosen = self.mask_tokens(rows["token_ids"], rows["padding_mask"])
        return self.masked_lm_loss(rows, masked_ids, chosen, training=True)

    def mask_tokens(self, token_ids, padding_mask):
        """`kcse.objectives.masked_lm.mask_tokens` with this objective's
        tokenizer, vocabulary, probability and seed."""
        return mask_tokens(
            token_ids, padding_mask, self.special_ids, self.mask_id,
            self.mlm_head.vocabulary_size, self.mlm_probability, self.mask_seed,
        )

    def masked_lm_loss(self, rows, masked_ids, chosen, training=True):
        """The MLM cross-entropy of the rows `rows` (token dicts) encoded
        with `masked_ids`, predicting their tokens where `chosen`."""
        states = self.encoder.backbone(
            dict(rows, token_ids=masked_ids), training=training
        )["sequence_output"]
        return masked_lm_loss(self.mlm_head, states, rows["token_ids"], chosen)

    def _trained_embedding_rows(self, used_ids):
        # MLM replaces tokens with draws from the whole vocabulary.
        if self.mlm_head is not None:
            return None
        return super()._trained_embedding_rows(used_ids)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "temperature": self.temperature,
                "negatives": self.negatives,
                "mlp_only_train": self.mlp_only_train,
                "mlm_weight": self.mlm_weight,
                "mlm_probability": self.mlm_probability,
                "seed": self.seed,
                "same_dropout_mask": self.same_dropout_mask,
            }
        )
        return config
