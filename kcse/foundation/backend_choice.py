"""The Keras backend a command will run on, known before Keras is imported.

Keras picks its backend when it is first imported: `KERAS_BACKEND` when
set and not empty, else the `"backend"` of `keras.json` in `KERAS_HOME`
(default `~/.keras`), else TensorFlow; a name it does not know is a
`ValueError` from deep inside that import. The `kcse` command and the
recipes check the choice with their arguments (`check_backend`), so an
unknown or unsupported backend, or a format that needs TensorFlow on JAX,
is one line before any work rather than a traceback after the model loads.

kcse runs on TensorFlow (its default, and what the SavedModel and ONNX
exports need) and JAX (`SUPPORTED_BACKENDS`); Keras' other backends
(torch, numpy, openvino) are not tested with kcse's models and layers.

Example:
```python
from kcse.foundation import backend_choice

# `KERAS_BACKEND=jax python ...`: "jax", read before Keras is imported.
print(backend_choice.chosen_backend())
backend_choice.check_backend()  # UsageError unless tensorflow or jax
```
"""

import json
import os
import pathlib
import sys

from kcse.foundation import optional_packages
from kcse.foundation.arguments import UsageError

SUPPORTED_BACKENDS = ("tensorflow", "jax")


def chosen_backend():
    """The backend Keras runs on in this process, or will when imported.

    Read as Keras reads it (`KERAS_BACKEND`, else `keras.json`'s
    `"backend"`, else `"tensorflow"`) while Keras is not imported yet;
    Keras' own answer once it is.
    """
    if "keras" in sys.modules and hasattr(sys.modules["keras"], "config"):
        return sys.modules["keras"].config.backend()
    if os.environ.get("KERAS_BACKEND"):
        return os.environ["KERAS_BACKEND"]
    return keras_json().get("backend", "tensorflow")


def keras_json_path():
    """Where Keras reads its settings: `$KERAS_HOME/keras.json`, by default
    `~/.keras/keras.json` (`/tmp/.keras` when home cannot be written)."""
    home = os.environ.get("KERAS_HOME")
    if home is None:
        base = os.path.expanduser("~")
        home = os.path.join(base if os.access(base, os.W_OK) else "/tmp", ".keras")
    return pathlib.Path(os.path.expanduser(home)) / "keras.json"


def keras_json():
    """The settings of Keras' `keras.json` ({} when absent or not JSON, as
    Keras takes it)."""
    try:
        settings = json.loads(keras_json_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return settings if isinstance(settings, dict) else {}


def where_chosen():
    """Where `chosen_backend()` comes from, in words (for messages)."""
    if os.environ.get("KERAS_BACKEND"):
        return "KERAS_BACKEND"
    return f"the \"backend\" of {keras_json_path()}"


def check_backend(needs_tensorflow=None):
    """Raises `UsageError` unless the chosen backend is one kcse runs on,
    and TensorFlow when `needs_tensorflow` (a description of what needs it,
    e.g. `"--format onnx"`) is given: then TensorFlow must be installed,
    else the line names its `pip install`."""
    if needs_tensorflow and not optional_packages.installed("tensorflow"):
        raise UsageError(optional_packages.missing_package_message("tensorflow", needs_tensorflow))
    backend = chosen_backend()
    if backend not in SUPPORTED_BACKENDS:
        raise UsageError(
            f"{where_chosen()}={backend}: kcse runs on the Keras backends "
            f"{' and '.join(SUPPORTED_BACKENDS)}; set KERAS_BACKEND=tensorflow "
            "(or jax)")
    if needs_tensorflow and backend != "tensorflow":
        raise UsageError(
            f"{needs_tensorflow} runs on the TensorFlow backend; this is "
            f"{where_chosen()}={backend}: run it with KERAS_BACKEND=tensorflow "
            "(a .keras file saved on any backend exports there)")
