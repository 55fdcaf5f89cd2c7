"""A Keras callback that scores an encoder on an STS dev set during training."""

import math
import warnings

import keras

from kcse.evaluation.sts import as_sentence_pairs
from kcse.evaluation.sts import check_scorable
from kcse.evaluation.sts import UndefinedCorrelationError
from kcse.evaluation.sts import evaluate_sts
from kcse.foundation.validation import TruncationWarning
from kcse.foundation.validation import check_count
from kcse.models.weight_snapshot import WeightSnapshot


class STSEvaluator(keras.callbacks.Callback):
    """Evaluates a sentence encoder on STS pairs while a model trains.

    The encoder is scored before training (step 0, the baseline), at the
    end of every epoch and, with `every_n_steps`, every that many training
    steps. The Spearman (×100) is
    logged as `"{name}_spearman"` (default `"val_spearman"`): it shows in the
    progress bar, in `History`, and for callbacks after this one (e.g.
    `EarlyStopping(monitor="val_spearman", mode="max")`). `history` keeps
    every `(epoch, step, spearman)` scored; `best_step` is the step that
    scored best (0: before training).

    The pairs are checked when the callback is made: `ValueError` for fewer
    than 2 pairs, sides and scores of different lengths, or gold scores all
    equal (`TypeError`/`ValueError` for bad arguments, naming them). Dev
    sentences longer than the preprocessor's maximum length give one
    `TruncationWarning`, at the first evaluation only. A step whose cosines
    are all equal or not finite (a collapsed encoder) scores NaN and is
    never kept as the best.

    Args:
        encoder: the `kcse.SentenceEncoder` being trained (for SimCSE, the
            encoder the `kcse.SimCSE` model wraps).
        pairs: dev pairs: a path, `kcse.data.SentencePairs`, or
            `(sentences1, sentences2, scores)`.
        every_n_steps: int or None. Also evaluate every that many steps.
        batch_size: int. Encoding batch size.
        restore_best_weights: bool. At the end of training, put back the
            encoder weights that scored best (the initial ones included).
            They are kept on disk, in `best_weights` (a
            `kcse.models.weight_snapshot.WeightSnapshot` in a temporary folder),
            not in memory: a copy of e5-small's weights is 0.47 GB.
        name: str. Prefix of the logged metric.

    Example:

    A tiny random encoder and dev set (a real run passes a dev file such as
    `STS-B/STS-B.valid.data`); `run_eagerly=True` only skips graph tracing
    for this toy run.

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
    simcse = kcse.SimCSE(encoder)
    simcse.compile(optimizer=keras.optimizers.Adam(1e-4), run_eagerly=True)
    dev_pairs = (["the cat sat", "a dog ran", "the cat ran"],
                 ["a cat sat", "the dog sat", "a dog"], [5.0, 3.0, 0.0])
    evaluator = kcse.evaluation.STSEvaluator(
        encoder, dev_pairs, every_n_steps=1, restore_best_weights=True,
    )
    history = simcse.fit(["the cat sat", "a dog ran", "the dog sat", "a cat ran"],
                         batch_size=2, epochs=1, verbose=0, callbacks=[evaluator])
    [step for _, step, _ in evaluator.history]  # [0, 1, 2]: before training, then each step
    evaluator.best_step, evaluator.best_spearman  # e.g. (0, 50.0); those weights are back
    history.history["val_spearman"]  # the epoch's last score, e.g. [50.0]
    ```
    """

    def __init__(
        self,
        encoder,
        pairs,
        every_n_steps=None,
        batch_size=64,
        restore_best_weights=False,
        name="val",
    ):
        super().__init__()
        if every_n_steps is not None:
            every_n_steps = check_count(every_n_steps, "every_n_steps")
        self.encoder = encoder
        self.pairs = as_sentence_pairs(pairs)
        check_scorable(self.pairs)
        self.every_n_steps = every_n_steps
        self.batch_size = check_count(batch_size, "batch_size")
        self.restore_best_weights = restore_best_weights
        self.metric_name = f"{name}_spearman"
        self.history = []
        self.best_spearman = None
        self.best_step = None
        self.best_weights = None
        self._epoch = 0
        self._step = 0
        self._last = None

    def on_train_begin(self, logs=None):
        self._evaluate()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        self._step += 1
        if self.every_n_steps and self._step % self.every_n_steps == 0:
            self._evaluate()
        if logs is not None and self._last is not None:
            logs[self.metric_name] = self._last

    def on_epoch_end(self, epoch, logs=None):
        if not self.history or self.history[-1][1] != self._step:
            self._evaluate()
        if logs is not None:
            logs[self.metric_name] = self._last

    def on_train_end(self, logs=None):
        if self.restore_best_weights and self.best_weights is not None:
            self.best_weights.restore()

    def _evaluate(self):
        # Reading `self.model` syncs the JAX training state into the
        # variables the encoder reads.
        _ = self.model
        with warnings.catch_warnings():
            if self.history:  # Truncation was reported at the first one.
                warnings.simplefilter("ignore", TruncationWarning)
            try:
                spearman = evaluate_sts(self.encoder, self.pairs, self.batch_size)[
                    "spearman"
                ]
            except UndefinedCorrelationError:  # Collapsed: never the best.
                spearman = math.nan
        self.history.append((self._epoch, self._step, spearman))
        self._last = spearman
        if not math.isnan(spearman) and (
            self.best_spearman is None or spearman > self.best_spearman
        ):
            self.best_spearman = spearman
            self.best_step = self._step
            if self.restore_best_weights:
                if self.best_weights is None:
                    self.best_weights = WeightSnapshot(self.encoder.weights)
                else:
                    self.best_weights.take()
