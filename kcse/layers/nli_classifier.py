"""The NLI softmax head of SBERT and ConSERT: Dense on (r1, r2, |r1 − r2|, ...)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="kcse")
class NLIClassifier(keras.layers.Layer):
    """Logits of a sentence-pair relation from the two sentence vectors.

    `f = Concat(r1, r2, |r1 − r2|)`, logits `W f + b` (ConSERT eq. 2, SBERT's
    classification objective); train with softmax cross-entropy. With
    `max_square=True`, `max(r1, r2)²` (elementwise) is appended to `f`, as
    ConSERT's supervised scripts do (`--concatenation_sent_max_square` in
    yym6472/ConSERT `scripts/sup-consert-joint-base.sh`). Used by the
    supervised modes of `kcse.ConSERT` and dropped after training.

    Args:
        num_classes: int. 3 for NLI (entailment, neutral, contradiction, in
            `kcse.data.NLI_LABELS` order).
        max_square: bool. Append `max(r1, r2)²` to the features.

    Example:
    ```python
    import numpy as np
    import kcse
    head = kcse.layers.NLIClassifier(num_classes=3)
    logits = head(np.random.rand(4, 8), np.random.rand(4, 8))
    assert logits.shape == (4, 3)
    ```
    """

    def __init__(self, num_classes=3, max_square=False, **kwargs):
        super().__init__(**kwargs)
        self.num_classes = num_classes
        self.max_square = max_square
        self.dense = keras.layers.Dense(num_classes, name="logits")

    def build(self, first_shape, second_shape=None):
        features = 4 if self.max_square else 3
        self.dense.build((first_shape[0], features * first_shape[-1]))

    def call(self, first, second):
        features = [first, second, ops.abs(first - second)]
        if self.max_square:
            features.append(ops.square(ops.maximum(first, second)))
        return self.dense(ops.concatenate(features, axis=-1))

    def compute_output_shape(self, first_shape, second_shape=None):
        return (first_shape[0], self.num_classes)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_classes": self.num_classes, "max_square": self.max_square}
        )
        return config
