"""Training across processes: two JAX processes on localhost equal one.

`data_parallel_worker.py` runs as two processes of a cluster
(`kcse.distribution`, gloo collectives on CPU) and as one process alone on
the global batches: the reference.
"""

import os
import pathlib
import socket
import subprocess
import sys

import keras
import numpy as np
import pytest

from conftest import FAST_XLA_FLAG
from kcse import distribution

WORKER = pathlib.Path(__file__).parent / "data_parallel_worker.py"
TIMEOUT = 600


def free_port():
    with socket.socket() as probe:
        probe.bind(("localhost", 0))
        return probe.getsockname()[1]


def run_workers(folder, clusters):
    """Runs a worker per `clusters` entry (its KERAS_DISTRIBUTION_* values,
    or {} alone) at once; returns each one's results."""
    base = dict(
        os.environ,
        KERAS_BACKEND="jax",
        # The worker trains tiny_simcse's objectives; kcse as the caller finds it.
        PYTHONPATH=os.pathsep.join(
            [str(WORKER.parent), str(WORKER.parents[1] / "objectives"), str(WORKER.parents[1])]
            + ([os.environ["PYTHONPATH"]] if "PYTHONPATH" in os.environ else [])
        ),
    )
    for name in (distribution.JOB_ADDRESSES, distribution.NUM_PROCESSES,
                 distribution.PROCESS_ID):
        base.pop(name, None)
    base["XLA_FLAGS"] = FAST_XLA_FLAG  # One device per process.
    runs = []
    for index, cluster in enumerate(clusters):
        output = folder / f"worker_{index}.npz"
        runs.append((output, subprocess.Popen(
            [sys.executable, str(WORKER), str(output)],
            env=base | cluster,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )))
    logs = []
    try:
        for _, process in runs:
            logs.append(process.communicate(timeout=TIMEOUT)[0])
    finally:
        for _, process in runs:
            if process.poll() is None:
                process.kill()
                process.wait()
    for (_, process), log in zip(runs, logs):
        assert process.returncode == 0, log[-3000:]
    return [dict(np.load(output)) for output, _ in runs]


def test_two_processes_train_as_one_process_on_the_global_batch(tmp_path):
    address = f"localhost:{free_port()}"
    first, second, alone = run_workers(tmp_path, [
        {distribution.JOB_ADDRESSES: address, distribution.NUM_PROCESSES: "2",
         distribution.PROCESS_ID: str(index)}
        for index in range(2)
    ] + [{}])
    assert (first["processes"], second["processes"], alone["processes"]) == (2, 2, 1)
    weights = sorted(key for key in alone if key.startswith("step_weight_"))
    for result in (first, second):
        # One step on the global batch of 8: loss and updated weights.
        np.testing.assert_allclose(result["step_loss"], alone["step_loss"], atol=1e-5)
        for key in weights:
            np.testing.assert_allclose(result[key], alone[key], atol=1e-5)
        # Two epochs of reshuffled batches, then the vectors
        # that every process predicts in full.
        np.testing.assert_allclose(
            result["epoch_losses"], alone["epoch_losses"], atol=1e-5)
        np.testing.assert_allclose(result["vectors"], alone["vectors"], atol=1e-5)
        assert "must split evenly over its 2 devices" in str(result["odd_batch"])
        assert "drop_remainder=True" in str(result["unsized_dataset"])
        assert result["partial_epoch_steps"] == 2
    assert alone["weight_change"] > 1e-3
    # Negatives from each process's half of the batch would give another
    # loss: the comparison above can fail.
    assert abs(alone["per_process_negatives_loss"] - alone["step_loss"]) > 1e-3


def test_start_data_parallel_needs_jax(monkeypatch):
    monkeypatch.setattr(keras.config, "backend", lambda: "tensorflow")
    with pytest.raises(RuntimeError, match="needs the JAX backend.*KERAS_BACKEND=jax"):
        distribution.start_data_parallel(distribution.Cluster("localhost:1", 2, 0))


def test_outside_a_cluster_nothing_changes():
    assert distribution.process_count() == 1
    assert distribution.is_chief()
    distribution.check_global_batch_size(7, sample_count=3)
    with distribution.every_process_predicts():
        assert distribution.process_count() == 1
