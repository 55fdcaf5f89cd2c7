"""`--method is_bert`: IS-BERT's CNN and loss through the recipe and `kcse
train`, with yanzhangnlp/IS-BERT's settings (its `SentenceTransformer.fit`
defaults and `examples/training/nli/unsupervised_training_nli.py`)."""

import json

import keras
import numpy as np
import pytest

import kcse
from kcse.commands.main import main as kcse_main
from kcse.experiments import protocols
from tiny_grid import cell_of
from tiny_grid import recipe
from tiny_grid import stsb_sample
from tiny_grid import tiny_setup  # noqa: F401 (a fixture)
from tiny_grid import write_nli


@pytest.fixture
def fits(monkeypatch):
    """What `kcse.ISBERT.fit` is given, before it trains."""
    seen = []
    original_fit = kcse.ISBERT.fit

    def record(self, x, y=None, **kwargs):
        seen.append({"x": x, "batch_size": kwargs["batch_size"], "epochs": kwargs["epochs"],
                     "optimizer": self.optimizer.get_config(),
                     "token_layer": self.encoder.token_layer.get_config()})
        return original_fit(self, x, y, **kwargs)

    monkeypatch.setattr(kcse.ISBERT, "fit", record)
    return seen


def test_recipe_trains_the_tasks_sentences_with_the_authors_settings(tiny_setup, fits,
                                                                     shared_data):
    tmp_path, model = tiny_setup
    recipe("is_bert").main(["--models", model, "--tasks", "STS-B",
                            "--data-dir", str(tmp_path / "data"), "--output",
                            str(tmp_path / "out")])
    (fit,) = fits
    data = {split: kcse.data.read_pairs(tmp_path / "data" / "STS-B" / f"STS-B.{split}.data")
            for split in ("train", "valid", "test")}
    su = protocols.PROTOCOLS["su"]
    assert fit["x"] == protocols.training_sentences(data, su, "STS-B", 0)
    assert (fit["batch_size"], fit["epochs"]) == (32, 1)
    assert fit["optimizer"]["epsilon"] == 1e-7 and fit["optimizer"]["weight_decay"] == 0.01
    assert (fit["token_layer"]["filters"], fit["token_layer"]["kernel_sizes"]) == (256, [1, 3, 5])
    cells = json.loads((tmp_path / "out" / "results.json").read_text())["cells"]
    cell = cell_of(cells, "tiny_bert|last_avg|STS-B|su|is_bert")
    assert len(cells) == 1  # Its row: the CNN's mean (P3).
    settings = cell["settings"]
    assert (settings["learning_rate"], settings["batch_size"], settings["epochs"],
            settings["optimizer"], settings["max_length"]) == (2e-6, 32, 1, "adamw", 128)
    assert np.isfinite(cell["trained"]["test"]["spearman"])


def test_with_nli_it_trains_each_nli_sentence_once_without_labels(tiny_setup, fits,
                                                                  shared_data):
    tmp_path, model = tiny_setup
    nli = write_nli(tmp_path / "nli.jsonl", stsb_sample(shared_data))
    recipe("is_bert").main(["--models", model, "--tasks", "STS-B", "--nli", str(nli),
                            "--data-dir", str(tmp_path / "data"), "--output",
                            str(tmp_path / "out")])
    (fit,) = fits
    pairs = kcse.data.read_nli(nli)
    assert sorted(fit["x"]) == sorted(set(pairs.sentences1 + pairs.sentences2))
    assert len(fit["x"]) == len(set(fit["x"]))
    cells = json.loads((tmp_path / "out" / "results.json").read_text())["cells"]
    settings = cell_of(cells, "tiny_bert|last_avg|STS-B|su|is_bert")["settings"]
    assert settings["nli"] == str(nli) and settings["nli_digest"]


def test_kcse_train_saves_the_cnn_and_refuses_another_pooling(tiny_setup, capsys):
    tmp_path, model = tiny_setup
    arguments = ["train", "--model", model, "--method", "is_bert", "--task", "STS-B",
                 "--data-dir", str(tmp_path / "data"), "--sentences", "64",
                 "--output", str(tmp_path / "run")]
    assert kcse_main(arguments + ["--pooling", "P1"]) == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith("IS-BERT trains the mean of its CNN's features: pooling last_avg, "
                          "not cls")
    assert len(error.splitlines()) == 1 and not (tmp_path / "run").exists()
    assert kcse_main(arguments) == 0
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    encoder = keras.saving.load_model(tmp_path / "run" / "encoder.keras")
    assert isinstance(encoder.token_layer, kcse.layers.TokenConvolution)
    assert encoder.output_dim == 768 and record["method"] == "is_bert"
    pairs = kcse.data.read_pairs(tmp_path / "data" / "STS-B" / "STS-B.test.data")
    again = kcse.evaluation.evaluate_sts(encoder, pairs)["spearman"]
    assert abs(again - record["after"]["spearman"]) <= 1e-4
