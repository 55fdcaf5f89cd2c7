"""Tests for kcse.layers.BertFlow against a numpy transcription of the authors'
Glow (tests/bert_flow_reference.py, bohanli/BERT-flow) and brute force."""

import json
import os
import pathlib
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

import bert_flow_reference as reference
from kcse.layers import BertFlow
from kcse.layers.adam_weight_decay import AdamWeightDecay

CONFIGS = {
    # flow/config/config_l3_d3_w32.json, run_siamese.py's default.
    "default": dict(),
    # The other parametrisations of glow_ops_1x1.py.
    "lu_affine": dict(permutation=False, coupling="affine"),
}


def randomise(flow, seed=0):
    """Random non-trivial weights: actnorms, LU factors, coupling nets
    (including the zero-initialised last layers)."""
    rng = np.random.default_rng(seed)

    def scale(name):
        if name.startswith("lu_") or name == "kernel_3":
            return 0.1
        if "logs" in name:
            return 0.05
        return 0.3  # biases, kernel_1, kernel_2

    for level in flow.flow_levels:
        for variable in level.weights:
            name = variable.name
            if name in ("lu_p", "lu_sign_s"):
                continue  # fixed in the authors' code too
            value = rng.normal(0.0, scale(name), variable.shape)
            variable.assign(value.astype(variable.dtype))


def hparams(flow):
    return {
        "n_levels": flow.n_levels,
        "depth": flow.depth,
        "coupling_width": flow.coupling_width,
        "coupling": flow.coupling,
        "permutation": flow.permutation,
    }


def reference_params(flow):
    """kcse's weights in the authors' variable names and shapes."""
    params = {}

    def value(variable, step):
        return np.asarray(keras.ops.convert_to_numpy(variable), "float64")[step]

    def image(array):
        return array.reshape((1,) * (4 - array.ndim) + array.shape)

    for level_index, level in enumerate(flow.flow_levels):
        for step in range(flow.depth):
            prefix = f"flow/revnet_{level_index}/revnet_step_{step}"
            an = prefix + "/actnorm"
            params[an + "/actnorm_center/b"] = image(value(level.actnorm_bias, step))
            params[an + "/actnorm_scale/logs"] = image(value(level.actnorm_logs, step))
            if not flow.permutation:
                inv = prefix + "/invertible"
                params[inv + "/P"] = value(level.lu_p, step)
                params[inv + "/L"] = value(level.lu_l, step)
                params[inv + "/sign_S"] = value(level.lu_sign_s, step)
                params[inv + "/log_S"] = value(level.lu_log_s, step)
                params[inv + "/U"] = value(level.lu_u, step)
            nn = f"{prefix}/{flow.coupling}/nn"
            for conv, kernel, bias, logs in (
                ("1_1", level.kernel_1, level.actnorm_1_bias, level.actnorm_1_logs),
                ("1_2", level.kernel_2, level.actnorm_2_bias, level.actnorm_2_logs),
            ):
                name = f"{nn}/conv_block/{conv}"
                params[name + "/W"] = image(value(kernel, step))
                params[name + "/actnorm/actnorm_center/b"] = image(value(bias, step))
                params[name + "/actnorm/actnorm_scale/logs"] = image(value(logs, step))
            params[nn + "/zeros/W"] = image(value(level.kernel_3, step))
            params[nn + "/zeros/b"] = image(value(level.bias_3, step))
            params[nn + "/zeros/logs"] = value(level.logs_3, step)[None, :]
    return params


# float32 inverse of a float32 z: z carries 0.5-2 ulp of rounding (eps * |z|,
# eps = 1.2e-7, |z| <= 9 here), which the inverse multiplies by
# ||dx/dz||_inf, up to 113 on these random weights (lu_affine, dim 16: 9 LU
# solves and the affine couplings' exp(-s)): one ulp of z is up to 1.1e-4
# of x (2.6e-5 measured), and this allows ~4.
FLOAT32_INVERSE_ATOL = 5e-4


def random_flow(config, dim, dtype="float32", seed=0):
    flow = BertFlow(seed=seed, dtype=dtype, **CONFIGS[config])
    flow.build((None, dim))
    randomise(flow, seed)
    return flow


