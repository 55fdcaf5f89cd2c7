"""Loading original Google-format TF checkpoints of the Chinese BERT families."""

import json
import pathlib

import keras_hub
import numpy as np

from kcse.foundation import optional_packages
from kcse.models.google_checkpoint.checkpoint_index import index_files
from kcse.models.google_checkpoint.families import CHECKPOINT_FEATURE
from kcse.models.google_checkpoint.families import FAMILIES
from kcse.models.google_checkpoint.families import JIEBA_FAMILIES
from kcse.models.google_checkpoint.families import JIEBA_FEATURE
from kcse.models.google_word_piece_tokenizer import GoogleWordPieceTokenizer
from kcse.models.wobert.jieba_word_piece_tokenizer import JiebaWordPieceTokenizer
from kcse.models.bert_backbone import BertBackbone
from kcse.models.bert_backbone import config_hidden_act
from kcse.models.relative_position.relative_position_backbone import NezhaBackbone
from kcse.models.relative_position.relative_position_backbone import RoFormerBackbone
from kcse.foundation import compat
from kcse.foundation.validation import check_sequence_length

# Checkpoint variables that are not part of the encoder: pre-training heads,
# the step counter and optimizer slots.
IGNORED_PREFIXES = ("cls/", "global_step")
IGNORED_PARTS = ("adam_m", "adam_v", "Adam", "Momentum")


class CheckpointError(ValueError):
    """A checkpoint that does not fit the model; lists every problem.

    Raised by `kcse.models.from_checkpoint` for an invalid or incomplete
    `bert_config.json`, several checkpoints in one folder, and unknown,
    missing or mis-shaped variables.

    Example:
    ```python
    import json
    import os
    import kcse

    os.makedirs("broken")
    with open("broken/bert_config.json", "w") as file:
        json.dump({"vocab_size": 8, "hidden_size": 8}, file)
    try:
        kcse.models.from_checkpoint("broken")
    except kcse.models.CheckpointError as error:
        message = str(error)
    # "broken/bert_config.json lacks the field(s) ['num_hidden_layers', ...]"
    assert "lacks the field(s)" in message
    ```
    """


def checkpoint_prefix(folder):
    """The `<prefix>` of the one `<prefix>.index` checkpoint in `folder`."""
    indexes = index_files(folder)
    if not indexes:
        raise FileNotFoundError(
            f"No TF checkpoint (*.ckpt.index) in {folder}: expected the "
            "original layout bert_config.json, bert_model.ckpt.*, vocab.txt."
        )
    if len(indexes) > 1:
        raise CheckpointError(
            f"Several checkpoints in {folder}: {[p.name for p in indexes]}."
        )
    return str(indexes[0])[: -len(".index")]


REQUIRED_CONFIG_FIELDS = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
)


def read_bert_config(folder):
    """The folder's bert_config.json; names the file and any missing field."""
    path = pathlib.Path(folder) / "bert_config.json"
    if not path.is_file():
        raise FileNotFoundError(f"No bert_config.json in {folder}.")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise CheckpointError(f"{path}: not valid JSON ({error}).") from error
    missing = [field for field in REQUIRED_CONFIG_FIELDS if field not in config]
    if missing:
        raise CheckpointError(f"{path} lacks the field(s) {missing}.")
    try:
        config_hidden_act(config, path)
    except ValueError as error:
        raise CheckpointError(str(error)) from None
    return config


