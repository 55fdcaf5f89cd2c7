"""BERT-flow (Li et al., EMNLP 2020): a Glow flow over sentence vectors."""

import math

import keras
import numpy as np
import scipy.linalg
from keras import ops

from kcse.foundation import progress
from kcse.foundation.compilation import on_accelerator
from kcse.layers.adam_weight_decay import AdamWeightDecay
from kcse.layers.adam_weight_decay import LEARNING_RATE
from kcse.foundation.training_stops import NonFiniteLossError
from kcse.foundation.training_stops import StopOnInterrupt
from kcse.foundation.training_stops import StopOnNonFiniteLoss
from kcse.foundation.validation import check_count
from kcse.foundation.validation import check_dtype_available
from kcse.foundation.validation import check_finite
from kcse.foundation.validation import check_number
from kcse.foundation.validation import largest_magnitude

# The authors' training of the flow (bohanli/BERT-flow, run_siamese.py and
# README.md): BERT frozen, the flow alone trained by maximum likelihood for
# 1 epoch (README, --num_train_epochs=1.0), 32 sentence pairs (64 vectors) a
# step (--train_batch_size 32), by BERT's optimizer at a constant learning
# rate (`kcse.layers.adam_weight_decay`).
BATCH_SIZE = 64
EPOCHS = 1
# glow_ops_1x1.py: actnorm and the zero-initialised convolution optimise
# `logs` and scale by `exp(logs * logscale_factor)`.
LOGSCALE_FACTOR = 3.0
COUPLINGS = ("additive", "affine")


def _constant(value):
    """An initializer returning `value` (drawn in numpy, float64)."""

    def initializer(shape, dtype=None):
        return ops.cast(np.reshape(value, shape), dtype)

    return initializer


def _glorot_limit(channels):
    """`tf.compat.v1.get_variable`'s default (glorot uniform) on a
    `(1, 1, 1, channels)` actnorm variable: fan_in 1, fan_out `channels`."""
    return math.sqrt(6.0 / (1 + channels))


