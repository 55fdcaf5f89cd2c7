"""kcse: contrastive sentence embeddings for BERT-style encoders in Keras 3.

The public names are imported on first use, so that `import kcse` (and the
`kcse` command's `--help` and argument checks) does not import Keras or
TensorFlow. Keras finds kcse's classes when it loads a `.keras` file
because kcse registers them as soon as Keras is imported: `import kcse;
keras.saving.load_model("encoder.keras")` works in either import order.
"""

import importlib
import importlib.abc
import importlib.util
import sys

__version__ = "0.1.0"

# Public name -> the module that defines it.
_EXPORTS = {
    "ConSERT": "kcse.consert",
    "PairObjective": "kcse.pair_objective",
    "SentenceEncoder": "kcse.sentence_encoder",
    "SGOpt": "kcse.sg_opt",
    "SimCSE": "kcse.simcse",
    "SupervisedSimCSE": "kcse.supervised_simcse",
}
_SUBPACKAGES = ("backbones", "data", "datasets", "evaluation", "layers", "losses")
# Importing these registers every class a saved kcse model can hold.
_SERIALIZABLE_MODULES = tuple(sorted(set(_EXPORTS.values())))


def __getattr__(name):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"kcse.{name}")
    else:
        raise AttributeError(f"module 'kcse' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_EXPORTS, *_SUBPACKAGES])


def _register_serializables():
    for module in _SERIALIZABLE_MODULES:
        importlib.import_module(module)


def _importing_kcse():
    """Whether a kcse module is being imported (it imports what it needs)."""
    return any(
        getattr(getattr(module, "__spec__", None), "_initializing", False)
        for name, module in list(sys.modules.items())
        if name.startswith("kcse.")
    )


class _RegisterWhenKerasLoads(importlib.abc.MetaPathFinder):
    """Registers kcse's Keras classes right after `keras` is first imported.

    Unless a kcse module is what imports Keras: that one registers its own
    classes, and registering the others then would import them in a cycle.
    """

    def find_spec(self, name, path=None, target=None):
        if name != "keras":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        execute = spec.loader.exec_module

        def execute_then_register(module):
            execute(module)
            if not _importing_kcse():
                _register_serializables()

        spec.loader.exec_module = execute_then_register
        return spec


if "keras" in sys.modules:
    _register_serializables()
else:
    sys.meta_path.insert(0, _RegisterWhenKerasLoads())
