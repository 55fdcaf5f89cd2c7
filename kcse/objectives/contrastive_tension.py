"""Contrastive Tension: two models learn whether they see one sentence or two."""

import contextlib
import math
import random

import keras
import numpy as np
from keras import ops

from kcse.foundation import compat
from kcse.losses.contrastive_tension_loss import ContrastiveTensionLoss
from kcse.models.block_recomputation import recomputed_blocks
from kcse.objectives.encoder_objective import EncoderObjective
from kcse.objectives.token_batches import DrawnPairBatches
from kcse.objectives.token_batches import token_arrays
from kcse.objectives.training_data import is_tf_dataset
from kcse.objectives.training_data import tensorflow_importable
from kcse.foundation.validation import check_count
from kcse.foundation.validation import check_texts


def contrastive_tension_pairs(count, groups, negatives, rng):
    """The sentence pairs of `groups` Contrastive Tension groups, as indices.

    Each group is one positive pair (one sentence for both models) and
    `negatives` negative pairs (two sentences drawn independently), drawn
    as the authors draw them (FreddeFrallan/Contrastive-Tension,
    `ContrastiveTension/Training.py`, `generateTrainingSamples` and
    `_orderBatchSamples`): first every group's positive sentence,
    `rng.randint(0, count, groups)`, then every negative sentence,
    `rng.choice(count, groups * negatives * 2)`, all with replacement;
    group g takes the next `2 * negatives` of them, the first half for the
    first model and the second half for the second. With replacement, a
    negative pair may by chance hold one sentence twice (it is still
    labelled 0, as in the authors' code).

    Args:
        count: int. The number of sentences.
        groups: int. The number of groups to draw.
        negatives: int. K, negative pairs per positive pair.
        rng: a `numpy.random.RandomState` (its `randint` and `choice` are
            the authors' `np.random` calls).

    Returns:
        `(first, second, labels)`: int64 indices of the first and second
        sentence of every pair and float32 labels (1 for the positive pair),
        each of length `groups * (negatives + 1)`, group after group, the
        positive pair first.

    Example:
    ```python
    import numpy as np
    from kcse.objectives.contrastive_tension import contrastive_tension_pairs

    first, second, labels = contrastive_tension_pairs(
        count=100, groups=2, negatives=3, rng=np.random.RandomState(0))
    labels  # array([1., 0., 0., 0., 1., 0., 0., 0.], dtype=float32)
    assert first[0] == second[0] and first[4] == second[4]  # the positives
    ```
    """
    positives = rng.randint(0, count, groups)
    drawn = rng.choice(count, groups * negatives * 2).reshape(groups, 2, negatives)
    first = np.concatenate([positives[:, None], drawn[:, 0]], axis=1)
    second = np.concatenate([positives[:, None], drawn[:, 1]], axis=1)
    labels = np.zeros((groups, negatives + 1), "float32")
    labels[:, 0] = 1.0
    return (
        first.reshape(-1).astype("int64"),
        second.reshape(-1).astype("int64"),
        labels.reshape(-1),
    )


@contextlib.contextmanager
def _without_dropout(*models):
    """Context in which every `keras.layers.Dropout` inside `models` has rate 0.

    Their calls with `training=True` then pass their inputs through, as the
    authors' `training=False`, while the train step still runs in training
    mode (which `rematerialize` needs). The rates are put back afterwards.
    """
    layers = [
        layer
        for model in models
        for layer in compat.sublayers(model)
        if isinstance(layer, keras.layers.Dropout)
    ]
    rates = [layer.rate for layer in layers]
    for layer in layers:
        layer.rate = 0.0
    try:
        yield
    finally:
        for layer, rate in zip(layers, rates):
            layer.rate = rate