def vectors(n, dim, seed=1):
    rng = np.random.default_rng(seed)
    return rng.normal(0.5, 1.0, (n, dim)).astype("float32")


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_matches_the_authors_glow(config, dtype):
    dim = 24
    flow = random_flow(config, dim, dtype)
    x = vectors(64, dim)
    bits, z, log_likelihood = reference.objective_tower(
        reference_params(flow), x.astype("float64"), hparams(flow)
    )
    tolerance = 1e-5 if dtype == "float32" else 1e-10
    np.testing.assert_allclose(np.asarray(flow(x)), z, rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(
        np.asarray(flow.log_likelihood(x)), log_likelihood, rtol=tolerance,
        atol=tolerance,
    )
    loss = flow.compute_loss(x=keras.ops.convert_to_tensor(x))
    np.testing.assert_allclose(float(loss), bits.mean(), rtol=tolerance)
    # The authors' reverse pass from their z gives back x, and so does kcse's.
    np.testing.assert_allclose(
        reference.decode(reference_params(flow), z, hparams(flow)), x, atol=1e-9
    )
    inverse_tolerance = FLOAT32_INVERSE_ATOL if dtype == "float32" else 1e-10
    np.testing.assert_allclose(
        np.asarray(flow.inverse(z.astype(dtype))), x, atol=inverse_tolerance
    )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("dim", [10, 16])
def test_inverse_of_call_is_identity(config, dim, dtype):
    """Exact up to rounding: float32 loses up to ~3e-5 through 9 random LU
    matrices and affine couplings (see FLOAT32_INVERSE_ATOL)."""
    flow = random_flow(config, dim, dtype)
    x = vectors(32, dim).astype(dtype)
    tolerance = FLOAT32_INVERSE_ATOL if dtype == "float32" else 1e-10
    np.testing.assert_allclose(
        np.asarray(flow.inverse(flow(x))), x, atol=tolerance
    )


@pytest.mark.parametrize("config", sorted(CONFIGS))
@pytest.mark.parametrize("dim", [10, 12])
def test_log_likelihood_equals_brute_force_jacobian(config, dim):
    """log N(z; 0, I) + log|det dz/dx| with the Jacobian by central finite
    differences of `call` (float64): independent of the log-det sums. dim 10
    splits 10 -> 5 -> 3, where the halves differ by one."""
    flow = random_flow(config, dim, dtype="float64", seed=3)
    x = vectors(4, dim, seed=4).astype("float64")
    h = 1e-5
    for row in x:
        points = np.concatenate([row + h * np.eye(dim), row - h * np.eye(dim)])
        out = np.asarray(flow(points))
        jacobian = (out[:dim] - out[dim:]).T / (2 * h)  # dz_i / dx_j
        _, logabsdet = np.linalg.slogdet(jacobian)
        z = np.asarray(flow(row[None]))[0]
        expected = np.sum(reference.normal_log_prob(z)) + logabsdet
        got = float(np.asarray(flow.log_likelihood(row[None]))[0])
        assert abs(got - expected) <= 1e-6, (got, expected)


def test_fit_lowers_the_negative_log_likelihood():
    """Correlated Gaussian data with an offset: bits per dimension fall
    from the start towards the data's entropy, never below it by much."""
    dim, n = 32, 4096
    rng = np.random.default_rng(0)
    mixing = rng.normal(size=(dim, dim)) / np.sqrt(dim)
    x = (rng.normal(size=(n, dim)) @ mixing + 2.0).astype("float32")
    covariance = mixing.T @ mixing
    entropy_bits = 0.5 * np.linalg.slogdet(2 * np.pi * np.e * covariance)[1] / (
        dim * np.log(2)
    )
    flow = BertFlow(seed=0)
    flow.build((None, dim))
    flow.initialize_actnorm(x[:64])

    def bits():
        return float(-np.mean(flow.log_likelihood(x)) / (dim * np.log(2)))

    before = bits()
    loss = flow.adapt(x, epochs=3, seed=0)
    after = bits()
    assert after < before - 0.3, (before, after)
    assert after > entropy_bits - 0.1, (after, entropy_bits)
    assert abs(loss - after) < 0.2, (loss, after)


def test_keras_fit_and_evaluate_use_the_loss():
    x = vectors(128, 16)
    flow = BertFlow(seed=0)
    flow.compile()
    history = flow.fit(x, batch_size=64, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert isinstance(flow.optimizer, AdamWeightDecay)
    evaluated = flow.evaluate(x, batch_size=128, verbose=0)
    expected = -np.mean(flow.log_likelihood(x)) / (16 * np.log(2))
    np.testing.assert_allclose(evaluated, expected, rtol=1e-5)


def test_data_dependent_init_normalises_the_first_actnorm():
    x = vectors(64, 16) * 5.0 + 3.0
    flow = BertFlow(seed=0)
    flow.initialize_actnorm(x)
    level = flow.flow_levels[0]
    bias = np.asarray(level.actnorm_bias)[0]
    logs = np.asarray(level.actnorm_logs)[0]
    out = (x + bias) * np.exp(3 * logs)
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-5)
    np.testing.assert_allclose(np.sqrt((out**2).mean(axis=0)), 1.0, atol=1e-4)
    # adapt(data_init=True) initialises on its first batch, then trains.
    flow = BertFlow(seed=0)
    assert np.isfinite(flow.adapt(x, data_init=True, seed=0))


def test_save_and_load_keep_the_embeddings(tmp_path):
    x = vectors(100, 16)
    # Two levels of one step: what is saved does not depend on the size,
    # and a small flow traces its train step (here and after the load) fast.
    flow = BertFlow(n_levels=2, depth=1, coupling_width=8, seed=0, permutation=False,
                    coupling="affine")
    flow.build((None, 16))
    flow.initialize_actnorm(x)
    flow.adapt(x, seed=0)
    path = str(tmp_path / "flow.keras")
    flow.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, BertFlow)
    assert loaded.get_config() == flow.get_config()
    np.testing.assert_array_equal(np.asarray(loaded(x)), np.asarray(flow(x)))
    np.testing.assert_array_equal(
        np.asarray(loaded.log_likelihood(x)), np.asarray(flow.log_likelihood(x))
    )
    assert isinstance(loaded.optimizer, AdamWeightDecay)
    loaded.fit(x, batch_size=64, epochs=1, verbose=0)  # resumes training


