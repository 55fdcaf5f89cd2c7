"""Random-weight checkpoints in the original Google BERT variable layout."""

import json
import pathlib

import numpy as np
import tensorflow as tf
from conftest import tiny_vocabulary

TINY_CONFIG = {
    "vocab_size": 40,
    "hidden_size": 8,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 16,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 32,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
}


def checkpoint_arrays(config, position_embeddings=True, pooler=True, seed=0):
    """Every variable of a Google-layout BERT checkpoint, random values.

    Includes the pre-training heads and step counter real checkpoints carry.
    """
    rng = np.random.default_rng(seed)
    hidden, inner = config["hidden_size"], config["intermediate_size"]

    def normal(*shape):
        return rng.normal(0.0, 0.5, size=shape).astype("float32")

    arrays = {
        "bert/embeddings/word_embeddings": normal(config["vocab_size"], hidden),
        "bert/embeddings/token_type_embeddings": normal(
            config["type_vocab_size"], hidden
        ),
        "bert/embeddings/LayerNorm/gamma": 1 + normal(hidden) / 5,
        "bert/embeddings/LayerNorm/beta": normal(hidden) / 5,
        "cls/predictions/output_bias": normal(config["vocab_size"]),
        "cls/seq_relationship/output_weights": normal(2, hidden),
        "global_step": np.array(1000, "int64"),
    }
    if position_embeddings:
        arrays["bert/embeddings/position_embeddings"] = normal(
            config["max_position_embeddings"], hidden
        )
    for i in range(config["num_hidden_layers"]):
        layer = f"bert/encoder/layer_{i}"
        for part in ("attention/self/query", "attention/self/key",
                     "attention/self/value", "attention/output/dense"):
            arrays[f"{layer}/{part}/kernel"] = normal(hidden, hidden)
            arrays[f"{layer}/{part}/bias"] = normal(hidden)
        arrays[f"{layer}/intermediate/dense/kernel"] = normal(hidden, inner)
        arrays[f"{layer}/intermediate/dense/bias"] = normal(inner)
        arrays[f"{layer}/output/dense/kernel"] = normal(inner, hidden)
        arrays[f"{layer}/output/dense/bias"] = normal(hidden)
        for norm in ("attention/output/LayerNorm", "output/LayerNorm"):
            arrays[f"{layer}/{norm}/gamma"] = 1 + normal(hidden) / 5
            arrays[f"{layer}/{norm}/beta"] = normal(hidden) / 5
    if pooler:
        arrays["bert/pooler/dense/kernel"] = normal(hidden, hidden)
        arrays["bert/pooler/dense/bias"] = normal(hidden)
    return arrays


def write_checkpoint(folder, arrays, config, vocabulary):
    """Writes bert_config.json, bert_model.ckpt.* and vocab.txt to `folder`."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bert_config.json").write_text(json.dumps(config))
    (folder / "vocab.txt").write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    names = sorted(arrays)
    tf.raw_ops.SaveV2(
        prefix=str(folder / "bert_model.ckpt"),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(arrays[name]) for name in names],
    )
    return folder


# A vocabulary of English words and CJK characters, and sentences in it.
VOCABULARY = tiny_vocabulary() + [chr(0x4E00 + i) for i in range(21)]
SENTENCES = ["the cat sat on the mat", "一丁丂七", "a dog 丄丅 ran", "blue"]


def write_family(tmp_path, family, pooler=True, config=None):
    """A random checkpoint folder of a kcse family, in its original layout."""
    config = dict(config or TINY_CONFIG)
    arrays = checkpoint_arrays(
        config, position_embeddings=family not in ("nezha", "roformer"), pooler=pooler
    )
    return write_checkpoint(tmp_path / family, arrays, config, VOCABULARY)


def torch_outputs(model, features):
    """A Hugging Face model's outputs on kcse's features, and the real tokens.

    `(last_hidden_state, pooler_output or None, padding mask as bool)`.
    """
    import torch

    model.eval()
    with torch.no_grad():
        output = model(
            input_ids=torch.tensor(features["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(features["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(features["padding_mask"], dtype=torch.long),
        )
    mask = features["padding_mask"].astype(bool)
    return output.last_hidden_state.numpy(), output.get("pooler_output"), mask


def hugging_face_checkpoint(tmp_path, family, pooler=True, config=TINY_CONFIG):
    """The same weights without pre-training heads, which HF's loaders need
    model classes for."""
    arrays = checkpoint_arrays(
        config,
        position_embeddings=family not in ("nezha", "roformer"),
        pooler=pooler,
    )
    arrays = {k: v for k, v in arrays.items() if k.startswith("bert/")}
    if family == "roformer":  # HF's RoFormerModel has no pooler.
        arrays = {k: v for k, v in arrays.items() if "pooler" not in k}
    folder = write_checkpoint(tmp_path / "hf", arrays, config, VOCABULARY)
    return str(folder / "bert_model.ckpt")


def hf_config(config_class, config=TINY_CONFIG, **extra):
    """An HF config of the bert_config.json written (its `hidden_act`
    included), without dropout."""
    config = dict(config, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config.update(extra)
    return config_class(**config)
