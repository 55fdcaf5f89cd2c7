"""kcse: contrastive sentence embeddings for BERT-style encoders in Keras 3.

The public names (declared once, in `kcse.public_api`) are imported on
first use, so that `import kcse` (and the `kcse` command's `--help` and
argument checks) does not import Keras or TensorFlow. Keras finds kcse's
classes when it loads a `.keras` file because kcse registers them as soon
as Keras is imported: `import kcse; keras.saving.load_model("encoder.keras")`
works in either import order. The first public name that imports
TensorFlow (`kcse.SentenceEncoder`) starts it without its start-up lines,
at the user's `TF_CPP_MIN_LOG_LEVEL` (`kcse.foundation.keras_start`).
`import kcse` also points transformers (which sentence-transformers and
mteb load) at torch where tf-keras is not installed and `USE_TF` is unset
(`kcse.foundation.transformers_backend`).
"""

import importlib
import importlib.abc
import importlib.util
import sys

from kcse import public_api
from kcse.foundation.transformers_backend import use_torch_transformers

__version__ = "0.1.0"

__all__, __getattr__, __dir__ = public_api.exports(__name__)

use_torch_transformers()


def _register_serializables():
    for module in public_api.SERIALIZABLE_MODULES:
        importlib.import_module(module)


def _importing_kcse():
    """Whether a kcse module is being imported (it imports what it needs)."""
    return any(
        getattr(getattr(module, "__spec__", None), "_initializing", False)
        for name, module in list(sys.modules.items())
        if name.startswith("kcse.")
    )


def _initializing(name):
    """Whether module `name` is being imported (its code still running)."""
    module = sys.modules.get(name)
    return getattr(getattr(module, "__spec__", None), "_initializing", False)


class _RegisterWhenKerasLoads(importlib.abc.MetaPathFinder):
    """Registers kcse's Keras classes right after `keras` is first imported.

    When keras-hub's import is what imports Keras, right after keras-hub's
    instead: kcse's classes use `keras_hub.models`, which is not there yet
    while keras-hub loads. Nothing is registered when a kcse module is what
    imports Keras: that one registers its own classes, and registering the
    others then would import them in a cycle.
    """

    def find_spec(self, name, path=None, target=None):
        if name not in ("keras", "keras_hub"):
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        execute = spec.loader.exec_module

        def execute_then_register(module):
            execute(module)
            keras_hub_loading = name != "keras_hub" and _initializing("keras_hub")
            if "keras" in sys.modules and not keras_hub_loading and self in sys.meta_path:
                sys.meta_path.remove(self)
                if not _importing_kcse():
                    _register_serializables()

        spec.loader.exec_module = execute_then_register
        return spec


if "keras" in sys.modules:
    _register_serializables()
else:
    sys.meta_path.insert(0, _RegisterWhenKerasLoads())
