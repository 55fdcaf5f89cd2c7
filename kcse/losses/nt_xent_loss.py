"""ConSERT's NT-Xent: the two directions of the 2N-view contrast, summed."""

import keras

from kcse.losses.simcse_loss import SimCSELoss


@keras.saving.register_keras_serializable(package="kcse")
class NTXentLoss(SimCSELoss):
    """NT-Xent as ConSERT computes it (Yan et al., 2021; SimCLR's loss).

    `y_pred` holds two views per sentence, shape `(batch, 2, dim)`. Each
    view is L2-normalised; view 1 of sentence i is a query against view 2
    of every sentence (its positive is its own) and view 1 of every other
    sentence, so 2N−2 negatives, and likewise for view 2. The loss is the
    cross-entropy of the view-1 queries **plus** that of the view-2 queries
    (yym6472/ConSERT, `sentence_transformers/losses/AdvCLSoftmaxLoss.py`,
    `_contrastive_loss_forward`: `loss = loss_a + loss_b`), each a mean over
    the batch, i.e. twice `kcse.losses.SimCSELoss(negatives="both_views")`,
    which averages the two. The sum is what ConSERT's loss weight `cl_rate`
    (`kcse.ConSERT`'s `contrastive_weight`) multiplies. Under a
    `tf.distribute` strategy the views of every replica are gathered.
    `y_true` is ignored (pass `None`).

    Args:
        temperature: float. ConSERT's by default (the method registry's,
            `kcse.experiments.methods.consert.PAPER_SETTINGS`, with its
            source).

    Example:
    ```python
    import numpy as np
    import kcse

    views = np.random.rand(8, 2, 16).astype("float32")
    loss = kcse.losses.NTXentLoss(temperature=0.1)(None, views)  # a scalar

    same = np.ones((8, 2, 16), "float32")  # all vectors equal: 2 ln(2N - 1)
    float(kcse.losses.NTXentLoss()(None, same))  # 5.416 = 2 ln(15)
    ```
    """

    def __init__(
        self,
        temperature=0.1,
        reduction="sum_over_batch_size",
        name="nt_xent_loss",
        dtype=None,
    ):
        super().__init__(
            temperature, "both_views", reduction=reduction, name=name, dtype=dtype
        )

    def call(self, y_true, y_pred):
        if len(y_pred.shape) != 3 or y_pred.shape[1] != 2:
            raise ValueError(
                "NTXentLoss expects y_pred of shape (batch, 2, dim): two "
                f"views per sentence; got {y_pred.shape}."
            )
        return 2.0 * super().call(y_true, y_pred)

    def get_config(self):
        config = super().get_config()
        del config["negatives"], config["hard_negative_weight"]
        return config