def build_backbone(config, family, has_pooler):
    """An untrained backbone of `family`'s architecture sized by `config`.

    Every family runs the feed-forward activation `hidden_act` names (see
    `kcse.models.bert_backbone.ACTIVATIONS`: "gelu" is the exact erf GELU,
    as Hugging Face and bert4keras read it).
    """
    common = dict(
        vocabulary_size=config["vocab_size"],
        num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"],
        hidden_dim=config["hidden_size"],
        intermediate_dim=config["intermediate_size"],
        dropout=config.get("hidden_dropout_prob", 0.1),
        activation=config_hidden_act(config, "bert_config.json"),
    )
    if family in ("nezha", "roformer"):
        backbone_class = NezhaBackbone if family == "nezha" else RoFormerBackbone
        return backbone_class(
            num_segments=config.get("type_vocab_size", 2),
            max_relative_position=config.get("max_relative_position", 64),
            use_pooler=has_pooler,
            **common,
        )
    # keras-hub's BERT (which always has a pooler) with the config's
    # activation instead of keras-hub's fixed tanh GELU.
    return BertBackbone(
        max_sequence_length=config.get("max_position_embeddings", 512),
        num_segments=config.get("type_vocab_size", 2),
        **common,
    )


def checkpoint_variable_map(backbone, prefix="bert"):
    """`{checkpoint variable name: keras variable}` for a BERT-shaped backbone.

    Works for keras-hub's `BertBackbone` and kcse's relative-position
    backbones (same layer names); position embeddings and the pooler are
    included where the backbone has them.
    """
    names = {
        "embeddings/word_embeddings": backbone.get_layer(
            "token_embedding"
        ).embeddings,
        "embeddings/token_type_embeddings": backbone.get_layer(
            "segment_embedding"
        ).embeddings,
        "embeddings/LayerNorm/gamma": backbone.get_layer(
            "embeddings_layer_norm"
        ).gamma,
        "embeddings/LayerNorm/beta": backbone.get_layer(
            "embeddings_layer_norm"
        ).beta,
    }
    layer_names = {layer.name for layer in backbone.layers}
    if "position_embedding" in layer_names:
        names["embeddings/position_embeddings"] = backbone.get_layer(
            "position_embedding"
        ).position_embeddings
    for i, block in enumerate(backbone.transformer_layers):
        block_parts = compat.transformer_block_parts(block)
        attention = block_parts["attention"]
        parts = {
            "attention/self/query": attention.query_dense,
            "attention/self/key": attention.key_dense,
            "attention/self/value": attention.value_dense,
            "attention/output/dense": attention.output_dense,
            "intermediate/dense": block_parts["intermediate"],
            "output/dense": block_parts["output"],
        }
        for part, dense in parts.items():
            names[f"encoder/layer_{i}/{part}/kernel"] = dense.kernel
            names[f"encoder/layer_{i}/{part}/bias"] = dense.bias
        norms = {
            "attention/output/LayerNorm": block_parts["attention_norm"],
            "output/LayerNorm": block_parts["output_norm"],
        }
        for part, norm in norms.items():
            names[f"encoder/layer_{i}/{part}/gamma"] = norm.gamma
            names[f"encoder/layer_{i}/{part}/beta"] = norm.beta
    if "pooled_dense" in layer_names:
        pooler = backbone.get_layer("pooled_dense")
        names["pooler/dense/kernel"] = pooler.kernel
        names["pooler/dense/bias"] = pooler.bias
    return {f"{prefix}/{name}": variable for name, variable in names.items()}


def _is_ignored(name, family):
    if name.startswith(IGNORED_PREFIXES) or any(
        part in name.split("/")[-1] for part in IGNORED_PARTS
    ):
        return True
    # bert4keras never reads absolute positions for these families.
    return family in ("nezha", "roformer") and name == (
        "bert/embeddings/position_embeddings"
    )


