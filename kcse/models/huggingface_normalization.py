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