class _FlowLevel(keras.layers.Layer):
    """The `depth` steps of flow of one level (`revnet` in glow_ops_1x1.py).

    A step (`revnet_step`) is actnorm, then the invertible 1x1 convolution
    (the reversal of the channels when `permutation`, else
    `P L (U + diag(sign_s exp(log_s)))`), then the coupling: `x2 += NN(x1)`
    (additive) or `x2 = (x2 + shift) * sigmoid(raw_scale + 2)` (affine),
    with `NN` = 1x1 conv (no bias) + actnorm + relu, 1x1 conv + actnorm +
    relu, and a zero-initialised 1x1 conv with bias and `exp(3 * logs)`
    scale. On a 1x1 image a 1x1 convolution is a matrix product. Every
    weight holds the steps of the level on its first axis (fewer variables,
    a faster `fit` to trace).
    """

    def __init__(self, channels, depth, coupling_width, coupling, permutation,
                 rng, **kwargs):
        super().__init__(**kwargs)
        c = channels
        self.channels = c
        self.depth = depth
        self.kept = c - c // 2  # x1; the authors' tf.split when c is even
        self.coupling = coupling
        self.permutation = permutation
        width = coupling_width
        out = c // 2 if coupling == "additive" else 2 * (c // 2)

        def weight(name, values, trainable=True):
            value = np.stack([np.asarray(v, dtype="float64") for v in values])
            return self.add_weight(
                shape=value.shape,
                initializer=_constant(value),
                trainable=trainable,
                name=name,
            )

        def uniform(n):
            limit = _glorot_limit(n)
            return lambda: rng.uniform(-limit, limit, n)

        # Drawn step by step, in the order the authors create the variables.
        steps = []
        for _ in range(depth):
            step = {"actnorm_bias": uniform(c)(), "actnorm_logs": uniform(c)()}
            if not permutation:
                # A random rotation's PLU decomposition (invertible_1x1_conv).
                w = scipy.linalg.qr(rng.random((c, c)))[0]
                p, lower, upper = scipy.linalg.lu(w)
                s = np.diag(upper)
                step.update(lu_p=p, lu_l=lower, lu_sign_s=np.sign(s),
                            lu_log_s=np.log(np.abs(s)),
                            lu_u=np.triu(upper, k=1))
            step["kernel_1"] = rng.normal(0, 0.05, (self.kept, width))
            step["actnorm_1_bias"] = uniform(width)()
            step["actnorm_1_logs"] = uniform(width)()
            step["kernel_2"] = rng.normal(0, 0.05, (width, width))
            step["actnorm_2_bias"] = uniform(width)()
            step["actnorm_2_logs"] = uniform(width)()
            steps.append(step)

        def stacked(name, trainable=True):
            return weight(name, [step[name] for step in steps], trainable)

        self.actnorm_bias = stacked("actnorm_bias")
        self.actnorm_logs = stacked("actnorm_logs")
        if not permutation:
            self.lu_p = stacked("lu_p", trainable=False)
            self.lu_l = stacked("lu_l")
            self.lu_sign_s = stacked("lu_sign_s", trainable=False)
            self.lu_log_s = stacked("lu_log_s")
            self.lu_u = stacked("lu_u")
        self.kernel_1 = stacked("kernel_1")
        self.actnorm_1_bias = stacked("actnorm_1_bias")
        self.actnorm_1_logs = stacked("actnorm_1_logs")
        self.kernel_2 = stacked("kernel_2")
        self.actnorm_2_bias = stacked("actnorm_2_bias")
        self.actnorm_2_logs = stacked("actnorm_2_logs")
        self.kernel_3 = weight("kernel_3", [np.zeros((width, out))] * depth)
        self.bias_3 = weight("bias_3", [np.zeros(out)] * depth)
        self.logs_3 = weight("logs_3", [np.zeros(out)] * depth)
        self.built = True

    def _actnorm(self, x, bias, logs, step, init):
        """`(x + b) * exp(3 logs)` with step `step`'s `b`, `logs`; with
        `init`, Glow's data-dependent initialisation first (actnorm_center,
        actnorm_scale: `b = -mean`, `logs = log(1 / (rms + 1e-6)) / 3`),
        its statistics computed in float64 with numpy on the host (the
        same on every backend)."""
        if init:
            values = np.asarray(ops.convert_to_numpy(x), "float64")
            mean = values.mean(axis=0)
            rms = np.sqrt(np.mean(np.square(values - mean), axis=0))
            _assign_row(bias, step, -mean)
            _assign_row(logs, step, np.log(1.0 / (rms + 1e-6)) / LOGSCALE_FACTOR)
        return (x + bias[step]) * ops.exp(logs[step] * LOGSCALE_FACTOR)

    def _weight_matrix(self, step, dtype):
        c = self.channels
        l_mask = ops.cast(np.tril(np.ones((c, c)), -1), dtype)
        lower = self.lu_l[step] * l_mask + ops.eye(c, dtype=dtype)
        upper = self.lu_u[step] * ops.transpose(l_mask) + ops.diag(
            self.lu_sign_s[step] * ops.exp(self.lu_log_s[step])
        )
        return ops.matmul(self.lu_p[step], ops.matmul(lower, upper))

    def _coupling_net(self, x1, step, init=False):
        h = ops.matmul(x1, self.kernel_1[step])
        h = self._actnorm(h, self.actnorm_1_bias, self.actnorm_1_logs, step, init)
        h = ops.relu(h)
        h = ops.matmul(h, self.kernel_2[step])
        h = self._actnorm(h, self.actnorm_2_bias, self.actnorm_2_logs, step, init)
        h = ops.relu(h)
        h = ops.matmul(h, self.kernel_3[step]) + self.bias_3[step]
        return h * ops.exp(self.logs_3[step] * LOGSCALE_FACTOR)

    def _shift_scale(self, h):
        return h[:, 0::2], ops.sigmoid(h[:, 1::2] + 2.0)

    def forward(self, x, init=False):
        """x -> y and the log-determinant (per sample) of dy/dx."""
        logdet = ops.zeros_like(x[:, 0])
        for step in range(self.depth):
            x = self._actnorm(
                x, self.actnorm_bias, self.actnorm_logs, step, init
            )
            logdet = logdet + ops.sum(self.actnorm_logs[step]) * LOGSCALE_FACTOR
            if self.permutation:
                x = ops.flip(x, axis=-1)
            else:
                x = ops.matmul(x, self._weight_matrix(step, x.dtype))
                logdet = logdet + ops.sum(self.lu_log_s[step])
            x1, x2 = x[:, : self.kept], x[:, self.kept :]
            h = self._coupling_net(x1, step, init)
            if self.coupling == "additive":
                x2 = x2 + h
            else:
                shift, scale = self._shift_scale(h)
                x2 = (x2 + shift) * scale
                logdet = logdet + ops.sum(ops.log(scale), axis=-1)
            x = ops.concatenate([x1, x2], axis=-1)
        return x, logdet

    def reverse(self, y):
        """y -> x, the inverse of `forward`."""
        for step in reversed(range(self.depth)):
            y1, y2 = y[:, : self.kept], y[:, self.kept :]
            h = self._coupling_net(y1, step)
            if self.coupling == "additive":
                y2 = y2 - h
            else:
                shift, scale = self._shift_scale(h)
                y2 = y2 / scale - shift
            y = ops.concatenate([y1, y2], axis=-1)
            if self.permutation:
                y = ops.flip(y, axis=-1)
            else:
                y = ops.matmul(y, ops.inv(self._weight_matrix(step, y.dtype)))
            y = y * ops.exp(-self.actnorm_logs[step] * LOGSCALE_FACTOR)
            y = y - self.actnorm_bias[step]
        return y