def load_checkpoint_weights(backbone, reader, family, allow_missing=()):
    """Assigns every encoder variable of a checkpoint (a `tf.train` reader).

    Raises one `CheckpointError` listing all unknown, missing and
    mis-shaped variables. Names in `allow_missing` may be absent.
    """
    shapes = reader.get_variable_to_shape_map()
    expected = checkpoint_variable_map(backbone)
    unknown = sorted(
        name
        for name in shapes
        if name not in expected and not _is_ignored(name, family)
    )
    missing = sorted(
        name for name in expected if name not in shapes and name not in allow_missing
    )
    misshaped = sorted(
        f"{name}: checkpoint {list(shapes[name])}, model "
        f"{list(variable.shape)}"
        for name, variable in expected.items()
        if name in shapes
        and int(np.prod(shapes[name])) != int(np.prod(variable.shape))
    )
    if unknown or missing or misshaped:
        problems = [
            f"{title} ({len(items)}):\n  " + "\n  ".join(items)
            for title, items in (
                ("unknown variables", unknown),
                ("missing variables", missing),
                ("mis-shaped variables", misshaped),
            )
            if items
        ]
        raise CheckpointError(
            f"The checkpoint does not fit a {family} "
            f"{type(backbone).__name__}:\n" + "\n".join(problems)
        )
    for name, variable in expected.items():
        if name in shapes:
            value = reader.get_tensor(name).reshape(variable.shape)
            variable.assign(value.astype(variable.dtype))


