"""Unsupervised SimCSE: dropout views and in-batch negatives."""

import keras
from keras import ops

from kcse.losses.simcse_loss import SimCSELoss
from kcse.objectives.encoder_objective import EncoderObjective
from kcse.objectives.heads import bert_dense


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

    Args:
        encoder: a `kcse.SentenceEncoder`.
        temperature: float. 0.05 in SimCSE.
        negatives: `"both_views"` (2N−2 negatives, Su Jianlin / bojone) or
            `"cross_view"` (N−1, princeton-nlp).
        mlp_only_train: bool. Whether the vectors pass through a new MLP
            in training only (False).

    `fit` raises `ValueError` for a batch size below 2 (a lone sentence has
    no negatives) and leaves out a last in-memory batch of one sentence.

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
    ```
    """

    in_batch_negatives = True

    def __init__(
        self, encoder, temperature=0.05, negatives="both_views",
        mlp_only_train=False, **kwargs
    ):
        super().__init__(encoder, **kwargs)
        self.temperature = temperature
        self.negatives = negatives
        self.mlp_only_train = mlp_only_train
        self.mlp = None
        if mlp_only_train:
            self.mlp = bert_dense(encoder.output_dim, "tanh", name="mlp")
            self.mlp.build((None, encoder.output_dim))
        self.objective_loss = SimCSELoss(temperature, negatives)

    def call(self, inputs, training=None):
        if len(inputs["token_ids"].shape) == 3:  # Two text views per sentence.
            views = self.encode_columns(
                inputs, training, 2, "one sentence, or two text views of it"
            )
        else:
            batch = ops.shape(inputs["token_ids"])[0]
            doubled = {
                key: ops.concatenate([value, value], axis=0)
                for key, value in inputs.items()
            }
            vectors = self.encoder(doubled, training=training)
            views = ops.stack([vectors[:batch], vectors[batch:]], axis=1)
        if self.mlp is None:
            return views
        return self.mlp(views)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "temperature": self.temperature,
                "negatives": self.negatives,
                "mlp_only_train": self.mlp_only_train,
            }
        )
        return config
