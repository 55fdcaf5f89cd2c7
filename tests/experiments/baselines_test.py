"""The seeds' baselines in the recipes: BERT-flow beside whitening, the
anisotropy diagnostics, Contrastive Tension, CLEAR's text views, and the
multilingual STS-B table with languages that lack a train split."""

import contextlib
import io
import json

import numpy as np
import pytest

import kcse
from kcse.experiments import methods
from kcse.experiments.results.store import SCHEMA
from kcse.experiments.results.identity import cell_key
from kcse.experiments.columns.diagnostics import DIAGNOSTICS_REVISION
from kcse.experiments.protocols import PROTOCOLS
from kcse.experiments.protocols import training_sentences
from tiny_grid import SPLIT_PAIRS
from tiny_grid import cell_of
from tiny_grid import read_strict_json
from tiny_grid import recipe
from tiny_grid import stsb_sample
from tiny_grid import tiny_checkpoint
from tiny_grid import tiny_setup  # noqa: F401 (a fixture)
from tiny_grid import tiny_task_and_model


def grid_arguments(tmp_path, model, *extra):
    return ["--models", model, "--tasks", "STS-B", "--data-dir", str(tmp_path / "data"),
            "--output", str(tmp_path / "out"), "--sentences", "96", *extra]


@pytest.fixture(scope="module")
def flow_grid(tmp_path_factory, shared_data):
    """One run of the tiny grid with BERT-flow, the diagnostics and plots, and
    WK pooling beside P3 (skipped: the tiny checkpoint has too few blocks):
    (folder, model, its cells, what it printed)."""
    tmp_path = tmp_path_factory.mktemp("flow_grid")
    model = tiny_task_and_model(tmp_path, shared_data)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        recipe("chinese_simcse").main(grid_arguments(
            tmp_path, model, "--poolings", "P3,wk", "--batch-size", "16",
            "--postprocess", "whitening,flow", "--diagnostics", "--plot"))
    cells = read_strict_json(tmp_path / "out" / "results.json")["cells"]
    return tmp_path, model, cells, printed.getvalue()


def test_flow_and_diagnostics_are_stored_beside_whitening(flow_grid, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    folder, model, cells, printed = flow_grid
    cell = cell_of(cells, "tiny_bert|P3|STS-B|su|simcse")
    assert set(cell["flow"]) == {"train", "valid", "test"}
    assert np.isfinite(cell["flow"]["test"]["spearman"])
    assert cell["flow"]["test"]["spearman"] != cell["whitening"]["test"]["spearman"]
    assert cell["settings"]["flow"]["n_levels"] == 3 and cell["settings"]["diagnostics"]
    for report in (cell["diagnostics"]["raw"], cell["diagnostics"]["trained"]):
        assert [point["k"] for point in report["top_k_removal"]][:2] == [0, 1]
        assert report["alignment_uniformity"]["sentences"] > 0
    # k = 0 removes nothing: the curve starts at the raw last-layer average (P3).
    assert abs(cell["diagnostics"]["raw"]["top_k_removal"][0]["spearman"]
               - cell["raw"]["test"]["spearman"]) < 1e-3
    assert "/ flow " in printed and "flow" in printed.splitlines()[-4]
    assert "| flow |" in (folder / "out" / "results.md").read_text()
    assert len(list((folder / "out" / "plots").glob("*_diagnostics.png"))) == 1

    # The same cell as the first revision of --diagnostics stored it (the
    # sentences without the model's prefix) is not reused: it is computed again.
    key = next(key for key in cells if key.startswith("tiny_bert|P3|STS-B|su|simcse"))
    older = dict(cell, settings=dict(cell["settings"], diagnostics=True))
    identity = {"model": {name: cell["model_source"][name]
                          for name in ("source", "family", "prefix", "digest")},
                "pooling": "P3", "task": "STS-B", "data": cell["data_digest"],
                "settings": older["settings"], "numerics": cell["numerics"]}
    older_key = cell_key("tiny_bert", "P3", "STS-B", "su", "simcse", identity)
    assert older_key != key
    (tmp_path / "data").symlink_to(folder / "data")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.json").write_text(json.dumps(
        {"schema": SCHEMA, "cells": {older_key: older}}))
    recipe("chinese_simcse").main(grid_arguments(
        tmp_path, model, "--poolings", "P3", "--batch-size", "16",
        "--postprocess", "whitening,flow", "--diagnostics"))
    assert "[1/1] tiny_bert|P3|STS-B|su|simcse" in capsys.readouterr().out
    rerun = read_strict_json(tmp_path / "out" / "results.json")["cells"]
    assert set(rerun) == {older_key, key}
    assert rerun[key]["settings"]["diagnostics"] == DIAGNOSTICS_REVISION == 2


