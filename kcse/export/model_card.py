"""The model card (README.md) of an exported sentence-transformers folder.

It says what the folder computes (backbone, pooling, whitening,
normalisation, prompts) and what loading it needs (rjieba for a jieba
tokenizer), how it was trained and what kcse measured when
`kcse train`'s record is given, and the licence of the training data,
from kcse's data card of the task.
"""

import importlib.metadata
import pathlib

from kcse.data.chinese import DATA_CARDS

# kcse's data cards, in its source tree (a wheel has none: the card then
# names the file).
DATA_CARD_FOLDER = pathlib.Path(__file__).resolve().parents[2] / "data_cards"


def card_section(card, title):
    """The text of `## title` in a data card, or None when the card is not here."""
    path = DATA_CARD_FOLDER / card
    if not path.is_file():
        return None
    lines = path.read_text(encoding="utf-8").splitlines()
    try:
        start = lines.index(f"## {title}") + 1
    except ValueError:
        return None
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join(lines[start:end]).strip()


def data_licence(task):
    """What the model card says of the training data's licence."""
    card = DATA_CARDS.get(task)
    if card is None:
        return (f"The training data ({task}) is not one of kcse's cards: its "
                "licence is the trainer's to state.")
    text = card_section(card, "Licence")
    where = f"kcse's data card `data_cards/{card}`"
    return f"{text}\n\n(From {where}.)" if text else f"See {where}."


def table(rows):
    lines = ["| | |", "|---|---|"]
    return "\n".join(lines + [f"| {key} | {value} |" for key, value in rows])


def model_section(encoder, modules):
    from kcse.export.huggingface import huggingface_architecture

    backbone = encoder.backbone
    _, architecture = huggingface_architecture(backbone, encoder.preprocessor.tokenizer)
    whitening = encoder.whitening
    rows = [
        ("backbone", f"{architecture} (kcse's {type(backbone).__name__}): "
                     f"{backbone.num_layers} layers, hidden "
                     f"{backbone.hidden_dim}, {backbone.num_heads} heads, vocabulary "
                     f"{backbone.vocabulary_size}"),
        ("pooling", f"`{encoder.pooling}`"),
        ("whitening", "none" if whitening is None else
         f"{whitening.kernel.shape[0]} → {whitening.kernel.shape[1]} dimensions"),
        ("L2-normalised", "yes" if encoder.normalize else "no"),
        ("output dimension", encoder.output_dim),
        ("maximum tokens", encoder.preprocessor.sequence_length),
        ("modules", ", ".join(kind.rsplit(".", 1)[1] for kind, _ in modules)),
    ]
    return "## Model\n\n" + table(rows)


def training_section(training):
    if not training:
        return ("## Training\n\nNo training record was given to the export "
                "(`kcse train` writes one beside the encoder: train.json).")
    rows = [(key, training.get(key)) for key in
            ("model", "model_source", "method", "task", "protocol", "training_samples")]
    rows += [(key, value) for key, value in sorted(training.get("settings", {}).items())]
    lines = ["## Training", "", f"Trained by `kcse train` ({training.get('method')}).", "",
             table(rows), "", "## Scores kcse measured", "",
             "| split | Spearman ×100 before | after |", "|---|---|---|"]
    scores = [(training.get(when) or {}).get("spearman") for when in ("before", "after")]
    lines.append(f"| {training.get('task')} test | " + " | ".join(
        "-" if score is None else f"{score:.2f}" for score in scores) + " |")
    lines += ["", "## Training data and licence", "", data_licence(training.get("task"))]
    return "\n".join(lines)


def model_card(encoder, modules, prompts, training):
    """The README.md text of an exported folder."""
    use = ["```python", "from sentence_transformers import SentenceTransformer", "",
           'model = SentenceTransformer("path/to/this/folder")',
           'vectors = model.encode(["一个女孩在梳头。", "A girl is combing her hair."])',
           "```"]
    from kcse.export.word_piece_json import is_jieba

    if is_jieba(encoder.preprocessor.tokenizer):
        use += ["", "The tokenizer is transformers' `RoFormerTokenizer`, which cuts words "
                "with jieba's Rust port: `pip install rjieba` first."]
    if prompts:
        use += ["", "Prompts (`encode(texts, prompt_name=...)`): "
                + ", ".join(f"`{name}`: {text!r}" for name, text in prompts.items()) + "."]
    if encoder.default_prompt_name is not None:
        use += ["", f"`encode(texts)` prepends the default prompt `{encoder.default_prompt_name}` "
                f"({encoder.default_prompt!r}), the one the model was scored with; "
                '`encode(texts, prompt="")` encodes the texts as they are.']
    return "\n".join([
        "---", "library_name: sentence-transformers", "pipeline_tag: sentence-similarity",
        "tags:", "- sentence-transformers", "- sentence-similarity", "- feature-extraction",
        "- kcse", "---", "",
        f"# Sentence embedder exported by kcse {importlib.metadata.version('kcse')}", "",
        "A sentence-transformers folder written by kcse's export; its vectors equal "
        "kcse's `SentenceEncoder.encode` (float32).", "",
        *use, "", model_section(encoder, modules), "", training_section(training), "",
    ])
