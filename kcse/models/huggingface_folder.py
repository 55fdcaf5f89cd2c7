"""A Hugging Face model folder checked from its files, before it loads.

keras-hub converts a Hugging Face folder (`config.json`, `model.safetensors`,
the tokenizer files) into its backbone; a folder that was edited or damaged
(a truncated `model.safetensors`, a `num_hidden_layers` or `model_type` that
no longer matches the weights) otherwise fails deep inside that conversion,
after TensorFlow has started. `check_huggingface_folder` reads the JSON and
the safetensors header only (the header gives every tensor's shape) and
raises a `ValueError` naming the file and field. Standard library only, so
the commands check `--model` with it before TensorFlow starts.
`huggingface_name` maps a Google-checkpoint variable's name to the
folder's tensor name (the export writes by it, NEZHA's and RoFormer's
folders are read back by it).

Example:
```python
import json, pathlib
from kcse.models.huggingface_folder import check_huggingface_folder

folder = pathlib.Path("edited-model")
folder.mkdir()
(folder / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
try:
    check_huggingface_folder(folder)
except ValueError as error:
    print(error)  # edited-model/config.json: model_type 'gpt2': ...
```
"""

import json
import math
import pathlib
import re

CONFIG_FILE = "config.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
WEIGHTS_FILE = "model.safetensors"
# Hugging Face `model_type`s kcse builds a `SentenceEncoder` on: BERT and
# XLM-R (keras-hub's converters), NEZHA and RoFormer (kcse's backbones,
# `kcse.models.relative_position.relative_position_folder`).
BACKBONE_TYPES = ("bert", "xlm-roberta", "nezha", "roformer")
# Those whose tokenizer is read from `vocab.txt` and `tokenizer_config.json`.
WORD_PIECE_TYPES = ("bert", "nezha", "roformer")
# Bytes of one element, by safetensors dtype name.
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "I16": 2,
               "F16": 2, "BF16": 2, "U32": 4, "I32": 4, "F32": 4, "U64": 8, "I64": 8, "F64": 8}
# config.json fields the weights' shapes are compared with.
SIZE_FIELDS = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
               "intermediate_size", "max_position_embeddings", "type_vocab_size")
# Tensor (its name's end) -> the config fields giving its shape.
TENSOR_SHAPES = {
    "embeddings.word_embeddings.weight": ("vocab_size", "hidden_size"),
    "embeddings.position_embeddings.weight": ("max_position_embeddings", "hidden_size"),
    "embeddings.token_type_embeddings.weight": ("type_vocab_size", "hidden_size"),
    "encoder.layer.0.intermediate.dense.weight": ("intermediate_size", "hidden_size"),
}


def read_json_object(path, what="JSON object"):
    """The JSON object in file `path`; a `ValueError` naming it (and the
    line and column JSON stopped at) otherwise."""
    try:
        value = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON ({error.msg} at line {error.lineno}, "
                         f"column {error.colno})") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot be read ({error})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: not a {what} (a {type(value).__name__})")
    return value


def safetensors_shapes(path):
    """`{tensor name: shape}` from a safetensors file's header, checked whole.

    The header (an 8-byte length, then JSON) gives each tensor's dtype,
    shape and byte range; the file must hold every byte it describes.
    Raises a `ValueError` naming the file for a truncated or malformed one.
    """
    path = pathlib.Path(path)
    size = path.stat().st_size
    with path.open("rb") as file:
        length = int.from_bytes(file.read(8), "little") if size >= 8 else None
        if length is None or length > size - 8:
            raise ValueError(f"{path}: truncated ({size} bytes): its header is cut; "
                             "copy or export the folder again")
        try:
            header = json.loads(file.read(length))
        except ValueError:
            header = None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: not a safetensors file (its header is not a JSON object)")
    shapes, end = {}, 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, stop) = entry["dtype"], entry["shape"], entry["data_offsets"]
            expected = math.prod(shape) * DTYPE_BYTES[dtype]
        except (TypeError, KeyError, ValueError):
            raise ValueError(f"{path}: not a safetensors file (tensor {name!r}: "
                             f"{json.dumps(entry)[:80]})") from None
        if stop - begin != expected:
            raise ValueError(f"{path}: tensor {name!r} of shape {shape} ({dtype}) needs "
                             f"{expected} bytes; the header gives it {stop - begin}")
        shapes[name] = tuple(shape)
        end = max(end, stop)
    if 8 + length + end > size:
        raise ValueError(f"{path}: truncated: {size} bytes, where its header describes "
                         f"{8 + length + end}; copy or export the folder again")
    return shapes


