"""The SimCSE (InfoNCE / NT-Xent) contrastive loss over in-batch negatives."""

import keras
from keras import ops

from kcse.distribution.cross_replica import gather_across_replicas
from kcse.distribution.cross_replica import global_mean_weight
from kcse.losses.label_free_loss import LabelFreeLoss
from kcse.foundation.validation import check_number

NEGATIVES = ("both_views", "cross_view")


@keras.saving.register_keras_serializable(package="kcse")
class SimCSELoss(LabelFreeLoss):
    """Contrastive loss between two views of each sentence.

    `y_pred` holds two views per sentence, shape `(batch, 2, dim)` (for
    unsupervised SimCSE, two dropout passes of the same sentence). With
    `z = y_pred` L2-normalised, the logits are cosine similarities divided
    by `temperature` and each query's positive is the other view of its own
    sentence. `negatives` chooses the candidates:

    - `"both_views"` (Su Jianlin / bojone, ConSERT's NT-Xent): both views of
      every sentence are queries, against all 2N rows but themselves, so
      each query has 2N−2 negatives. The loss of a sentence is the mean of
      its two views' cross-entropies.
    - `"cross_view"` (princeton-nlp/SimCSE): view 1 queries view 2 of every
      sentence, N−1 negatives.

    Supervised SimCSE passes a third view, the hard negatives, shape
    `(batch, 3, dim)` with `"cross_view"`: view 1 (anchor) then also
    queries view 3 of every sentence, as princeton-nlp does, and
    `hard_negative_weight` is added to the logit of its own hard negative
    (after the temperature; 0 in the paper).

    With all vectors equal, the loss is ln(2N−1), ln(N) and ln(2N)
    respectively. Under a `tf.distribute` strategy the views of every
    replica are gathered, so N is the global batch size, and the reduced
    loss is the mean over the global batch even when replicas hold unequal
    shares. `y_true` is ignored (pass `None`); the loss is reduced over
    sentences as any Keras loss.

    Args:
        temperature: float. Softmax temperature; SimCSE's by default (the
            method registry's, `kcse.experiments.methods.simcse.PAPER_SETTINGS`,
            with its source).
        negatives: `"both_views"` or `"cross_view"`.
        hard_negative_weight: float. Added to each anchor's logit for its
            own hard negative (third view only).

    Example:
    ```python
    import numpy as np
    import kcse

    views = np.random.rand(8, 2, 16).astype("float32")
    loss = kcse.losses.SimCSELoss(temperature=0.05)(None, views)  # a scalar
    triplets = np.random.rand(8, 3, 16).astype("float32")
    loss = kcse.losses.SimCSELoss(negatives="cross_view")(None, triplets)

    same = np.ones((8, 2, 16), "float32")  # all vectors equal: ln(2N - 1)
    float(kcse.losses.SimCSELoss()(None, same))  # 2.708 = ln(15)
    ```
    """

    def __init__(
        self,
        temperature=0.05,
        negatives="both_views",
        hard_negative_weight=0.0,
        reduction="sum_over_batch_size",
        name="simcse_loss",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        if negatives not in NEGATIVES:
            raise ValueError(
                f"negatives must be one of {NEGATIVES}; got {negatives!r}."
            )
        self.temperature = check_number(temperature, "temperature", above=0)
        self.negatives = negatives
        self.hard_negative_weight = check_number(hard_negative_weight, "hard_negative_weight")

    def call(self, y_true, y_pred):
        if len(y_pred.shape) != 3 or y_pred.shape[1] not in (2, 3):
            raise ValueError(
                "SimCSELoss expects y_pred of shape (batch, 2, dim), or "
                f"(batch, 3, dim) with hard negatives; got {y_pred.shape}."
            )
        with_hard_negatives = y_pred.shape[1] == 3
        if with_hard_negatives and self.negatives != "cross_view":
            raise ValueError(
                "Hard negatives (a third view) need negatives='cross_view', "
                "as in supervised SimCSE."
            )
        views = ops.normalize(ops.cast(y_pred, "float32"), axis=-1)
        keys, offset, replicas = gather_across_replicas(views)
        batch = ops.shape(views)[0]
        total = ops.shape(keys)[0]
        share = global_mean_weight(batch, total, replicas)
        rows = ops.arange(batch, dtype="int32") + offset
        if self.negatives == "cross_view":
            logits = ops.matmul(views[:, 0], ops.transpose(keys[:, 1]))
            logits = logits / self.temperature
            if with_hard_negatives:
                hard = ops.matmul(views[:, 0], ops.transpose(keys[:, 2]))
                own = ops.equal(
                    ops.expand_dims(rows, 1),
                    ops.expand_dims(ops.arange(total, dtype="int32"), 0),
                )
                hard = hard / self.temperature + self.hard_negative_weight * (
                    ops.cast(own, hard.dtype)
                )
                logits = ops.concatenate([logits, hard], axis=1)
            return share * _cross_entropy(logits, rows)
        # Keys and queries are ordered view-major: [all view 1; all view 2].
        keys = ops.concatenate([keys[:, 0], keys[:, 1]], axis=0)
        queries = ops.concatenate([views[:, 0], views[:, 1]], axis=0)
        logits = ops.matmul(queries, ops.transpose(keys)) / self.temperature
        own = ops.concatenate([rows, rows + total], axis=0)
        positive = ops.concatenate([rows + total, rows], axis=0)
        is_self = ops.equal(
            ops.expand_dims(own, 1),
            ops.expand_dims(ops.arange(2 * total, dtype="int32"), 0),
        )
        logits = ops.where(is_self, -1e9, logits)
        per_view = _cross_entropy(logits, positive)
        return share * (per_view[:batch] + per_view[batch:]) / 2.0

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "temperature": self.temperature,
                "negatives": self.negatives,
                "hard_negative_weight": self.hard_negative_weight,
            }
        )
        return config


def _cross_entropy(logits, labels):
    return keras.losses.sparse_categorical_crossentropy(
        labels, logits, from_logits=True
    )