@keras.saving.register_keras_serializable(package="kcse")
class ContrastiveTension(EncoderObjective):
    """Contrastive Tension, CT (Carlsson et al., ICLR 2021; BERT-CT).

    Two models with the same initial weights read sentence pairs: the
    encoder, trained in place (encode with it afterwards), and its twin,
    an independent copy of the encoder's backbone made when
    `ContrastiveTension` is built, pooled the same way. For each pair the
    twin encodes the first sentence and the encoder the second, and
    `kcse.losses.ContrastiveTensionLoss` (the logistic loss of the dot
    product of the two vectors) learns whether they read the same
    sentence. Both models are trained, as in the authors' code
    (FreddeFrallan/Contrastive-Tension, `ContrastiveTensionModel.py`:
    gradients of `self.trainable_variables`, both models'). The encoder
    plays the authors' `model2`, the model of the second sentence, which
    sentence-transformers' reading keeps for inference; the authors'
    `Training.py` evaluates both and keeps the better on STS-b dev. The
    twin (`twin_encoder`) doubles the weights in memory; it belongs to
    this objective alone and is freed with it.

    `fit(sentences, batch_size=16)` takes unlabelled sentences (an
    in-memory list of strings) and draws each batch at random, as the
    authors (see `contrastive_tension_pairs`): groups of one positive pair
    (one sentence for both models) and `negatives` negative pairs (two
    sentences drawn independently, with replacement). `batch_size` counts
    sentence pairs, i.e. the rows of the loss, which is also the number of
    sentences each model encodes per step: a multiple of `negatives + 1`
    (the authors' batch of 16 with K = 7 is 2 positive and 14 negative
    pairs). An epoch is `steps_per_epoch` such batches (by default as many
    pairs as there are sentences, rounded up to whole batches), drawn
    afresh every epoch from a `numpy.random.RandomState` seeded by Python's
    `random` (`keras.utils.set_random_seed`,
    `kcse.experiments.training.seed_run`); the authors' 10 "epochs" of 500
    steps are `fit(sentences, batch_size=16, epochs=10,
    steps_per_epoch=500)`.

    As in `kcse.objectives.EncoderObjective`: a NaN or infinite loss stops
    training with `NonFiniteLossError`; with a row-separable optimizer the
    encoder's token embedding trains only the rows the sentences use (the
    twin's table is trained whole, with the same result for such an
    optimizer, at the cost of its dense optimizer slots); `rematerialize`
    recomputes the transformer blocks of both models.

    Args:
        encoder: a `kcse.SentenceEncoder` without whitening. The authors
            pool with the mean of the last layer over real tokens
            (`pooling="last_avg"`).
        negatives: int >= 1. K, negative pairs per positive pair (7).
        dropout: bool. Whether both models train with their dropout. False
            as the authors, who call both with `training=False`
            (`ContrastiveTensionModel.py`, `predictAndUpdate`): every
            dropout rate is 0 during `fit` (and put back after).
            sentence-transformers trains with dropout on.

    `fit` raises `ValueError` for fewer than 2 distinct sentences, a
    `batch_size` that is not a multiple of `negatives + 1` (below it
    included), labels, or `steps_per_epoch` < 1, and `TypeError` for a
    `tf.data.Dataset`, a tuple or dict of columns, or a non-str sentence.

    Example:

    A tiny random encoder; real training starts from a pretrained one,
    e.g. `kcse.SentenceEncoder.from_preset("bert_base_en_uncased",
    pooling="last_avg")` with `keras.optimizers.RMSprop(1e-5)`.
    `run_eagerly=True` only skips graph tracing for this toy run.

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
    ct = kcse.objectives.ContrastiveTension(encoder, negatives=3)
    ct.compile(optimizer=keras.optimizers.RMSprop(1e-5), run_eagerly=True)
    history = ct.fit(["the cat sat", "a dog ran", "the dog sat", "a cat ran"],
                     batch_size=8, epochs=1, verbose=0)  # 2 groups of 1 + 3 pairs
    history.history["loss"]  # one float per epoch, e.g. [0.9]
    encoder.encode(["the cat sat"]).shape  # (1, 16): the encoder trained in place
    ```
    """

    def __init__(self, encoder, negatives=7, dropout=False, **kwargs):
        super().__init__(encoder, **kwargs)
        if isinstance(negatives, bool) or not isinstance(negatives, (int, np.integer)):
            raise TypeError(f"negatives must be an int; got {negatives!r}.")
        if negatives < 1:
            raise ValueError(
                f"negatives (K, negative pairs per positive pair) must be >= 1; "
                f"got {negatives}."
            )
        if encoder.whitening is not None:
            raise ValueError(
                "ContrastiveTension trains the encoder's raw pooled vectors; "
                "fit whitening after training, on an encoder without it."
            )
        self.negatives = int(negatives)
        self.dropout = bool(dropout)

        # === Layers ===
        # The twin starts as a copy of the encoder: its backbone and token layer.
        backbone, token_layer = encoder.backbone, encoder.token_layer
        twin = type(backbone).from_config(backbone.get_config())
        twin.set_weights(backbone.get_weights())
        twin_token_layer = (None if token_layer is None
                            else type(token_layer).from_config(token_layer.get_config()))
        self.twin_encoder = encoder.with_changes(
            backbone=twin, preprocessor=None, token_layer=twin_token_layer,
            hidden_dropout=encoder.hidden_dropout, name="twin_encoder")
        if token_layer is not None:
            twin_token_layer.set_weights(token_layer.get_weights())
        self.objective_loss = ContrastiveTensionLoss()

    def call(self, inputs, training=None):
        given = inputs["token_ids"].shape
        if len(given) != 3 or given[1] != 2:
            raise ValueError(
                "ContrastiveTension trains on sentence pairs: token arrays of "
                f"shape (batch, 2, length); got {given}."
            )
        first = {key: value[:, 0] for key, value in inputs.items()}
        second = {key: value[:, 1] for key, value in inputs.items()}
        return ops.stack(
            [
                self.twin_encoder(first, training=training),
                self.encoder(second, training=training),
            ],
            axis=1,
        )

    def pair_draws(self, sentences, batch_size=16, steps_per_epoch=None):
        """`(draw, rows)`: the pairs of every epoch `fit` trains on, as indices.

        Each call of `draw()` draws one epoch, `rows = steps_per_epoch *
        batch_size` pairs `(first, second, labels)` of
        `contrastive_tension_pairs`, from one `numpy.random.RandomState`,
        seeded here by `random.randrange(2**32)`. `steps_per_epoch`
        defaults to `ceil(len(sentences) / batch_size)`.
        """
        sentences = check_texts(sentences, "x")
        batch_size = check_count(batch_size, "batch_size")
        group = self.negatives + 1
        if len(set(sentences)) < 2:
            raise ValueError(
                "ContrastiveTension needs at least 2 distinct sentences (a "
                f"negative pair is two different ones); got {len(sentences)} "
                f"sentence(s), {len(set(sentences))} distinct."
            )
        if batch_size % group:
            raise ValueError(
                f"batch_size counts sentence pairs, groups of 1 positive and "
                f"negatives={self.negatives} negative pairs, so it must be a "
                f"multiple of {group}; got {batch_size}."
            )
        if steps_per_epoch is None:
            steps_per_epoch = math.ceil(len(sentences) / batch_size)
        steps_per_epoch = check_count(steps_per_epoch, "steps_per_epoch")
        rows = steps_per_epoch * batch_size
        rng = np.random.RandomState(random.randrange(2**32))
        count, groups, negatives = len(sentences), rows // group, self.negatives
        return lambda: contrastive_tension_pairs(count, groups, negatives, rng), rows

    def pair_dataset(self, sentences, batch_size=16, steps_per_epoch=None):
        """The batches `fit` trains on with TensorFlow: a `tf.data.Dataset`
        of `((first, second), labels)` strings, each iteration (epoch) a new
        draw of `pair_draws`."""
        draw, rows = self.pair_draws(sentences, batch_size, steps_per_epoch)

        def epoch():
            yield draw()

        import tensorflow as tf

        texts = tf.constant(sentences)
        spec = tf.TensorSpec((rows,), tf.int64)
        dataset = tf.data.Dataset.from_generator(
            epoch, output_signature=(spec, spec, tf.TensorSpec((rows,), tf.float32))
        ).unbatch()
        dataset = dataset.map(
            lambda a, b, label: ((tf.gather(texts, a), tf.gather(texts, b)), label)
        )
        return dataset.apply(tf.data.experimental.assert_cardinality(rows)).batch(
            batch_size, drop_remainder=True
        )

    def fit(self, x=None, y=None, batch_size=16, steps_per_epoch=None,
            callbacks=None, **kwargs):
        """Trains both models on pairs drawn from the sentences `x`.

        `x` is an in-memory list of strings; `batch_size` counts sentence
        pairs (a multiple of `negatives + 1`); an epoch is
        `steps_per_epoch` batches, drawn afresh (`pair_draws`: strings in a
        `tf.data.Dataset`, `pair_dataset`, where TensorFlow can be imported;
        else the sentences are tokenised once and the pairs gathered as
        numpy token arrays, `token_batches.DrawnPairBatches`). `shuffle`
        is ignored: every batch is drawn at random. Other arguments are
        `keras.Model.fit`'s.
        """
        if y is not None:
            raise ValueError(
                "ContrastiveTension trains on unlabelled sentences; it makes "
                "its own pair labels. Pass y=None."
            )
        if isinstance(x, (tuple, dict)) or is_tf_dataset(x):
            raise TypeError(
                "ContrastiveTension.fit takes an in-memory list of sentences "
                f"(strings); got {type(x).__name__}."
            )
        check_count(kwargs.get("epochs", 1), "epochs")
        kwargs.pop("shuffle", None)
        sentences = check_texts(x, "x")
        if tensorflow_importable():
            batches = self.pair_dataset(sentences, batch_size, steps_per_epoch)
        else:  # Tokenised once, as `EncoderObjective.fit` does without TensorFlow.
            draw, _ = self.pair_draws(sentences, batch_size, steps_per_epoch)
            batches = DrawnPairBatches(
                token_arrays(self.preprocessor, sentences), draw, batch_size,
                self._batch_lengths(),
            )
        # Truncation warning, multi-process checks and the used token ids.
        _, used_ids = self._check_in_memory(sentences, batch_size)
        self.twin_encoder.train_used_layers_only()
        with contextlib.ExitStack() as context:
            if self.rematerialize:
                context.enter_context(recomputed_blocks(self.twin_encoder.backbone))
            if not self.dropout:
                context.enter_context(
                    _without_dropout(self.encoder.backbone, self.twin_encoder.backbone)
                )
            return self._fit_batches(batches, None, None, used_ids, callbacks, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update({"negatives": self.negatives, "dropout": self.dropout})
        return config