def check_huggingface_folder(folder):
    """Checks a Hugging Face folder's `config.json` against its weights.

    Returns the config (a dict), or None for a folder that is not a Hugging
    Face model (no `config.json`, or keras-hub's own preset layout, whose
    `config.json` names a `class_name`). Raises a `ValueError` naming the
    file and field: a config that is not a JSON object, a `model_type`
    kcse does not build on (`BACKBONE_TYPES`), a size that is not a
    positive integer, a `hidden_size` the heads do not divide, a
    `model.safetensors` that is truncated or whose tensors' shapes or
    layer count differ from the config's, and missing tokenizer files
    (`check_tokenizer_files`).
    """
    folder = pathlib.Path(folder)
    path = folder / CONFIG_FILE
    if not path.is_file():
        return None
    config = read_json_object(path, "Hugging Face config")
    if "class_name" in config:  # keras-hub's preset layout.
        return None
    model_type = config.get("model_type")
    if model_type not in BACKBONE_TYPES:
        raise ValueError(
            f"{path}: model_type {model_type!r}: kcse reads Hugging Face folders of model_type "
            f"{', '.join(map(repr, BACKBONE_TYPES))}")
    for field in SIZE_FIELDS:
        value = config.get(field)
        if field in config and not (isinstance(value, int) and not isinstance(value, bool)
                                    and value >= 1):
            raise ValueError(f"{path}: {field} must be a positive integer; got {value!r}")
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if hidden and heads and hidden % heads:
        raise ValueError(f"{path}: hidden_size {hidden} is not a multiple of "
                         f"num_attention_heads {heads}")
    weights = folder / WEIGHTS_FILE
    if weights.is_file():
        check_weight_shapes(config, path, safetensors_shapes(weights), weights)
    check_tokenizer_files(folder, model_type)
    return config


def check_tokenizer_files(folder, model_type):
    """The files the tokenizer is read from are there: XLM-R's
    `sentencepiece.bpe.model`; BERT's, NEZHA's and RoFormer's `tokenizer_config.json` with
    `do_lower_case`, and `vocab.txt` (or the SentencePiece model where
    `tokenizer_class` names XLM-R's, as multilingual-e5's)."""
    sentencepiece = "sentencepiece.bpe.model"
    if model_type in WORD_PIECE_TYPES:
        path = folder / TOKENIZER_CONFIG_FILE
        if not path.is_file():
            raise ValueError(f"{path}: missing; keras-hub reads a BERT folder's tokenizer "
                             "settings from it")
        config = read_json_object(path, "tokenizer config")
        if "XLMRoberta" not in str(config.get("tokenizer_class", "")):
            if not isinstance(config.get("do_lower_case"), bool):
                raise ValueError(f"{path}: do_lower_case must be true or false; got "
                                 f"{config.get('do_lower_case')!r}")
            sentencepiece = "vocab.txt"
    if not (folder / sentencepiece).is_file():
        raise ValueError(f"{folder / sentencepiece}: missing; keras-hub reads the tokenizer from "
                         "it (a folder with tokenizer.json alone is not read yet)")


def check_weight_shapes(config, path, shapes, weights):
    """`config` (read from `path`) agrees with the tensors of `weights`."""
    blocks = sorted({int(match.group(1)) for name in shapes
                     if (match := re.search(r"(?:^|\.)encoder\.layer\.(\d+)\.", name))})
    layers = config.get("num_hidden_layers")
    if layers is not None and blocks != list(range(layers)):
        held = f"{len(blocks)} (encoder.layer.{blocks[0]} to {blocks[-1]})" if blocks else "none"
        raise ValueError(f"{path}: num_hidden_layers {layers}, but {weights} holds "
                         f"{held} transformer layers")
    for suffix, fields in TENSOR_SHAPES.items():
        names = [name for name in shapes if name == suffix or name.endswith("." + suffix)]
        if not names or any(field not in config for field in fields):
            continue
        expected = tuple(config[field] for field in fields)
        if shapes[names[0]] != expected:
            said = ", ".join(f"{field} {config[field]}" for field in fields)
            raise ValueError(f"{path}: {said}, but {weights} holds {names[0]} of shape "
                             f"{list(shapes[names[0]])}")


def huggingface_name(checkpoint_name):
    """transformers' parameter name for a Google-checkpoint variable name.

    `bert/encoder/layer_0/attention/self/query/kernel` →
    `encoder.layer.0.attention.self.query.weight`, as transformers'
    `load_tf_weights_in_bert` maps them (kernel and gamma → weight, beta →
    bias, a bare embedding table → its `.weight`).
    """
    parts = checkpoint_name.split("/")[1:]
    parts = [re.sub(r"^layer_(\d+)$", r"layer.\1", part) for part in parts]
    renamed = {"kernel": "weight", "gamma": "weight", "beta": "bias"}
    if parts[-1] in renamed:
        parts[-1] = renamed[parts[-1]]
    elif parts[-1] != "bias":
        parts.append("weight")
    return ".".join(parts)