def test_config_round_trip():
    flow = BertFlow(n_levels=2, depth=4, coupling_width=8, coupling="affine",
                    permutation=False, seed=7)
    again = BertFlow.from_config(flow.get_config())
    assert again.get_config() == flow.get_config()
    again.build((None, 12))
    flow.build((None, 12))
    x = vectors(8, 12)
    np.testing.assert_array_equal(np.asarray(again(x)), np.asarray(flow(x)))


def test_bad_input_raises_clear_errors():
    flow = BertFlow(seed=0)
    flow.build((None, 16))
    with pytest.raises(ValueError, match="16"):
        flow(vectors(4, 8))
    with pytest.raises(ValueError, match="expects shape"):
        flow.inverse(vectors(4, 8))
    with pytest.raises(ValueError, match="expects shape"):
        flow.log_likelihood(vectors(4, 8))
    with pytest.raises(ValueError, match="expects shape"):
        flow.adapt(vectors(4, 8))
    bad = vectors(10, 16)
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="non-finite value.*row 3, column 2"):
        flow.adapt(bad)
    with pytest.raises(ValueError, match="non-empty"):
        flow.adapt(np.zeros((0, 16), "float32"))
    with pytest.raises(ValueError, match="non-empty"):
        flow.adapt(np.zeros(16, "float32"))
    with pytest.raises(ValueError, match="dim >= 5"):
        BertFlow().build((None, 4))
    with pytest.raises(ValueError, match="coupling"):
        BertFlow(coupling="gatu")
    with pytest.raises(ValueError, match="epochs"):
        flow.adapt(vectors(10, 16), epochs=0)
    with pytest.raises(ValueError, match="built"):
        BertFlow().inverse(vectors(2, 16))
    # Fewer vectors than a batch: one smaller batch.
    assert np.isfinite(flow.adapt(vectors(10, 16), batch_size=64))


def tiny_flow():
    return BertFlow(n_levels=2, depth=1, coupling_width=4, seed=0)


def planted(bad, scale=1.0):
    """10 vectors of dim 8 uniform in (-1, 1) times `scale`, with `bad`'s
    values."""
    x = np.random.default_rng(0).uniform(-1, 1, (10, 8)) * scale
    for (row, column), value in bad.items():
        x[row, column] = value
    return x.astype("float32")


@pytest.mark.parametrize(
    "bad, scale, message",
    [
        ({(5, 2): np.nan, (6, 0): np.nan, (7, 3): np.inf}, 1.0,
         "BertFlow.adapt: 3 non-finite values in the vectors (2 NaN, 1 inf), "
         "the first at row 5, column 2."),
        ({(2, 1): -np.inf}, 1.0,
         "BertFlow.adapt: 1 non-finite value in the vectors (0 NaN, 1 inf), "
         "the first at row 2, column 1."),
        # Finite, but 1e60 > float32 max: the loss would be inf, the
        # embeddings NaN.
        ({(3, 1): 2e30}, 1e30,
         "BertFlow.adapt: the vectors overflow float32 when squared: the "
         "largest |value| is 2e+30, at row 3, column 1, above sqrt(float32 "
         "max) = 1.84e+19."),
    ],
    ids=["nan", "inf", "1e30"],
)
def test_bad_vectors_are_an_error_before_training(bad, scale, message):
    flow = tiny_flow()
    with pytest.raises(ValueError, match=re.escape(message)):
        flow.adapt(planted(bad, scale))
    assert not flow.built  # Raised before any work.


