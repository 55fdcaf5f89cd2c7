"""kcse on JAX where `import tensorflow` fails: import, encode, train, evaluate."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import tensorflow_free

WORKER = pathlib.Path(__file__).parent / "without_tensorflow_worker.py"


def run_worker(without_tensorflow=False):
    # Both on JAX, kcse imported from this checkout.
    env = (tensorflow_free.environment() if without_tensorflow
           else tensorflow_free.environment(KCSE_HIDDEN_PACKAGES=""))
    run = subprocess.run([sys.executable, str(WORKER)], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.large
def test_three_simcse_steps_without_tensorflow_equal_those_with_it():
    pytest.importorskip("jax")
    without = run_worker(without_tensorflow=True)
    normal = run_worker()
    assert not without["tensorflow_importable"] and not without["tensorflow_imported"]
    assert normal["tensorflow_importable"]
    assert without["vectors_dtype"] == "float32" and without["vectors_shape"] == [12, 16]
    assert len(without["step_losses"]) == 3 and np.all(np.isfinite(without["step_losses"]))
    assert without["weight_change"] > 1e-4  # The steps trained the encoder.
    # The same three steps in the environment with TensorFlow (Keras imports
    # it there): same batches, dropout and updates, up to float32 rounding.
    np.testing.assert_allclose(without["step_losses"], normal["step_losses"], atol=1e-5)
    for a, b in zip(without["weights_after"], normal["weights_after"]):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert without["spearman"] == pytest.approx(normal["spearman"], abs=1e-6)
    assert without["text_vectors_equal_token_vectors"] <= 1e-6
