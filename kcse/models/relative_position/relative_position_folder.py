"""NEZHA and RoFormer Hugging Face folders read back into kcse's backbones.

keras-hub converts Hugging Face BERT and XLM-R folders, not NEZHA's or
RoFormer's. `kcse export --format huggingface` writes those two families as
transformers' `NezhaModel` / `RoFormerModel` (`kcse.export.huggingface`);
`load_relative_position_folder` is that export read backwards, with no
TensorFlow: `config.json` builds a `NezhaBackbone` or `RoFormerBackbone` as
`bert_config.json` does for the original checkpoint, `model.safetensors`
fills it (torch's `[out, in]` kernels transposed back), and the tokenizer is
the one `tokenizer_config.json`'s `kcse_tokenizer` names (NEZHA: bert4keras'
WordPiece; RoFormer: jieba first, which needs jieba). So a Su checkpoint of
these families exported on a machine with TensorFlow gives the same vectors
on one without it.

Example:
```python
import keras_hub
import kcse
from kcse.models.relative_position.relative_position_folder import (
    load_relative_position_folder)

vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "一", "个", "女", "孩"]
encoder = kcse.SentenceEncoder(
    kcse.models.NezhaBackbone(vocabulary_size=len(vocabulary), num_layers=2,
                              num_heads=2, hidden_dim=8, intermediate_dim=16),
    keras_hub.models.BertTextEmbedderPreprocessor(
        kcse.models.GoogleWordPieceTokenizer(vocabulary=vocabulary), sequence_length=16))
kcse.export.export_huggingface(encoder, "nezha-hf")
backbone, preprocessor = load_relative_position_folder("nezha-hf", sequence_length=16)
again = kcse.SentenceEncoder(backbone, preprocessor)
assert abs(again.encode(["一个女孩"]) - encoder.encode(["一个女孩"])).max() < 1e-5
```
"""

import pathlib

import numpy as np

from kcse.models.huggingface_folder import CONFIG_FILE
from kcse.models.huggingface_folder import WEIGHTS_FILE
from kcse.models.huggingface_folder import huggingface_name
from kcse.models.huggingface_folder import read_json_object

# config.json's model_types read here, also kcse's family names for them.
RELATIVE_POSITION_TYPES = ("nezha", "roformer")
# The prefix transformers' task models put before the backbone's names.
BASE_PREFIXES = {"nezha": "nezha.", "roformer": "roformer."}
# A RoFormer's rotary table: transformers keeps it as a parameter; kcse
# computes the same angles (`kcse.export.huggingface.rotary_position_table`).
ROTARY_TABLE = "encoder.embed_positions.weight"
POOLER_KERNEL = "pooler.dense.weight"


def relative_position_type(folder):
    """`config.json`'s `model_type` when it is NEZHA's or RoFormer's, else None."""
    path = pathlib.Path(folder) / CONFIG_FILE
    if not path.is_file():
        return None
    model_type = read_json_object(path, "Hugging Face config").get("model_type")
    return model_type if model_type in RELATIVE_POSITION_TYPES else None


def check_relative_position_config(config, path):
    """Raises `ValueError` naming `path` and the field for a NEZHA or RoFormer
    config kcse's backbone does not compute (RoFormer: rotary values, an
    embedding size other than the hidden size)."""
    if config.get("model_type") != "roformer":
        return
    if config.get("rotary_value", False):
        raise ValueError(f"{path}: rotary_value true: kcse's RoFormer rotates queries and "
                         "keys only (Su's checkpoints)")
    size = config.get("embedding_size", config.get("hidden_size"))
    if size != config.get("hidden_size"):
        raise ValueError(f"{path}: embedding_size {size} differs from hidden_size "
                         f"{config.get('hidden_size')}: kcse's RoFormer has no embedding "
                         "projection")


