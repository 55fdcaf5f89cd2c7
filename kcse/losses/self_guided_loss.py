"""SG-OPT's contrastive loss: a sentence vector against every layer's pivots."""

import keras
from keras import ops

from kcse.distribution.cross_replica import gather_across_replicas
from kcse.distribution.cross_replica import global_mean_weight
from kcse.losses.label_free_loss import LabelFreeLoss


@keras.saving.register_keras_serializable(package="kcse")
class SelfGuidedLoss(LabelFreeLoss):
    """L^opt3 of Self-Guided Contrastive Learning (Kim et al., ACL 2021).

    `y_pred` has shape `(batch, 1 + layers, dim)`: row `[:, 0]` is each
    sentence's trained vector c_i, rows `[:, 1:]` its pivots h_{i,0..l}
    (the frozen model's pooled states of every layer), all already through
    the projection head. With φ(u, v) = exp(cos(u, v) / τ),

        L_{i,k} = −log φ(c_i, h_{i,k})
                  / (φ(c_i, h_{i,k}) + Σ_{m≠i} Σ_n φ(c_i, h_{m,n})),

    and a sentence's loss is the mean over its k = 0..l, so the reduced loss
    is (1 / b(l+1)) Σ_i Σ_k L_{i,k}: its own pivots are positives one at a
    time, every pivot of every other sentence a negative, and there are no
    c–c terms. Under a `tf.distribute` strategy the pivots of every replica
    are gathered. `y_true` is ignored (pass `None`).

    Args:
        temperature: float. τ, 0.01 in SG-OPT.

    Example:
    ```python
    import numpy as np
    import kcse

    vectors = np.random.rand(4, 1 + 13, 32).astype("float32")
    loss = kcse.losses.SelfGuidedLoss(temperature=0.01)(None, vectors)  # a scalar

    # All vectors equal: each positive against the 3 · 13 other sentences' pivots.
    same = np.ones((4, 1 + 13, 32), "float32")
    float(kcse.losses.SelfGuidedLoss()(None, same))  # 3.689 = ln(1 + 39)
    ```
    """

    def __init__(
        self,
        temperature=0.01,
        reduction="sum_over_batch_size",
        name="self_guided_loss",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0; got {temperature}.")
        self.temperature = temperature

    def call(self, y_true, y_pred):
        if len(y_pred.shape) != 3 or y_pred.shape[1] < 2:
            raise ValueError(
                "SelfGuidedLoss expects y_pred of shape (batch, 1 + layers, "
                f"dim): a sentence vector, then its pivots; got {y_pred.shape}."
            )
        vectors = ops.normalize(ops.cast(y_pred, "float32"), axis=-1)
        sentences, pivots = vectors[:, 0], vectors[:, 1:]
        keys, offset, replicas = gather_across_replicas(pivots)
        batch, total = ops.shape(pivots)[0], ops.shape(keys)[0]
        # logits[i, m, n] = cos(c_i, h_{m,n}) / τ.
        logits = ops.einsum("id,mnd->imn", sentences, keys) / self.temperature
        rows = ops.arange(batch, dtype="int32") + offset
        own = ops.equal(
            ops.expand_dims(rows, 1),
            ops.expand_dims(ops.arange(total, dtype="int32"), 0),
        )
        positives = ops.einsum("id,ind->in", sentences, pivots) / self.temperature
        others = ops.where(ops.expand_dims(own, -1), -1e9, logits)
        negatives = ops.logsumexp(ops.reshape(others, (batch, -1)), axis=-1)
        per_pivot = ops.logaddexp(positives, ops.expand_dims(negatives, -1)) - positives
        share = global_mean_weight(batch, total, replicas)
        return share * ops.mean(per_pivot, axis=-1)

    def get_config(self):
        config = super().get_config()
        config.update({"temperature": self.temperature})
        return config