def _assign_row(variable, row, value):
    """`variable[row] = value`, eagerly (data-dependent initialisation)."""
    row_value = np.asarray(value, variable.dtype)[None]
    variable.assign(ops.slice_update(variable.value, (row, 0), row_value))


@keras.saving.register_keras_serializable(package="kcse")
class BertFlow(keras.Model):
    """BERT-flow: a Glow normalizing flow from sentence vectors to N(0, I).

    Li et al., "On the Sentence Embeddings from Pre-trained Language Models"
    (EMNLP 2020), code bohanli/BERT-flow: the Glow of `flow/glow_1x1.py`
    and `flow/glow_ops_1x1.py`, the default configuration
    `flow/config/config_l3_d3_w32.json`, trained as in `run_siamese.py`.
    A vector `x` of dim `d` is the 1x1 image `[1, 1, d]` of the authors
    (so every 1x1 convolution is a matrix product), passed through
    `n_levels` levels of `depth` steps of flow; after every level but the
    last, the second half of the channels is factored out. Each step is

        actnorm:    x = (x + b) * exp(3 logs)              log-det 3 sum(logs)
        1x1 conv:   x = reverse(x)  (`permutation`, the config's default)
                    or x @ P L (U + diag(sign_s exp(log_s)))  log-det sum(log_s)
        coupling:   x1, x2 = halves of x;  x2 += NN(x1)   (additive, log-det 0)
                    or x2 = (x2 + shift) * sigmoid(scale + 2)   (affine)

    with `NN` three 1x1 convolutions, `d/2 -> coupling_width -> coupling_width
    -> d/2`, the first two without bias and each followed by actnorm and
    relu, the last zero-initialised with a bias and an `exp(3 logs)` scale
    (so every coupling starts as the identity). The prior of every factored
    part and of the top is N(0, I); `call(x)` returns the latent
    `z = concat(factored parts, top)`, the vector BERT-flow uses as the
    sentence embedding (`tf.concat(self.eps + [self.z])`, glow_1x1.py;
    compare it by cosine as the authors do).

    `log_likelihood(x)` is `log p(x) = sum log N(z; 0, 1) + log|det dz/dx|`
    in nats. The training loss is the authors' bits per dimension,
    `-log p(x) / (d log 2)`, averaged over the batch: `fit(vectors)`
    minimises it through `keras.Model.fit` (no targets). `compile()` with
    no optimizer uses the authors': `AdamWeightDecay` (BERT's optimizer,
    without bias correction, `kcse.layers.adam_weight_decay`) at a constant
    `LEARNING_RATE = 1e-3`, weight decay 0.01 and their epsilon 1e-6 and
    global gradient clip 1.0 (as `GLOBAL_CLIPNORM`, `ADAM_EPSILON` for
    kcse's loss, half theirs).
    `adapt(vectors)` does it all: compiles, and fits for `EPOCHS = 1` epoch
    of batches of `BATCH_SIZE = 64` vectors (the authors' 32 sentence
    pairs). BERT-flow fits the flow on the vectors of the task's sentences
    (STS-B train+dev+test in the paper's headline runs, README.md), with
    the encoder frozen: pass those vectors to `adapt`.

    Initialisation. The authors define Glow's data-dependent actnorm
    initialisation (an init op in `Glow.body`, run by `GlowInitHook`), but
    `run_siamese.py` never passes the hook to the estimator, so their flow
    starts from `tf.get_variable`'s default: every actnorm `b` and `logs`
    uniform in `±sqrt(6 / (1 + channels))`. That is the default here too.
    It is mild for BERT's dims (scales within `exp(±0.26)` for 768) but
    not for small ones (`exp(±1.8)` a step for 16, compounding over the
    steps): for dims below ~128 prefer `data_init=True`.
    `initialize_actnorm(batch)` runs Glow's data-dependent initialisation
    (every actnorm, in order, set so its output on `batch` has zero mean
    and unit mean square per channel), and `adapt(..., data_init=True)`
    runs it on the first training batch; `fit` never does.

    Dims. A dim divisible by `2 ** n_levels` (384, 768, 1024) splits as the
    authors'; for other dims, the first part of every split is the larger
    (`x1 = x[:, :d - d // 2]`), where the authors' `tf.split` would raise.
    Every level needs at least 2 channels (dim >= 5 for 3 levels).

    Dtype. The flow computes in its dtype (float32 by default) on every
    backend; `dtype="float64"` on JAX needs its 64-bit mode
    (`jax_enable_x64`), without which it raises `ValueError` rather than
    compute in float32.

    Inputs are not checked for NaN by `call` (a NaN gives NaN rows);
    `adapt` raises `ValueError` on non-finite vectors and on vectors that
    overflow the dtype when squared, and `NonFiniteLossError` if the loss
    becomes non-finite while training. Fewer vectors than a batch make
    one smaller batch.

    Args:
        n_levels: int. Levels of the multi-scale flow (config: 3).
        depth: int. Steps of flow a level (config: 3).
        coupling_width: int. Hidden channels of a coupling network (32).
        coupling: "additive" (the configs') or "affine".
        permutation: bool. True (the configs'): the 1x1 convolution is the
            fixed reversal of the channels; False: a learned LU-parametrised
            invertible matrix, initialised from a random rotation.
        seed: int or None. Seed of the initial weights.

    Example:
    ```python
    import numpy as np
    import kcse

    rng = np.random.default_rng(0)
    vectors = rng.normal(2.0, 0.5, (1024, 384)).astype("float32")
    flow = kcse.layers.BertFlow(seed=0)
    flow.build((None, 384))
    bits = lambda: -np.mean(flow.log_likelihood(vectors)) / (384 * np.log(2))
    before = bits()
    loss = flow.adapt(vectors, seed=0)  # 1 epoch; bits per dimension
    assert bits() < before
    z = np.asarray(flow(vectors))  # the embeddings, shape (1024, 384)
    assert np.allclose(np.asarray(flow.inverse(z)), vectors, atol=1e-4)
    log_p = np.asarray(flow.log_likelihood(vectors))  # nats, shape (1024,)
    ```
    """

    def __init__(
        self,
        n_levels=3,
        depth=3,
        coupling_width=32,
        coupling="additive",
        permutation=True,
        seed=None,
        **kwargs,
    ):
        kwargs.setdefault("dtype", "float32")  # Whatever the global policy.
        super().__init__(**kwargs)
        check_dtype_available(self.variable_dtype, "BertFlow")
        self.n_levels = check_count(n_levels, "n_levels")
        self.depth = check_count(depth, "depth")
        self.coupling_width = check_count(coupling_width, "coupling_width")
        if coupling not in COUPLINGS:
            raise ValueError(
                f"coupling must be one of {COUPLINGS}; got {coupling!r}."
            )
        self.coupling = coupling
        self.permutation = bool(permutation)
        self.seed = seed
        self.flow_levels = []
        self.level_channels = None

    # -- structure ---------------------------------------------------------

    def build(self, input_shape):
        dim = input_shape[-1]
        if dim is None:
            raise ValueError("BertFlow needs a known vector dim.")
        channels = [dim]
        for _ in range(self.n_levels - 1):
            channels.append(channels[-1] - channels[-1] // 2)
        if channels[-1] < 2:
            raise ValueError(
                f"BertFlow with n_levels={self.n_levels} needs vectors of dim "
                f">= {2 ** (self.n_levels - 1) + 1}; got dim {dim}."
            )
        self.level_channels = channels
        rng = np.random.default_rng(self.seed)
        self.flow_levels = [
            _FlowLevel(
                c,
                self.depth,
                self.coupling_width,
                self.coupling,
                self.permutation,
                rng,
                dtype=self.dtype_policy,
                name=f"revnet_{level}",
            )
            for level, c in enumerate(channels)
        ]
        self.input_spec = keras.InputSpec(ndim=2, axes={-1: dim})

    @property
    def dim(self):
        """The vector dim (None before the model is built)."""
        return None if self.level_channels is None else self.level_channels[0]

    def _check(self, x, what):
        if not self.built:
            raise ValueError(f"BertFlow.{what} needs a built model (adapt it).")
        shape = tuple(x.shape)
        if len(shape) != 2 or shape[-1] != self.dim:
            raise ValueError(
                f"BertFlow.{what} expects shape (batch, {self.dim}); got "
                f"{shape}."
            )

    # -- the flow ----------------------------------------------------------

    def _encode(self, x, init=False):
        """x -> (z, log|det dz/dx| per sample): `encoder_decoder`, forward."""
        x = ops.cast(x, self.compute_dtype)
        logdet = ops.zeros_like(x[:, 0])
        factored = []
        for level, c in enumerate(self.level_channels):
            x, level_logdet = self.flow_levels[level].forward(x, init)
            logdet = logdet + level_logdet
            if level < self.n_levels - 1:
                kept = c - c // 2
                factored.append(x[:, kept:])
                x = x[:, :kept]
        return ops.concatenate(factored + [x], axis=-1), logdet

    def call(self, inputs):
        return self._encode(inputs)[0]

    def inverse(self, z):
        """z -> x: the generative direction (`encoder_decoder`, reverse)."""
        z = ops.convert_to_tensor(z)
        self._check(z, "inverse")
        z = ops.cast(z, self.compute_dtype)
        parts, start = [], 0
        for c in self.level_channels[:-1]:
            parts.append(z[:, start : start + c // 2])
            start += c // 2
        x = z[:, start:]
        for level in reversed(range(self.n_levels)):
            if level < self.n_levels - 1:
                x = ops.concatenate([x, parts[level]], axis=-1)
            x = self.flow_levels[level].reverse(x)
        return x

    def log_likelihood(self, x):
        """Per-sample `log p(x)` in nats: `sum log N(z; 0, 1) + log|det J|`."""
        x = ops.convert_to_tensor(x)
        self._check(x, "log_likelihood")
        z, logdet = self._encode(x)
        log_prior = ops.sum(
            -0.5 * ops.square(z) - 0.5 * math.log(2 * math.pi), axis=-1
        )
        return log_prior + logdet

    def compute_output_shape(self, input_shape):
        return tuple(input_shape)

    # -- training ----------------------------------------------------------

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None,
                     training=True):
        """The authors' loss: `-log p(x) / (dim log 2)` (bits per dimension),
        the mean over the batch. `y` and `y_pred` are not used."""
        bits = -self.log_likelihood(x) / (math.log(2.0) * self.dim)
        if sample_weight is None:
            loss = ops.mean(bits)
        else:
            weight = ops.cast(ops.reshape(sample_weight, (-1,)), bits.dtype)
            loss = ops.sum(bits * weight) / ops.sum(weight)
        for extra in self.losses:
            loss = loss + ops.cast(extra, loss.dtype)
        return loss

    def compile(self, optimizer=None, **kwargs):
        """`keras.Model.compile`; with no optimizer, the authors'
        (`AdamWeightDecay()`: lr 1e-3, weight decay 0.01, clipped)."""
        if optimizer is None:
            optimizer = AdamWeightDecay()
        super().compile(optimizer=optimizer, **kwargs)

    def compile_from_config(self, config):
        # As keras.Model's, which skips models with their own `compile`.
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if self.built:
            self.optimizer.build(self.trainable_variables)

    def initialize_actnorm(self, vectors):
        """Glow's data-dependent initialisation on `vectors` (one batch).

        Runs the flow once in order; every actnorm (of the steps and of the
        coupling networks) is set, before it is applied, so its output on
        `vectors` has zero mean and unit mean square per channel
        (`b = -mean`, `logs = log(1 / (rms + 1e-6)) / 3`), as the init op
        of glow_ops_1x1.py. Returns nothing.
        """
        vectors = _as_vectors(vectors, "initialize_actnorm", self.compute_dtype)
        if not self.built:
            self.build((None, vectors.shape[1]))
        self._check(vectors, "initialize_actnorm")
        self._encode(ops.convert_to_tensor(vectors), init=True)

    def adapt(self, vectors, epochs=EPOCHS, batch_size=BATCH_SIZE,
              learning_rate=LEARNING_RATE, seed=None, data_init=False):
        """Trains the flow on `vectors` (an `(n, dim)` array) quietly.

        Compiles with `AdamWeightDecay(learning_rate)` and fits `epochs`
        epochs of batches of `batch_size`, the vectors shuffled every epoch
        by a numpy generator seeded with `seed`. With `data_init`, Glow's
        data-dependent actnorm initialisation runs on the first batch first.
        Returns the last epoch's mean loss (bits per dimension).

        Raises:
            ValueError: before any training, if the vectors hold NaN or
                inf (the message gives the count and the (row, column) of
                the first), or if they overflow the model's dtype when
                squared (|value| > sqrt(float32 max) = 1.8e19 by default,
                e.g. a scale of 1e30; it names the largest |value| and its
                row and column); and for a bad shape or argument.
            kcse.objectives.NonFiniteLossError: the training loss became
                NaN or infinite (its step and loss); training stops there,
                and the flow's weights should not be used.
        """
        vectors = _as_vectors(vectors, "adapt", self.compute_dtype)
        epochs = check_count(epochs, "epochs")
        batch_size = check_count(batch_size, "batch_size")
        check_number(learning_rate, "learning_rate", above=0)
        if not self.built:
            self.build((None, vectors.shape[1]))
        self._check(vectors, "adapt")
        rng = np.random.default_rng(seed)
        orders = [rng.permutation(len(vectors)) for _ in range(int(epochs))]
        if data_init:
            self.initialize_actnorm(vectors[orders[0][:batch_size]])
        self.compile(optimizer=AdamWeightDecay(learning_rate=learning_rate))
        # Built eagerly: its variables are slow to create inside the trace.
        self.optimizer.build(self.trainable_variables)
        stops = [StopOnNonFiniteLoss(async_safe=on_accelerator()), StopOnInterrupt()]
        steps_per_epoch = -(-len(vectors) // int(batch_size))
        with progress.task("training the flow", len(orders) * steps_per_epoch,
                           "step") as steps:
            for epoch, order in enumerate(orders):
                try:
                    history = self.fit(
                        vectors[order],
                        batch_size=int(batch_size),
                        epochs=1,
                        shuffle=False,
                        verbose=0,
                        callbacks=stops,
                    )
                except NonFiniteLossError as error:
                    # A `fit` an epoch: its steps counted from the first epoch's.
                    raise NonFiniteLossError(
                        epoch * steps_per_epoch + error.step, error.loss
                    ) from None
                steps.add(steps_per_epoch)
        return float(history.history["loss"][-1])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "n_levels": self.n_levels,
                "depth": self.depth,
                "coupling_width": self.coupling_width,
                "coupling": self.coupling,
                "permutation": self.permutation,
                "seed": self.seed,
            }
        )
        return config


def _as_vectors(vectors, what, dtype):
    """A numpy `(n, dim)` array of `dtype`, or ValueError: the vectors must
    be finite and their squares must fit `dtype` (checked before the cast,
    so a float64 1e300 is named as such, not as the inf it would become)."""
    vectors = np.asarray(keras.ops.convert_to_numpy(vectors))
    if vectors.dtype.kind != "f":
        vectors = vectors.astype("float64")
    if vectors.ndim != 2 or vectors.shape[0] == 0:
        raise ValueError(
            f"BertFlow.{what} expects a non-empty array of shape (n, dim); "
            f"got shape {vectors.shape}."
        )
    check_finite(vectors, f"BertFlow.{what}")
    dtype = np.dtype(keras.backend.standardize_dtype(dtype))
    limit = math.sqrt(float(np.finfo(dtype).max))
    largest, row, column = largest_magnitude(vectors)
    if largest > limit:
        raise ValueError(
            f"BertFlow.{what}: the vectors overflow {dtype.name} when "
            f"squared: the largest |value| is {largest:.3g}, at row {row}, "
            f"column {column}, above sqrt({dtype.name} max) = {limit:.3g}. "
            f"The flow's loss squares its output, whose scale starts near "
            f"the vectors' (and data_init squares their deviations), so "
            f"training would give an infinite loss and NaN weights. Rescale "
            f"the vectors, or use BertFlow(dtype=\"float64\")."
        )
    return vectors.astype(dtype, copy=False)