def test_non_finite_loss_stops_training():
    from kcse.objectives import NonFiniteLossError

    # Step 1's update with a learning rate of 1e30 breaks the weights.
    with pytest.raises(
        NonFiniteLossError, match="the training loss became (nan|inf) at step 2"
    ) as caught:
        tiny_flow().adapt(planted({}), batch_size=4, learning_rate=1e30)
    assert caught.value.step == 2


def far_from_zero():
    """64 vectors of dim 16 at 1e4 ± 1: float32 sums of them round."""
    return vectors(64, 16) + np.float32(1e4)


def first_actnorm_after_init():
    """Glow's data-dependent initialisation of a default flow on
    `far_from_zero()`: the first actnorm's `(b, logs)` and the warnings."""
    import warnings

    flow = BertFlow(seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        flow.initialize_actnorm(far_from_zero())
    level = flow.flow_levels[0]
    return (np.asarray(level.actnorm_bias)[0], np.asarray(level.actnorm_logs)[0],
            [str(warning.message) for warning in caught])


def test_data_dependent_init_statistics_are_float64():
    """Reference: glow_ops_1x1.py's actnorm_center / actnorm_scale, the
    mean and root mean square computed here in float64 numpy; kcse's are
    float64 too, stored in float32 (the JAX half: test_jax_backend_...)."""
    bias, logs, caught = first_actnorm_after_init()
    x = far_from_zero().astype("float64")
    mean = x.mean(axis=0)
    rms = np.sqrt(np.mean((x - mean) ** 2, axis=0))
    np.testing.assert_array_equal(bias, (-mean).astype("float32"))
    np.testing.assert_array_equal(
        logs, (np.log(1 / (rms + 1e-6)) / 3).astype("float32"))
    assert caught == []


OTHER_BACKEND = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import keras
from bert_flow_test import first_actnorm_after_init, random_flow, vectors
out = {"backend": keras.config.backend()}
bias, logs, caught = first_actnorm_after_init()
out["init"] = {"bias": bias.tolist(), "logs": logs.tolist(), "warnings": caught}
try:
    from kcse.layers import BertFlow
    BertFlow(dtype="float64")
    out["float64"] = "built"
except ValueError as error:
    out["float64"] = str(error)
for config in ("default", "lu_affine"):
    flow = random_flow(config, 16)
    x = vectors(64, 16)
    out[config] = {
        "z": np.asarray(flow(x)).tolist(),
        "log_likelihood": np.asarray(flow.log_likelihood(x)).tolist(),
        "inverse": np.asarray(flow.inverse(flow(x))).tolist(),
        "loss": flow.adapt(x, epochs=2, batch_size=16, seed=0),
        "z_trained": np.asarray(flow(x)).tolist(),
    }
print(json.dumps(out))
"""


def test_jax_backend_equals_tensorflow():
    tests = pathlib.Path(__file__).resolve().parents[1]
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("JAX_ENABLE_X64", None)  # JAX's default: 64-bit mode off.
    run = subprocess.run(
        [sys.executable, "-c", OTHER_BACKEND, str(tests), str(tests / "layers")],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    other = json.loads(run.stdout.strip().splitlines()[-1])
    assert other["backend"] == "jax"
    # Glow's data-dependent initialisation: float64 statistics on JAX too.
    bias, logs, _ = first_actnorm_after_init()
    np.testing.assert_array_equal(other["init"]["bias"], bias)
    np.testing.assert_array_equal(other["init"]["logs"], logs)
    assert other["init"]["warnings"] == []
    # float64 needs JAX's 64-bit mode (off by default): refused in one line.
    assert "BertFlow(dtype=\"float64\") needs JAX's 64-bit mode" in other["float64"]
    assert "\n" not in other["float64"]
    for config in ("default", "lu_affine"):
        flow = random_flow(config, 16)
        x = vectors(64, 16)
        theirs = other[config]
        np.testing.assert_allclose(theirs["z"], np.asarray(flow(x)), atol=1e-5)
        np.testing.assert_allclose(
            theirs["log_likelihood"], np.asarray(flow.log_likelihood(x)),
            rtol=1e-5, atol=1e-5,
        )
        # JAX's own round trip, as in test_inverse_of_call_is_identity.
        np.testing.assert_allclose(theirs["inverse"], x, atol=FLOAT32_INVERSE_ATOL)
        loss = flow.adapt(x, epochs=2, batch_size=16, seed=0)
        np.testing.assert_allclose(theirs["loss"], loss, rtol=1e-4)
        np.testing.assert_allclose(
            theirs["z_trained"], np.asarray(flow(x)), rtol=1e-3, atol=1e-3
        )