def test_diagnostics_read_the_sentences_with_the_model_prefix():
    """A cell encodes `prefix + sentence` (e5's "query: "); its diagnostics
    read the same text, so the removal curve at k = 0 is the cell's P3 score
    (`kcse.evaluation.evaluate_sts` of the prefixed pairs) and the prefix's
    tokens are counted."""
    from conftest import TINY_PAIRS
    from conftest import tiny_bert
    from conftest import tiny_preprocessor
    from kcse.experiments.columns.diagnostics import diagnose

    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    pairs = kcse.data.SentencePairs(TINY_PAIRS[0], TINY_PAIRS[1], np.array(TINY_PAIRS[2]))
    data = {"train": pairs, "valid": None, "test": pairs}
    prefixed = (["query: " + s for s in pairs.sentences1],
                ["query: " + s for s in pairs.sentences2], pairs.scores)
    report = diagnose(encoder, data, "test", "query: ")
    bare = diagnose(encoder, data, "test", "")
    expected = kcse.evaluation.evaluate_sts(encoder, prefixed)["spearman"]
    assert report["top_k_removal"][0]["spearman"] == pytest.approx(expected, abs=1e-5)
    assert bare["top_k_removal"][0]["spearman"] != pytest.approx(expected, abs=1e-3)
    # "query" and ":" are two tokens (both [UNK] here) in each of the 20 sentences.
    assert (report["frequency_corpus"]["tokens"]
            == bare["frequency_corpus"]["tokens"] + 2 * 20)


def test_wk_is_skipped_on_a_backbone_too_shallow_for_it(flow_grid):
    """The tiny checkpoint has 2 blocks; WK pooling with the authors'
    defaults needs 6: its cell is left out with the reason, as P2 without a
    pooler, and the other poolings run."""
    _, _, cells, printed = flow_grid
    assert [cell["pooling"] for cell in cells.values()] == ["P3"]
    assert "2 transformer blocks, too few for WK pooling" in printed
    assert "6 or more), wk skipped" in printed


@pytest.mark.parametrize("blocks", [5, 6])
def test_skipped_pooling_names_the_pooler_and_wk_by_any_alias(blocks):
    from conftest import tiny_bert
    from kcse.experiments.grid import skipped_pooling

    backbone = tiny_bert(num_layers=blocks)
    assert skipped_pooling(backbone, "P2") is None  # A pooler with weights.
    assert (skipped_pooling(backbone, "wk") is None) == (blocks == 6)
    backbone.get_layer("pooled_dense").kernel.assign(
        np.zeros(backbone.get_layer("pooled_dense").kernel.shape))
    for name in ("P2", "pooler"):
        assert skipped_pooling(backbone, name) == (
            f"no pretrained pooler, {name} skipped ('-' in Su's table)")
    assert skipped_pooling(backbone, "P3") is None


def test_the_grid_and_the_commands_share_one_pooling_rule():
    """`pooling_rules.unavailable_pooling`: the grid's skips (on a backbone)
    and the commands' refusals (on a model's files); unknown facts (None)
    never make a pooling unavailable."""
    from kcse.layers.pooling_rules import unavailable_pooling

    for blocks in range(1, 9):
        assert (unavailable_pooling("wk", blocks=blocks) is None) == (blocks >= 6)
    assert unavailable_pooling("wk", blocks=5) == (
        "5 transformer blocks, too few for WK pooling (layer_start 4, context window 2: "
        "6 or more)")
    for name in ("P2", "pooler"):
        assert unavailable_pooling(name, pooler=False) == "no pretrained pooler"
        assert unavailable_pooling(name, pooler=True) is None
    assert unavailable_pooling("P2") is None and unavailable_pooling("wk") is None
    for name in ("P1", "P3", "P4", "max", "last2avg"):
        assert unavailable_pooling(name, blocks=1, pooler=False) is None


