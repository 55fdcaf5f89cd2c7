"""A Keras loss that needs no labels."""

import keras
from keras import ops


class LabelFreeLoss(keras.losses.Loss):
    """Base of contrastive losses: `y_true` may be None (it is ignored).

    Keras' reduction and sample weighting need a tensor for `y_true`; this
    passes zeros of the batch size in its place.
    """

    def __call__(self, y_true, y_pred, sample_weight=None):
        if y_true is None:
            y_true = ops.zeros(ops.shape(y_pred)[:1])
        return super().__call__(y_true, y_pred, sample_weight)
