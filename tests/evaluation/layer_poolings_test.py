"""SG-OPT's layer × pooling analysis (`kcse.evaluation.layer_poolings`).

Reference: sentence-transformers' own `models.Pooling` of each hidden
state, scipy's Spearman (tests/layer_pooling_reference.py). Only the hidden
states come from kcse (tests/export/huggingface_test.py checks them against
HF transformers)."""

import json

import numpy as np
import pytest

import kcse
from conftest import tiny_bert
from conftest import tiny_preprocessor
from english_suite_files import random_pairs
from kcse.evaluation import layer_pooling_scores
from layer_pooling_reference import sentence_transformers_layer_scores
from tiny_grid import cell_of
from tiny_grid import recipe
from tiny_grid import tiny_setup  # noqa: F401 (a fixture)


def test_scores_equal_sentence_transformers_pooling_of_every_hidden_state():
    pairs = random_pairs(np.random.default_rng(0), 24)
    first, second, gold = ([pair[i] for pair in pairs] for i in range(3))
    encoder = kcse.SentenceEncoder(tiny_bert(num_layers=3), tiny_preprocessor(), pooling="cls")
    scores = layer_pooling_scores(encoder, (first, second, np.array(gold)), batch_size=7)
    features = encoder.preprocessor(first + second)
    states = encoder.hidden_states(features)["hidden_states"]
    expected = sentence_transformers_layer_scores(states, features["padding_mask"], gold)
    assert set(scores) == {"cls", "mean", "max"}
    for mode, values in expected.items():
        assert len(scores[mode]) == 4  # The embeddings and 3 blocks.
        for layer, (ours, theirs) in enumerate(zip(scores[mode], values)):
            if theirs is None:
                assert ours is None, (mode, layer)
            else:
                assert ours == pytest.approx(theirs, abs=1e-4), (mode, layer)
    assert scores["cls"][0] is None  # Every sentence's [CLS] embedding is one vector.


def test_grid_column_scores_raw_and_trained_and_results_md_shows_them(tiny_setup):
    """`--layer-scores` in the grid: the last block's [CLS] and mean are the
    cell's own a for P1 and P3, raw; trained ones after c; results.md's table."""
    tmp_path, model = tiny_setup
    recipe("chinese_simcse").main([
        "--models", model, "--tasks", "STS-B", "--poolings", "P1,P3", "--sentences", "32",
        "--learning-rate", "1e-3", "--layer-scores", "--data-dir", str(tmp_path / "data"),
        "--output", str(tmp_path / "out")])
    cells = json.loads((tmp_path / "out" / "results.json").read_text())["cells"]
    for pooling, mode in (("P1", "cls"), ("P3", "mean")):
        cell = cell_of(cells, f"tiny_bert|{pooling}|STS-B|su|simcse")
        scores = cell["layer_scores"]
        assert scores["raw"][mode][-1] == pytest.approx(cell["raw"]["test"]["spearman"], abs=1e-4)
        assert scores["trained"][mode][-1] == pytest.approx(
            cell["trained"]["test"]["spearman"], abs=1e-4)
        assert cell["settings"]["layer_scores"] == 1
    text = (tmp_path / "out" / "results.md").read_text()
    assert "## Layers × pooling" in text and "### tiny_bert · P3 · STS-B · simcse" in text
    assert "| layer | raw cls | raw mean | raw max | trained cls | trained mean | trained max |" in text
