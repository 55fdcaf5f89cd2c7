"""SG-OPT's contrastive loss: a sentence vector against every layer's pivots."""

import keras
from keras import ops

from kcse.distribution.cross_replica import gather_across_replicas
from kcse.distribution.cross_replica import global_mean_weight
from kcse.losses.label_free_loss import LabelFreeLoss
from kcse.losses.self_guided_variants import VARIANTS
from kcse.foundation.validation import check_number


def own_rows(batch, offset, total):
    """`(batch, total)` booleans: row i of this replica's batch is row
    `offset + i` of the gathered global batch."""
    rows = ops.arange(batch, dtype="int32") + offset
    return ops.equal(
        ops.expand_dims(rows, 1),
        ops.expand_dims(ops.arange(total, dtype="int32"), 0),
    )


@keras.saving.register_keras_serializable(package="kcse")
class SelfGuidedLoss(LabelFreeLoss):
    """SG-OPT's losses (Kim et al., ACL 2021): L^opt3, and L^base, L^opt1 and
    L^opt2 of its ablation (`variant`).

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

    The ablation's variants compare each sentence vector with one pivot h_i
    (one layer drawn per sentence, `kcse.SGOpt` draws it): `y_pred` has
    shape `(batch, 2, dim)`. With c_i's negatives over the other sentences
    j ≠ i,

        L^opt2_i = −log φ(c_i, h_i) / Σ_j φ(c_i, h_j),
        L^opt1_i = −log φ(c_i, h_i) / (Σ_{j≠i} φ(c_i, c_j) + Σ_j φ(c_i, h_j)),

    and L^base is NT-Xent over the 2b vectors {c_i} ∪ {h_i}: each one's
    positive is its partner, every other vector is in its denominator, and
    the loss is the mean over all 2b (a sentence's share is the mean of its
    c_i's and its h_i's terms). The authors' code differs in two places
    that kcse does not copy (galsang/SG-BERT `loss.py`): `NTXentLossOpt2`
    slices one negative too many off each row, and `NTXentLossOriginal`
    passes b labels for its 2b rows.

    Args:
        temperature: float. τ; SG-OPT's by default (the method registry's,
            `kcse.experiments.methods.sg_opt.PAPER_SETTINGS`, with its source).
        variant: `"opt3"` (SG-OPT, default), `"opt2"`, `"opt1"` or `"base"`
            (SG).

    Example:
    ```python
    import numpy as np
    import kcse

    vectors = np.random.rand(4, 1 + 13, 32).astype("float32")
    loss = kcse.losses.SelfGuidedLoss(temperature=0.01)(None, vectors)  # a scalar

    # All vectors equal: each positive against the 3 · 13 other sentences' pivots.
    same = np.ones((4, 1 + 13, 32), "float32")
    float(kcse.losses.SelfGuidedLoss()(None, same))  # 3.689 = ln(1 + 39)

    # The ablation's L^opt2: each sentence vector with one pivot, against
    # all 4 pivots: ln 4.
    float(kcse.losses.SelfGuidedLoss(variant="opt2")(None, same[:, :2]))  # 1.386
    ```
    """

    def __init__(
        self,
        temperature=0.01,
        variant="opt3",
        reduction="sum_over_batch_size",
        name="self_guided_loss",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        temperature = check_number(temperature, "temperature", above=0)
        if variant not in VARIANTS:
            raise ValueError(
                f"variant must be one of {', '.join(VARIANTS)}; got {variant!r}."
            )
        self.temperature = temperature
        self.variant = variant

    def call(self, y_true, y_pred):
        if len(y_pred.shape) != 3 or y_pred.shape[1] < 2:
            raise ValueError(
                "SelfGuidedLoss expects y_pred of shape (batch, 1 + layers, "
                f"dim): a sentence vector, then its pivots; got {y_pred.shape}."
            )
        if self.variant != "opt3" and y_pred.shape[1] != 2:
            raise ValueError(
                f"SelfGuidedLoss(variant={self.variant!r}) compares each "
                "sentence vector with one pivot: y_pred of shape (batch, 2, "
                f"dim); got {y_pred.shape}."
            )
        vectors = ops.normalize(ops.cast(y_pred, "float32"), axis=-1)
        sentences, pivots = vectors[:, 0], vectors[:, 1:]
        if self.variant != "opt3":
            return self._one_pivot_loss(sentences, pivots[:, 0])
        keys, offset, replicas = gather_across_replicas(pivots)
        batch, total = ops.shape(pivots)[0], ops.shape(keys)[0]
        # logits[i, m, n] = cos(c_i, h_{m,n}) / τ.
        logits = ops.einsum("id,mnd->imn", sentences, keys) / self.temperature
        own = own_rows(batch, offset, total)
        positives = ops.einsum("id,ind->in", sentences, pivots) / self.temperature
        others = ops.where(ops.expand_dims(own, -1), -1e9, logits)
        negatives = ops.logsumexp(ops.reshape(others, (batch, -1)), axis=-1)
        per_pivot = ops.logaddexp(positives, ops.expand_dims(negatives, -1)) - positives
        share = global_mean_weight(batch, total, replicas)
        return share * ops.mean(per_pivot, axis=-1)

    def _one_pivot_loss(self, sentences, pivots):
        """L^opt2, L^opt1 or L^base of each sentence, with its pivot h_i."""
        all_pivots, offset, replicas = gather_across_replicas(pivots)
        batch, total = ops.shape(pivots)[0], ops.shape(all_pivots)[0]
        own = own_rows(batch, offset, total)

        def logits(anchors, keys, leave_out_own=False):
            values = ops.matmul(anchors, ops.transpose(keys)) / self.temperature
            return ops.where(own, -1e9, values) if leave_out_own else values

        positives = ops.sum(sentences * pivots, axis=-1) / self.temperature
        to_pivots = logits(sentences, all_pivots)  # h_i's positive among them.
        if self.variant == "opt2":
            per_sentence = ops.logsumexp(to_pivots, axis=-1) - positives
        else:
            all_sentences, _, _ = gather_across_replicas(sentences)
            to_sentences = logits(sentences, all_sentences, leave_out_own=True)
            per_sentence = ops.logsumexp(
                ops.concatenate([to_pivots, to_sentences], axis=-1), axis=-1
            ) - positives
            if self.variant == "base":  # h_i is an anchor too.
                from_pivots = ops.logsumexp(ops.concatenate([
                    logits(pivots, all_sentences),
                    logits(pivots, all_pivots, leave_out_own=True),
                ], axis=-1), axis=-1) - positives
                per_sentence = (per_sentence + from_pivots) / 2
        return global_mean_weight(batch, total, replicas) * per_sentence

    def get_config(self):
        config = super().get_config()
        config.update({"temperature": self.temperature, "variant": self.variant})
        return config
