"""CoSENT: a ranking loss on the cosines of labelled sentence pairs."""

import keras
from keras import ops

from kcse.distribution.cross_replica import gather_across_replicas
from kcse.distribution.cross_replica import global_mean_weight
from kcse.foundation.validation import check_number


@keras.saving.register_keras_serializable(package="kcse")
class CoSENT(keras.losses.Loss):
    """CoSENT (Su Jianlin, 2022): pairs with higher labels get higher cosines.

    `y_pred` holds the two sentence vectors of each pair, shape
    `(batch, 2, dim)`, and `y_true` the pair labels (any scale: only their
    order counts). With `s_i = scale · cos(u_i, v_i)`, the loss of a batch is

        log(1 + Σ_{i, j: y_i > y_j} exp(s_j − s_i)),

    which is small when every pair is ranked above all pairs with lower
    labels. It is one number per batch: each pair reports it, so the
    reduced loss equals it, and sample weights scale it by their mean.
    Under a `tf.distribute` strategy the cosines and labels of every replica
    are gathered, so the ranking is over the global batch as on one device.

    Args:
        scale: float. The cosine scale λ (20 in CoSENT, i.e. temperature
            0.05).

    Example:
    ```python
    import numpy as np
    import kcse

    pairs = np.random.rand(8, 2, 16).astype("float32")
    labels = np.array([0, 1, 2, 3, 4, 5, 0, 1], "float32")
    loss = kcse.losses.CoSENT()(labels, pairs)  # a scalar

    # Three pairs with cosines 1, 0.71 and 0: cheap when the labels agree.
    u = np.array([[1, 0], [1, 0], [1, 0]], "float32")
    v = np.array([[1, 0], [1, 1], [0, 1]], "float32")
    pairs = np.stack([u, v], axis=1)  # shape (3, 2, 2)
    float(kcse.losses.CoSENT()(np.array([2.0, 1.0, 0.0]), pairs))  # 0.003
    float(kcse.losses.CoSENT()(np.array([0.0, 1.0, 2.0]), pairs))  # 20.003
    ```
    """

    def __init__(
        self,
        scale=20.0,
        reduction="sum_over_batch_size",
        name="cosent",
        dtype=None,
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        self.scale = check_number(scale, "scale", above=0)

    def call(self, y_true, y_pred):
        if len(y_pred.shape) != 3 or y_pred.shape[1] != 2:
            raise ValueError(
                "CoSENT expects y_pred of shape (batch, 2, dim), the two "
                f"vectors of each pair; got {y_pred.shape}."
            )
        pairs = ops.normalize(ops.cast(y_pred, "float32"), axis=-1)
        cosines = ops.sum(pairs[:, 0] * pairs[:, 1], axis=-1) * self.scale
        labels = ops.reshape(ops.cast(y_true, "float32"), (-1,))
        batch = ops.shape(cosines)[0]
        cosines, _, replicas = gather_across_replicas(cosines)
        labels, _, _ = gather_across_replicas(labels)
        total = ops.shape(cosines)[0]
        # differences[i, j] = s_j - s_i, kept where y_i > y_j.
        differences = ops.expand_dims(cosines, 0) - ops.expand_dims(cosines, 1)
        ranked = ops.expand_dims(labels, 1) > ops.expand_dims(labels, 0)
        differences = ops.where(ranked, differences, -1e12)
        terms = ops.concatenate([ops.zeros((1,)), ops.reshape(differences, (-1,))], 0)
        loss = ops.logsumexp(terms)
        share = global_mean_weight(batch, total, replicas)
        return ops.broadcast_to(share * loss, (batch,))

    def get_config(self):
        config = super().get_config()
        config.update({"scale": self.scale})
        return config
