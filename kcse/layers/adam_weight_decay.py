"""Adam with decoupled weight decay as BERT's and sentence-transformers'
training scripts run it, and their linear warm-up schedule."""

import math
import numbers

import keras
from keras import ops

from kcse.foundation.validation import check_count
from kcse.foundation.validation import check_number

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
# The variables sentence-transformers' `fit` exempts from weight decay,
# `no_decay = ['bias', 'LayerNorm.bias', 'LayerNorm.weight']` in Hugging
# Face's names: in Keras' names every bias and every layer norm's gamma and
# beta (matched in `variable.name`, as Keras' `exclude_from_weight_decay`).
NO_DECAY_NAMES = ("bias", "gamma", "beta")


@keras.saving.register_keras_serializable(package="kcse")
class AdamWeightDecay(keras.optimizers.Adam):
    """Adam with decoupled weight decay, with or without bias correction.

    By default BERT's `AdamWeightDecayOptimizer`, which trains BERT-flow's
    flow, as in bohanli/BERT-flow's `optimization_bert_flow.py` (the
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

    Hugging Face's `transformers.AdamW` (what sentence-transformers' `fit`
    uses) is this optimizer with `correct_bias` as `bias_correction` (with
    it, the step is Keras' `Adam`'s); it decays `p` after the update rather
    than before, a difference of `lr² · weight_decay · step`, below 1e-12 at
    the rates that train encoders. `sentence_transformers_adamw` builds it
    with its schedule.

    Args:
        bias_correction: divide the step by `1 - beta_1^t` and multiply it
            by `sqrt(1 - beta_2^t)` (Keras' `Adam`); False: BERT's.
        exclude_from_decay: names (regular expressions, searched in
            `variable.name`) of the variables not decayed.
        The others: Keras' `Adam`'s.

    Example:
    ```python
    import keras

    variable = keras.Variable([1.0, -2.0])
    optimizer = AdamWeightDecay(learning_rate=0.1, epsilon=1e-6, global_clipnorm=None)
    optimizer.apply_gradients([(keras.ops.convert_to_tensor([0.5, 0.5]), variable)])
    # m = 0.05, v = 0.00025: p - 0.1 * (m / sqrt(v) + 0.01 * p)
    [round(x, 4) for x in keras.ops.convert_to_numpy(variable).tolist()]  # [0.6828, -2.3142]
    ```
    """

    def __init__(
        self,
        learning_rate=LEARNING_RATE,
        weight_decay=WEIGHT_DECAY,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=ADAM_EPSILON,
        global_clipnorm=GLOBAL_CLIPNORM,
        bias_correction=False,
        exclude_from_decay=(),
        name="adam_weight_decay",
        **kwargs,
    ):
        if kwargs.pop("amsgrad", False):
            raise ValueError("AdamWeightDecay has no amsgrad variant.")
        if isinstance(learning_rate, (numbers.Real, str)):  # Not a schedule.
            check_number(learning_rate, "learning_rate", above=0)
        check_number(weight_decay, "weight_decay", minimum=0)
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
        self.bias_correction = bias_correction
        self.exclude_from_decay = tuple(exclude_from_decay)
        if self.exclude_from_decay:
            self.exclude_from_weight_decay(var_names=list(self.exclude_from_decay))

    def update_step(self, gradient, variable, learning_rate):
        if self.bias_correction:
            return super().update_step(gradient, variable, learning_rate)
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

    def get_config(self):
        return super().get_config() | {
            "bias_correction": self.bias_correction,
            "exclude_from_decay": list(self.exclude_from_decay),
        }


@keras.saving.register_keras_serializable(package="kcse")
class WarmupLinear(keras.optimizers.schedules.LearningRateSchedule):
    """A linear warm-up from 0, then a linear decay to 0 at `total_steps`.

    sentence-transformers' `WarmupLinear` scheduler, Hugging Face's
    `get_linear_schedule_with_warmup`: at step `t` (0 first),
    `learning_rate * t / max(1, warmup_steps)` while `t < warmup_steps`,
    then `learning_rate * max(0, (total_steps - t) / max(1, total_steps -
    warmup_steps))`.

    Example:
    ```python
    schedule = WarmupLinear(1.0, warmup_steps=2, total_steps=6)
    [float(schedule(step)) for step in range(7)]  # [0, 0.5, 1, 0.75, 0.5, 0.25, 0]
    ```
    """

    def __init__(self, learning_rate, warmup_steps, total_steps):
        self.learning_rate = check_number(learning_rate, "learning_rate", above=0)
        self.warmup_steps = check_count(warmup_steps, "warmup_steps", minimum=0)
        self.total_steps = check_count(total_steps, "total_steps")

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warmup = step / max(1, self.warmup_steps)
        decay = (self.total_steps - step) / max(1, self.total_steps - self.warmup_steps)
        factor = ops.where(step < self.warmup_steps, warmup, ops.maximum(decay, 0.0))
        return self.learning_rate * factor

    def get_config(self):
        return {"learning_rate": self.learning_rate, "warmup_steps": self.warmup_steps,
                "total_steps": self.total_steps}


def sentence_transformers_adamw(learning_rate, samples, epochs, batch_size,
                                beta_2=0.999, bias_correction=False, epsilon=1e-6):
    """The optimizer of a script training with sentence-transformers' `fit`.

    `transformers.AdamW` (`epsilon`, 1e-6 by default) with weight decay 0.01 on all but
    biases and layer norms (`NO_DECAY_NAMES`), gradients clipped to global
    norm 1 (`max_grad_norm=1`), at `WarmupLinear` from `learning_rate` over
    `epochs` of `samples` in batches of `batch_size`: `ceil(samples / batch)`
    steps an epoch, the first `ceil(samples * epochs / batch * 0.1)` warming
    up, as yym6472/ConSERT's `main.py` and galsang/SG-BERT's `training.py`
    count them. `beta_2`, `bias_correction` (`correct_bias`) and `epsilon`
    are the scripts': ConSERT 0.999, False and 1e-6, SG-BERT 0.9, True and
    1e-6, IS-BERT 0.999, False and 1e-7.

    Example:
    ```python
    optimizer = sentence_transformers_adamw(2e-5, samples=1000, epochs=1, batch_size=96)
    optimizer.learning_rate  # warm-up: 0 at step 0 of 11 (2 warming up)
    ```
    """
    for value, name in ((samples, "samples"), (epochs, "epochs"), (batch_size, "batch_size")):
        check_count(value, name)
    schedule = WarmupLinear(
        learning_rate,
        warmup_steps=math.ceil(samples * epochs / batch_size * 0.1),
        total_steps=math.ceil(samples / batch_size) * epochs,
    )
    return AdamWeightDecay(
        schedule, weight_decay=0.01, beta_2=beta_2, epsilon=epsilon, global_clipnorm=1.0,
        bias_correction=bias_correction, exclude_from_decay=NO_DECAY_NAMES,
    )
