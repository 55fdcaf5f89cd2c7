"""BERT's `AdamWeightDecayOptimizer`, which trains BERT-flow's flow."""

import keras
from keras import ops

# The authors' optimizer of the flow (bohanli/BERT-flow, run_siamese.py,
# README.md and optimization_bert_flow.py): BERT's AdamWeightDecayOptimizer
# at a constant --flow_learning_rate=1e-3.
LEARNING_RATE = 1e-3
WEIGHT_DECAY = 0.01
# The authors' flow loss is `mean_a + mean_b` over the two sentences of a
# pair, twice kcse's mean over the 64 vectors, so their gradient is twice
# kcse's. Their clip to global norm 1.0 and Adam epsilon 1e-6 on it are, on
# kcse's gradient, a clip to 0.5 and epsilon 5e-7: the same steps exactly
# (`2m / (2 sqrt(v) + eps) = m / (sqrt(v) + eps / 2)`).
GLOBAL_CLIPNORM = 0.5
ADAM_EPSILON = 5e-7


@keras.saving.register_keras_serializable(package="kcse")
class AdamWeightDecay(keras.optimizers.Adam):
    """BERT's `AdamWeightDecayOptimizer`, which trains BERT-flow's flow.

    As in bohanli/BERT-flow's `optimization_bert_flow.py` (the
    `flow_optimizer`): Adam without bias correction,
    `p -= lr * (m / (sqrt(v) + epsilon) + weight_decay * p)`, with
    `m`, `v` the plain moving averages of the gradient and its square, the
    gradient first clipped to a global norm. Keras' base optimizer applies
    the decoupled decay `p -= lr * weight_decay * p` before the update, the
    same step. The authors exclude from the decay the variables named
    LayerNorm / layer_norm / bias, which no flow variable is. The defaults
    are the authors' (`global_clipnorm` and `epsilon` halved for kcse's
    loss, half theirs: see `GLOBAL_CLIPNORM`); Keras' `Adam` would differ
    by its bias correction, which makes the first hundreds of steps (the
    whole of 1 epoch on STS-B) about 3 times smaller.
    """

    def __init__(
        self,
        learning_rate=LEARNING_RATE,
        weight_decay=WEIGHT_DECAY,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=ADAM_EPSILON,
        global_clipnorm=GLOBAL_CLIPNORM,
        name="adam_weight_decay",
        **kwargs,
    ):
        if kwargs.pop("amsgrad", False):
            raise ValueError("AdamWeightDecay has no amsgrad variant.")
        super().__init__(
            learning_rate=learning_rate,
            beta_1=beta_1,
            beta_2=beta_2,
            epsilon=epsilon,
            weight_decay=weight_decay,
            global_clipnorm=global_clipnorm,
            name=name,
            **kwargs,
        )

    def update_step(self, gradient, variable, learning_rate):
        lr = ops.cast(learning_rate, variable.dtype)
        gradient = ops.cast(gradient, variable.dtype)
        m = self._momentums[self._get_variable_index(variable)]
        v = self._velocities[self._get_variable_index(variable)]
        self.assign_add(m, ops.multiply(gradient - m, 1 - self.beta_1))
        self.assign_add(
            v, ops.multiply(ops.square(gradient) - v, 1 - self.beta_2)
        )
        self.assign_sub(
            variable, lr * m / (ops.sqrt(v) + self.epsilon)
        )