def test_contrastive_tension_recipe_trains_column_c(tiny_setup):
    tmp_path, model = tiny_setup
    recipe("contrastive_tension").main(grid_arguments(
        tmp_path, model, "--negative-pairs", "3", "--batch-size", "8"))
    cell = cell_of(read_strict_json(tmp_path / "out" / "results.json")["cells"],
                   "tiny_bert|P3|STS-B|su|ct")
    assert cell["status"] == "done" and np.isfinite(cell["trained"]["test"]["spearman"])
    assert cell["settings"]["negative_pairs"] == 3
    assert cell["settings"]["batch_size"] == 8 and cell["settings"]["max_length"] == 75


def test_text_views_replace_the_sentence_twice():
    """The training pairs are `kcse.data.text_view_pairs` of the protocol's
    sentences, drawn with the run's seed, with the prefix added after."""
    pairs = kcse.data.SentencePairs(["我喜欢北京的秋天。", "a man plays a flute ."],
                                    ["今天天气很好。", "the cat sat on the mat ."],
                                    np.array([1.0, 2.0]))
    data = {"train": pairs, "valid": pairs, "test": pairs}
    method = methods.SimCSEMethod(("word_deletion:0.3", "reordering:0.3"))
    (first, second), labels = method.training_data(data, PROTOCOLS["clean"], "STS-B", 3, "q: ")
    sentences = training_sentences(data, PROTOCOLS["clean"], "STS-B", 3)
    expected = kcse.data.text_view_pairs(sentences, "word_deletion:0.3", "reordering:0.3", 3)
    assert labels is None
    assert first == ["q: " + s for s in expected[0]]
    assert second == ["q: " + s for s in expected[1]]
    assert first != ["q: " + s for s in sentences]
    assert method.settings()["text_views"] == ["word_deletion:0.3", "reordering:0.3"]
    assert methods.SimCSEMethod().settings() == {"method": "simcse"}  # Older cells stay valid.


def write_stsb(folder, language, splits, sample):
    folder.mkdir(parents=True, exist_ok=True)
    for split in splits:
        rows = sample["valid" if split == "dev" else split]
        (folder / f"stsb-{language}-{split}.csv").write_text(
            "".join(f'"{a}","{b}",{label:.1f}\n' for a, b, label in rows), encoding="utf-8")


def test_multilingual_table_leaves_c_out_where_there_is_no_train_split(
        tmp_path, shared_data, capsys):
    sample = stsb_sample(shared_data)
    model = f"{tiny_checkpoint(tmp_path / 'tiny_bert', sample)}:bert"
    folder = tmp_path / "data" / "stsb_multi_mt"
    write_stsb(folder, "zh", ("train", "dev", "test"), sample)
    write_stsb(folder, "de", ("dev", "test"), sample)
    recipe("multilingual_sts").main(
        ["--models", model, "--languages", "de,zh", "--data-dir", str(tmp_path / "data"),
         "--output", str(tmp_path / "out"), "--sentences", "64", "--batch-size", "16"])
    cells = read_strict_json(tmp_path / "out" / "results.json")["cells"]
    german = cell_of(cells, "tiny_bert|P3|STS-B-de|stsb|simcse")
    chinese = cell_of(cells, "tiny_bert|P3|STS-B-zh|stsb|simcse")
    assert german["trained"] is None and "train" in german["untrained"]
    assert set(german["raw"]) == {"valid", "test"}
    assert np.isfinite(chinese["trained"]["test"]["spearman"])
    assert chinese["untrained"] is None and chinese["training_samples"] == 64
    # Whitening statistics: the dev split's sentences, both sides.
    assert german["whitening_sentences"] == chinese["whitening_sentences"] == 2 * SPLIT_PAIRS["valid"]
    # The same dev and test pairs in both languages: the same a and b.
    assert german["raw"]["test"] == chinese["raw"]["test"]
    assert german["whitening"]["test"] == chinese["whitening"]["test"]
    markdown = (tmp_path / "out" / "results.md").read_text()
    assert markdown.startswith("# Multilingual STS-B comparison")
    assert "| tiny_bert | P3 | STS-B-de | simcse | S1 |" in markdown


def test_multilingual_recipe_checks_its_files_first(tmp_path, capsys):
    with pytest.raises(SystemExit) as stopped:
        recipe("multilingual_sts").main(["--data-dir", str(tmp_path), "--languages", "fr"])
    assert stopped.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "stsb-fr-dev.csv does not exist" in error[0]
    assert "PhilipMay/stsb-multi-mt" in error[0]
