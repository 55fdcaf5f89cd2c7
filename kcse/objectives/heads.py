"""Dense heads of the objectives, drawn as the authors' torch code draws them.

BERT's `_init_weights` (HF transformers, `BertPreTrainedModel`), which
princeton-nlp/SimCSE's `cl_init` and galsang/SG-BERT's `Loss` apply to their
new `nn.Linear` layers, draws weights from normal(0, `initializer_range`),
untruncated, and sets biases to zero.

Example:
```python
from kcse.objectives.heads import bert_dense

mlp = bert_dense(16, "tanh", name="mlp")  # SimCSE's MLPLayer
mlp.build((None, 16))
```
"""

import keras

# BERT's `initializer_range` (every config SimCSE and SG-BERT train).
INITIALIZER_RANGE = 0.02


def bert_dense(units, activation=None, name=None):
    """`nn.Linear(…, units)` (+ `activation`) as BERT's `_init_weights`
    draws it: normal(0, 0.02) kernel, zero bias."""
    return keras.layers.Dense(
        units,
        activation=activation,
        kernel_initializer=keras.initializers.RandomNormal(
            mean=0.0, stddev=INITIALIZER_RANGE
        ),
        bias_initializer="zeros",
        name=name,
    )