def load_relative_position_folder(folder, sequence_length=512):
    """`(backbone, preprocessor)` of a NEZHA or RoFormer Hugging Face folder.

    Every tensor of `model.safetensors` must fill a variable of the
    backbone (RoFormer's rotary table, which kcse computes, aside) and every
    variable must be filled: a `ValueError` naming the file lists the
    unknown and missing tensors. The pooler is built where the folder has
    one (P2); transformers' `RoFormerModel` has none.
    """
    from safetensors.numpy import load_file

    from kcse.models.google_checkpoint.checkpoint_converter import build_backbone
    from kcse.models.google_checkpoint.checkpoint_converter import checkpoint_variable_map
    from kcse.models.huggingface_normalization import exported_tokenizer

    folder = pathlib.Path(folder)
    path = folder / CONFIG_FILE
    config = read_json_object(path, "Hugging Face config")
    model_type = config.get("model_type")
    if model_type not in RELATIVE_POSITION_TYPES:
        raise ValueError(f"{path}: model_type {model_type!r} is not NEZHA's or RoFormer's")
    check_relative_position_config(config, path)
    # The tokenizer first: a missing jieba is one line before the weights load.
    preprocessor = exported_tokenizer(
        default_preprocessor(folder, model_type, sequence_length), folder)
    weights_path = folder / WEIGHTS_FILE
    prefix = BASE_PREFIXES[model_type]
    tensors = {name.removeprefix(prefix): value
               for name, value in load_file(str(weights_path)).items()}
    tensors.pop(ROTARY_TABLE, None)
    backbone = build_backbone(config, model_type, has_pooler=POOLER_KERNEL in tensors)
    variables = {huggingface_name(name): (name, variable)
                 for name, variable in checkpoint_variable_map(backbone).items()}
    unknown = sorted(set(tensors) - set(variables))
    missing = sorted(set(variables) - set(tensors))
    if unknown or missing:
        raise ValueError(f"{weights_path}: does not fit the {model_type} backbone of "
                         f"{path}: unknown tensors {unknown}, missing tensors {missing}")
    for name, (checkpoint_name, variable) in variables.items():
        value, shape = tensors[name], folder_shape(checkpoint_name, variable.shape)
        if value.shape != shape:
            raise ValueError(f"{weights_path}: {name} of shape {list(value.shape)}; the "
                             f"{model_type} backbone of {path} takes {list(shape)}")
        if checkpoint_name.endswith("/kernel"):
            value = value.T  # torch's Linear keeps [out, in].
        variable.assign(value.reshape(variable.shape).astype(variable.dtype))
    return backbone, preprocessor


def folder_shape(checkpoint_name, shape):
    """The shape `kcse.export.huggingface` writes a variable of `shape` in:
    kernels `[out, in]` (per-head query, key and value kernels and the
    attention output's flattened), per-head biases flat, the rest as is."""
    shape = tuple(int(size) for size in shape)
    if checkpoint_name.endswith("attention/output/dense/kernel"):
        return (shape[-1], int(np.prod(shape[:-1])))
    if checkpoint_name.endswith("/kernel"):
        return (int(np.prod(shape[1:])), shape[0])
    if len(shape) > 1 and not checkpoint_name.startswith("bert/embeddings/"):
        return (int(np.prod(shape)),)
    return shape


def default_preprocessor(folder, model_type, sequence_length):
    """The folder's `vocab.txt` cut as the family's original checkpoint is
    (`kcse_tokenizer` in `tokenizer_config.json` replaces it where present)."""
    import keras_hub

    from kcse.models.google_word_piece_tokenizer import GoogleWordPieceTokenizer
    from kcse.models.wobert.jieba_word_piece_tokenizer import JiebaWordPieceTokenizer

    vocabulary = pathlib.Path(folder) / "vocab.txt"
    if not vocabulary.is_file():
        raise ValueError(f"{vocabulary}: missing; kcse reads a {model_type} folder's "
                         "tokenizer from it")
    tokenizer_class = JiebaWordPieceTokenizer if model_type == "roformer" else GoogleWordPieceTokenizer
    return keras_hub.models.BertTextEmbedderPreprocessor(
        tokenizer_class(vocabulary=str(vocabulary)), sequence_length=sequence_length)
