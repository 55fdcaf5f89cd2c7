"""A tiny comparison grid: real STS-B pairs and a random BERT checkpoint."""

import importlib
import json
import pathlib
import sys

import pytest

import kcse
from checkpoints import TINY_CONFIG
from checkpoints import checkpoint_arrays
from checkpoints import write_checkpoint

SPLIT_PAIRS = {"train": 76, "valid": 37, "test": 37}  # 300 sentences.


def write_task(folder, task, pairs_by_split, scale):
    """`<folder>/<task>/<task>.<split>.data` from (s1, s2, label) lists."""
    (folder / task).mkdir(parents=True, exist_ok=True)
    for split, pairs in pairs_by_split.items():
        lines = [f"{a}\t{b}\t{scale(label)}" for a, b, label in pairs]
        (folder / task / f"{task}.{split}.data").write_text(
            "\n".join(lines) + "\n", encoding="utf-8"
        )


def stsb_sample(shared_data):
    """The first pairs of the real Chinese STS-B splits (300 sentences)."""
    sample = {}
    for split, count in SPLIT_PAIRS.items():
        pairs = kcse.data.read_pairs(
            shared_data / "senteval_cn" / "STS-B" / f"STS-B.{split}.data"
        )
        sample[split] = list(
            zip(pairs.sentences1[:count], pairs.sentences2[:count], pairs.scores[:count])
        )
    return sample


def tiny_checkpoint(folder, sample, seed=0, position_embeddings=True, extra_tokens=()):
    """A random BERT in the original layout whose vocabulary covers `sample`
    and holds `extra_tokens` (without `position_embeddings`: a NEZHA /
    RoFormer checkpoint's variables)."""
    characters = sorted(
        {c for pairs in sample.values() for a, b, _ in pairs for c in a + b}
    )
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + characters
    vocabulary += [token for token in extra_tokens if token not in vocabulary]
    config = dict(TINY_CONFIG, vocab_size=len(vocabulary), max_position_embeddings=128)
    arrays = checkpoint_arrays(config, position_embeddings=position_embeddings, seed=seed)
    return write_checkpoint(folder, arrays, config, vocabulary)


def tiny_task_and_model(folder, shared_data):
    """`folder/data/STS-B` of real pairs and a tiny checkpoint's model name."""
    sample = stsb_sample(shared_data)
    write_task(folder / "data", "STS-B", sample, lambda label: int(label))
    return f"{tiny_checkpoint(folder / 'tiny_bert', sample)}:bert"


def write_nli(path, sample):
    """A JSON-lines NLI file from the sample's train sentences (24 pairs,
    labelled entailment, neutral, contradiction in turn)."""
    pairs = sample["train"][:24]
    labels = ["entailment", "neutral", "contradiction"]
    lines = [
        json.dumps({"sentence1": a, "sentence2": b, "gold_label": labels[i % 3]},
                   ensure_ascii=False)
        for i, (a, b, _) in enumerate(pairs)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def tiny_setup(tmp_path, shared_data):
    """A task folder of real STS-B pairs and a tiny checkpoint model name."""
    return tmp_path, tiny_task_and_model(tmp_path, shared_data)


def read_strict_json(path):
    """The JSON at `path`; fails on NaN / Infinity, which JSON does not have."""

    def refuse(constant):
        raise ValueError(f"{path} is not strict JSON: {constant}")

    return json.loads(pathlib.Path(path).read_text(encoding="utf-8"), parse_constant=refuse)


def plant_sentinels(task_dir, task, labels):
    """Appends a pair per label, made of "哨兵" (sentinel) words, to valid and test."""
    for split in ("valid", "test"):
        path = task_dir / f"{task}.{split}.data"
        rows = [f"哨兵{split}{i}一\t哨兵{split}{i}二\t{label}\n" for i, label in enumerate(labels)]
        path.write_text(path.read_text(encoding="utf-8") + "".join(rows), encoding="utf-8")


def cell_of(cells, place):
    """The one cell whose key starts with `place` ("model|pooling|task|protocol|method")."""
    found = [cell for key, cell in cells.items() if key.startswith(place + "|")]
    assert len(found) == 1, f"{len(found)} cells at {place}: {sorted(cells)}"
    return found[0]


RECIPES = pathlib.Path(__file__).resolve().parents[1] / "recipes"


def recipe(name):
    """The module of `recipes/<name>.py`."""
    if str(RECIPES) not in sys.path:
        sys.path.insert(0, str(RECIPES))
    return importlib.import_module(name)


def hugging_face_folder(folder, sample, seed=0):
    """A random tiny BERT saved by transformers' `save_pretrained`, with a
    vocab.txt covering `sample`'s characters; its `BertModel` (torch).

    Width 32 and weights of standard deviation 0.5: its mean-pooled vectors
    are spread enough that float32 rounding (TensorFlow's against JAX's)
    reorders no cosines, raw or whitened (at width 8 it moved whitened
    Spearman by up to 0.2 points).
    """
    import os

    os.environ.setdefault("USE_TF", "0")  # transformers: the torch models only.
    import torch
    import transformers

    characters = sorted({c for pairs in sample.values() for a, b, _ in pairs for c in a + b})
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + characters
    torch.manual_seed(seed)
    config = transformers.BertConfig(
        vocab_size=len(vocabulary), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=128, initializer_range=0.5)
    model = transformers.BertModel(config).eval()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    model.save_pretrained(folder)
    transformers.BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)
    return model