def from_checkpoint(folder, family="bert", sequence_length=512):
    """A backbone and preprocessor from an original Google-format checkpoint.

    `folder` holds `bert_config.json`, one TF checkpoint
    (`bert_model.ckpt.index` / `.data-*`) and `vocab.txt`, as released for
    Google's Chinese BERT, HFL's RoBERTa-wwm-ext, ZhuiyiTechnology's SimBERT
    (base / small / tiny), WoBERT and RoFormer, and Huawei's NEZHA.

    Families: `"bert"`, `"roberta"` (wwm-ext: BERT architecture), `"simbert"`
    and `"wobert"` load into `kcse.models.BertBackbone` (keras-hub's
    `BertBackbone` with a chosen activation); `"nezha"` into
    `kcse.models.NezhaBackbone`; `"roformer"` into
    `kcse.models.RoFormerBackbone`. Every family runs the feed-forward
    activation `bert_config.json`'s `hidden_act` names, read as Hugging Face
    and bert4keras read it: `"gelu"` is the exact erf GELU (Google's
    original TF code computed its tanh approximation instead),
    `"gelu_new"` the tanh approximation; absent, `"gelu"`; an unknown name
    is a `CheckpointError`. The backbone's config keeps it
    (`backbone.get_config()["activation"]`). Every variable under `bert/` must map
    onto the model: unknown, missing or mis-shaped variables raise one
    `CheckpointError` listing them (pre-training heads `cls/*`, the step
    counter and optimizer slots are skipped). The pretrained pooler is
    loaded where the checkpoint has one; WoBERT and RoFormer have none: the
    RoFormer backbone is then built without a pooler, and WoBERT's keras-hub
    backbone keeps an all-zero pooler, which `SentenceEncoder` rejects for
    P2 pooling.

    The preprocessor tokenises with the folder's `vocab.txt` as bert4keras'
    `Tokenizer(vocab, do_lower_case=...)` does (`GoogleWordPieceTokenizer`;
    `do_lower_case` from `bert_config.json`, else True), with jieba word
    segmentation first for WoBERT and RoFormer (`JiebaWordPieceTokenizer`,
    which then cannot be part of an exported graph).

    Reading the checkpoint needs TensorFlow (on any Keras backend), and
    WoBERT's and RoFormer's tokenizer jieba: without them, a `kcse.foundation.optional_packages.MissingPackageError` names its `pip
    install`, before any work.

    Returns:
        `(backbone, preprocessor)`, ready for `kcse.SentenceEncoder`.

    Example:
    ```python
    import json
    import os
    import numpy as np
    import tensorflow as tf
    import kcse

    # A tiny random one-layer BERT in Google's layout (variable: shape).
    shapes = {"embeddings/word_embeddings": (8, 8),
              "embeddings/position_embeddings": (16, 8),
              "embeddings/token_type_embeddings": (2, 8),
              "pooler/dense/kernel": (8, 8), "pooler/dense/bias": (8,)}
    for part in ("embeddings", "encoder/layer_0/attention/output",
                 "encoder/layer_0/output"):
        shapes[f"{part}/LayerNorm/gamma"] = shapes[f"{part}/LayerNorm/beta"] = (8,)
    for dense, (inputs, units) in {
        "attention/self/query": (8, 8), "attention/self/key": (8, 8),
        "attention/self/value": (8, 8), "attention/output/dense": (8, 8),
        "intermediate/dense": (8, 16), "output/dense": (16, 8),
    }.items():
        shapes[f"encoder/layer_0/{dense}/kernel"] = (inputs, units)
        shapes[f"encoder/layer_0/{dense}/bias"] = (units,)
    os.makedirs("tiny_bert")
    with open("tiny_bert/bert_config.json", "w") as file:
        json.dump({"vocab_size": 8, "hidden_size": 8, "num_hidden_layers": 1,
                   "num_attention_heads": 2, "intermediate_size": 16,
                   "max_position_embeddings": 16, "type_vocab_size": 2,
                   "hidden_act": "gelu"}, file)
    with open("tiny_bert/vocab.txt", "w", encoding="utf-8") as file:
        for token in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "猫", "狗", "坐"]:
            print(token, file=file)
    tf.raw_ops.SaveV2(
        prefix="tiny_bert/bert_model.ckpt",
        tensor_names=[f"bert/{name}" for name in shapes],
        shape_and_slices=[""] * len(shapes),
        tensors=[np.random.normal(size=s).astype("float32") for s in shapes.values()],
    )

    # A released folder loads the same way, e.g. "chinese_L-12_H-768_A-12".
    backbone, preprocessor = kcse.models.from_checkpoint(
        "tiny_bert", family="bert", sequence_length=8
    )
    assert backbone.get_config()["activation"] == "gelu"  # exact erf GELU
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="P3")
    vectors = encoder.encode(["猫坐", "狗"])
    assert vectors.shape == (2, 8)
    ```
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}; got {family!r}.")
    tf = optional_packages.require("tensorflow", CHECKPOINT_FEATURE)
    if family in JIEBA_FAMILIES:
        optional_packages.require("jieba", JIEBA_FEATURE)
    check_sequence_length(sequence_length)
    folder = pathlib.Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"Checkpoint folder {folder} does not exist.")
    config = read_bert_config(folder)
    prefix = checkpoint_prefix(folder)
    reader = tf.train.load_checkpoint(prefix)
    has_pooler = reader.has_tensor("bert/pooler/dense/kernel")
    backbone = build_backbone(config, family, has_pooler)
    pooler = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")
    try:
        load_checkpoint_weights(
            backbone, reader, family, allow_missing=() if has_pooler else pooler
        )
    except CheckpointError as error:
        raise CheckpointError(f"{prefix}: {error}") from None
    layer_names = {layer.name for layer in backbone.layers}
    if not has_pooler and "pooled_dense" in layer_names:
        for variable in backbone.get_layer("pooled_dense").weights:
            variable.assign(np.zeros(variable.shape, variable.dtype))
    return backbone, build_preprocessor(folder, family, config, sequence_length)


def build_preprocessor(folder, family, config, sequence_length):
    """The text preprocessor for `family` from the folder's vocab.txt."""
    vocabulary = pathlib.Path(folder) / "vocab.txt"
    if not vocabulary.is_file():
        raise FileNotFoundError(f"No vocab.txt in {folder}.")
    # bert4keras' `Tokenizer(vocab, do_lower_case=...)`, as Su's scripts cut.
    tokenizer_class = (JiebaWordPieceTokenizer if family in JIEBA_FAMILIES
                       else GoogleWordPieceTokenizer)
    tokenizer = tokenizer_class(vocabulary=str(vocabulary),
                                lowercase=config.get("do_lower_case", True))
    return keras_hub.models.BertTextEmbedderPreprocessor(
        tokenizer, sequence_length=sequence_length
    )
