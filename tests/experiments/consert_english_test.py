"""recipes/consert_english.py: ConSERT's unsupervised English setting, as
yym6472/ConSERT's scripts/unsup-consert-base.sh runs main.py (the
reference for every setting checked here): every sentence of the STS sets
(`--train_data stssick --no_pair`), `--no_dropout`, `--batch_size 96`,
`--learning_rate 0.0000005`, views feature_cutoff 0.2 and shuffle,
`--temperature 0.1`, `--cl_rate 0.15`, STS-B dev every
`--evaluation_steps`."""

import json

import keras
import numpy as np

import kcse
from kcse.experiments.english_sts import evaluate_english_suite
from kcse.experiments.english_sts import read_english_suite
from conftest import tiny_encoder_file
from english_suite_files import random_pairs
from english_suite_files import write_english_suite
from english_suite_files import write_stsb
from kcse.experiments.consert_english import ENGLISH_SETTINGS
from tiny_grid import recipe

YEARS = {"STS12": ("MSRpar",), "STS13": ("FNWN",), "STS14": ("images",),
         "STS15": ("belief",), "STS16": ("headlines",)}


def test_defaults_are_the_scripts():
    assert {name: setting.value for name, setting in ENGLISH_SETTINGS.items()} == {
        "hidden_dropout": 0.0, "batch_size": 96, "max_length": 64, "learning_rate": 5e-7,
        "epochs": 10, "eval_every": 200}
    assert all("unsup-consert-base.sh" in setting.source for setting in ENGLISH_SETTINGS.values())


def test_recipe_trains_consert_on_every_sts_sentence_and_scores_the_table(
        tmp_path, monkeypatch, capsys):
    rng = np.random.default_rng(1)
    data = tmp_path / "data"
    sets, _ = write_english_suite(data, YEARS, rng)
    train, dev = random_pairs(rng, 16), random_pairs(rng, 10)
    write_stsb(data, "train", train)
    write_stsb(data, "dev", dev)
    model, _ = tiny_encoder_file(tmp_path, 1)
    seen = []
    original_fit = kcse.ConSERT.fit
    monkeypatch.setattr(kcse.ConSERT, "fit", lambda self, x, y=None, **kw: seen.append(
        (self, x, kw)) or original_fit(self, x, y, **kw))
    recipe("consert_english").main([
        "--model", str(model), "--pooling", "last_avg", "--data-dir", str(data),
        "--max-length", "12", "--epochs", "2", "--eval-every", "1",
        "--learning-rate", "1e-3", "--output", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert "training without SICK-R train, SICK-R dev" in out

    (objective, sentences, options), = seen
    pairs = [pair for name in sets for pair in sets[name]] + train + dev
    assert sorted(sentences) == sorted(s for a, b, _ in pairs for s in (a, b))
    assert (options["batch_size"], options["epochs"]) == (96, 2)
    first, second = objective.views
    assert isinstance(first, kcse.layers.FeatureCutoff) and first.rate == 0.2
    assert isinstance(second, kcse.layers.TokenShuffle)
    assert (objective.temperature, objective.contrastive_weight) == (0.1, 0.15)
    assert objective.encoder.pooling == "last_avg"
    dropouts = [layer.rate for layer in objective.encoder.backbone._flatten_layers()
                if isinstance(layer, keras.layers.Dropout)]
    assert len(dropouts) == 7 and not any(dropouts)  # --no_dropout: hidden and attention.

    results = json.loads((tmp_path / "out" / "results.json").read_text())
    settings = results["settings"]
    assert (settings["hidden_dropout"], settings["batch_size"], settings["learning_rate"],
            settings["max_length"], settings["eval_every"]) == (0.0, 96, 1e-3, 12, 1)
    assert results["training_sentences"] == len(sentences)
    assert results["kept_step"] is not None
    assert results["before"]["sets"] != results["after"]["sets"]  # Trained.
    table = (tmp_path / "out" / "table.md").read_text()
    assert f"| {model} before | all |" in table and f"| {model} after | wmean |" in table
    # The saved encoder scores as the table says.
    encoder = keras.saving.load_model(tmp_path / "out" / "encoder.keras")
    again = evaluate_english_suite(encoder, read_english_suite(data))
    assert abs(again["average"] - results["after"]["average"]) <= 1e-4


def test_bad_input_is_one_line_before_the_model_loads(tmp_path, capsys):
    import pytest

    data = tmp_path / "data"
    write_english_suite(data, YEARS, np.random.default_rng(2))
    model, _ = tiny_encoder_file(tmp_path, 1)
    (tmp_path / "empty").mkdir()

    def arguments(folder):
        return ["--model", str(model), "--pooling", "last_avg", "--max-length", "12",
                "--data-dir", str(folder), "--output", str(tmp_path / "out")]

    cases = [(arguments(data), f"--data-dir {data}: no STS-B dev split, the validation set"),
             (arguments(tmp_path / "empty"), "--data-dir: STS12 not found")]
    for argv, expected in cases:
        with pytest.raises(SystemExit) as stop:
            recipe("consert_english").main(argv)
        assert stop.value.code == 2
        captured = capsys.readouterr()
        [line] = captured.err.strip().splitlines()
        assert expected in line, line
        assert "model:" not in captured.out
    assert not (tmp_path / "out").exists()
