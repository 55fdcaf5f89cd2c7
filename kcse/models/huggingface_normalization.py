"""What keras-hub's conversion of Hugging Face folders leaves out."""

import json
import pathlib


def match_huggingface_normalization(tokenizer, folder):
    """Makes a converted WordPiece tokenizer normalise text as HF does.

    keras-hub converts `do_lower_case` but never strips accents, while HF's
    BERT tokenizer strips them whenever it lowercases, unless
    `strip_accents` says otherwise: with all-MiniLM-L6-v2, "résumé" is
    `resume` in HF and `[UNK]` after keras-hub's conversion. Reads
    `tokenizer_config.json` in `folder` and sets `tokenizer.strip_accents`
    the HF way. Does nothing for other folders or tokenizers.
    """
    config_path = pathlib.Path(folder) / "tokenizer_config.json"
    if not config_path.is_file() or not hasattr(tokenizer, "strip_accents"):
        return
    config = json.loads(config_path.read_text(encoding="utf-8"))
    lowercase = config.get("do_lower_case", False)
    strip_accents = config.get("strip_accents")
    tokenizer.strip_accents = lowercase if strip_accents is None else strip_accents


# The `tokenizer_config.json` field naming the kcse tokenizer a folder was
# exported with, when it is not keras-hub's (the bert4keras cut).
EXPORTED_TOKENIZER_FIELD = "kcse_tokenizer"


def cuts_with_jieba(folder):
    """Whether `folder` is read back with kcse's jieba tokenizer (WoBERT's,
    RoFormer's): its `tokenizer_config.json` names it in `kcse_tokenizer`,
    or its `config.json` is a RoFormer's. Files that cannot be read say
    False here; the folder's checks name them."""
    folder = pathlib.Path(str(folder))
    fields = {"tokenizer_config.json": EXPORTED_TOKENIZER_FIELD, "config.json": "model_type"}
    found = {}
    for name, field in fields.items():
        try:
            found[name] = json.loads((folder / name).read_text(encoding="utf-8")).get(field)
        except (OSError, ValueError, AttributeError):
            found[name] = None
    return (found["tokenizer_config.json"] == "JiebaWordPieceTokenizer"
            or found["config.json"] == "roformer")


def exported_tokenizer(preprocessor, folder):
    """The preprocessor of a folder kcse exported, cutting as the encoder did.

    keras-hub reads a folder's `vocab.txt` into its own `BertTokenizer`,
    which folds full-width forms ("，" → ","); a folder exported from a
    Google-format checkpoint names `GoogleWordPieceTokenizer` or
    `JiebaWordPieceTokenizer` in `tokenizer_config.json`'s `kcse_tokenizer`,
    and is read back with that tokenizer (the jieba one needs jieba: a
    `kcse.foundation.optional_packages.MissingPackageError` says so as the folder
    loads). Other folders keep `preprocessor`.
    """
    config_path = pathlib.Path(folder) / "tokenizer_config.json"
    if not config_path.is_file():
        return preprocessor
    config = json.loads(config_path.read_text(encoding="utf-8"))
    name = config.get(EXPORTED_TOKENIZER_FIELD)
    if name is None:
        return preprocessor
    import keras_hub

    from kcse.models.google_word_piece_tokenizer import GoogleWordPieceTokenizer
    from kcse.models.wobert.jieba_word_piece_tokenizer import JiebaWordPieceTokenizer
    from kcse.models.wobert.jieba_word_piece_tokenizer import jieba

    classes = {cls.__name__: cls for cls in (GoogleWordPieceTokenizer, JiebaWordPieceTokenizer)}
    if name not in classes:
        raise ValueError(f"{config_path}: {EXPORTED_TOKENIZER_FIELD} {name!r} is not one of "
                         f"{sorted(classes)}")
    if classes[name] is JiebaWordPieceTokenizer:
        jieba()  # Without it: one line naming the feature and its pip install.
    tokenizer = classes[name](
        vocabulary=preprocessor.tokenizer.get_vocabulary(),
        lowercase=config.get("do_lower_case", True), strip_accents=config.get("strip_accents"))
    return keras_hub.models.BertTextEmbedderPreprocessor(
        tokenizer, sequence_length=preprocessor.sequence_length)
