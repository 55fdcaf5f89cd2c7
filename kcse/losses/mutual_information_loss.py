"""IS-BERT's loss: the Jensen–Shannon estimate of local–global mutual information."""

import math

import keras
from keras import ops

from kcse.distribution.cross_replica import gather_across_replicas
from kcse.distribution.cross_replica import global_mean_weight
from kcse.losses.self_guided_loss import own_rows

LOG_2 = math.log(2.0)


@keras.saving.register_keras_serializable(package="kcse")
class MutualInformationLoss(keras.losses.Loss):
    """IS-BERT's objective (Zhang et al., EMNLP 2020): maximise the mutual
    information between each sentence vector and its own tokens' local
    features, estimated with the Jensen–Shannon bound of DIM.

    `y_pred` is `{"local": (batch, length, dim), "global": (batch, dim),
    "mask": (batch, length)}`: each token's features, each sentence's
    vector and which tokens are real. With s(t, c) the dot product of token
    t's features and sentence c's vector, N the real tokens of the batch
    and B its sentences,

        E_pos = (1 / N) Σ_t [log 2 − softplus(−s(t, own(t)))]
        E_neg = (1 / (N (B − 1))) Σ_t Σ_{c ≠ own(t)} [softplus(s(t, c)) − log 2]
        loss  = E_neg − E_pos,

    every token against every other sentence of the batch, as
    yanzhangnlp/IS-BERT `MutualInformationLoss.forward` computes it
    (`local_global_loss_` with `measure="JSD"`; nothing is shuffled).
    Under a `tf.distribute` strategy the sentence vectors and token counts
    of every replica are gathered: the loss is the global batch's.
    `y_true` is ignored (pass `None`); a batch needs two sentences.

    Example:
    ```python
    import numpy as np
    import kcse
    rng = np.random.default_rng(0)
    mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1], [1, 1, 0, 0]], bool)
    local = rng.normal(size=(3, 4, 8)).astype("float32")
    vectors = (local * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    loss = kcse.losses.MutualInformationLoss()(
        None, {"local": local, "global": vectors, "mask": mask})
    # Every score 0: E_pos = E_neg = 0.
    zeros = {"local": np.zeros((3, 4, 8), "float32"), "global": np.zeros((3, 8), "float32"),
             "mask": mask}
    float(kcse.losses.MutualInformationLoss()(None, zeros))  # 0.0
    ```
    """

    def __init__(self, reduction="sum_over_batch_size", name="mutual_information_loss",
                 dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)

    def __call__(self, y_true, y_pred, sample_weight=None):
        if y_true is None:  # Keras' reduction needs a tensor of the batch size.
            y_true = ops.zeros(ops.shape(y_pred["global"])[:1])
        return super().__call__(y_true, y_pred, sample_weight)

    def call(self, y_true, y_pred):
        local = ops.cast(y_pred["local"], "float32")
        vectors = ops.cast(y_pred["global"], "float32")
        mask = ops.cast(y_pred["mask"], "float32")
        all_vectors, offset, replicas = gather_across_replicas(vectors)
        lengths, _, _ = gather_across_replicas(ops.sum(mask, axis=1))
        batch, total = ops.shape(vectors)[0], ops.shape(all_vectors)[0]
        tokens = ops.sum(lengths)
        scores = ops.einsum("btd,cd->btc", local, all_vectors)
        own = ops.expand_dims(ops.cast(own_rows(batch, offset, total), "float32"), 1)
        real = ops.expand_dims(mask, -1)
        positive = ops.sum((LOG_2 - ops.softplus(-scores)) * own * real, axis=(1, 2))
        negative = ops.sum((ops.softplus(scores) - LOG_2) * (1.0 - own) * real, axis=(1, 2))
        pairs = ops.cast(total - 1, "float32")
        per_sentence = negative / (tokens * pairs) - positive / tokens
        # Keras averages the rows: scaled so the global batch's mean is the sum.
        share = global_mean_weight(batch, total, replicas)
        return share * ops.cast(total, "float32") * per_sentence
