"""`--method sbert_nli`: SBERT's classification objective on NLI pairs,
against UKPLab/sentence-transformers' own `SoftmaxLoss`."""

import json

import keras
import numpy as np
import pytest

import kcse
from conftest import one_step
from conftest import tiny_bert
from conftest import tiny_preprocessor
from kcse.commands.main import main as kcse_main
from kcse.experiments import methods
from kcse.experiments import protocols
from sbert_reference import softmax_loss
from tiny_grid import cell_of
from tiny_grid import recipe
from tiny_grid import stsb_sample
from tiny_grid import tiny_setup  # noqa: F401 (a fixture)
from tiny_grid import write_nli

PREMISES = ["the cat sat on the mat", "a dog ran fast", "the red dog was slow", "blue mat",
            "the cat is red", "a slow cat ran"]
HYPOTHESES = ["a cat sat", "the dog was slow", "the red cat ran", "a red mat",
              "the dog is blue", "a fast cat sat"]
LABELS = np.array([0, 1, 2, 0, 2, 1])


def test_fit_loss_is_sentence_transformers_softmax_loss():
    """Reference: sentence-transformers' `SoftmaxLoss` (tests/sbert_reference.py,
    the library itself) on the encoder's mean-pooled vectors before the step
    and the head's weights: (u, v, |u − v|), no max(u, v)² (ConSERT's)."""
    nli = kcse.data.NLIPairs(PREMISES, HYPOTHESES, LABELS, source="pairs.jsonl")
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    objective = methods.SBERTNLIMethod(nli).objective(encoder, protocols.PROTOCOLS["su"])
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in objective.classifier.dense.weights)
    assert kernel.shape == (3 * 8, 3)
    u, v = (encoder.predict(side, verbose=0) for side in (PREMISES, HYPOTHESES))
    objective.compile(optimizer=keras.optimizers.SGD(0.05))
    loss, _ = one_step(objective, (PREMISES, HYPOTHESES), LABELS)
    np.testing.assert_allclose(loss, softmax_loss(u, v, LABELS, kernel, bias), rtol=1e-5)
    moved = encoder.predict(PREMISES, verbose=0)
    assert np.abs(moved - u).max() > 1e-5  # The step trained the encoder.


def test_recipe_trains_on_the_nli_pairs_only_with_the_papers_settings(
        tiny_setup, shared_data, monkeypatch):
    tmp_path, model = tiny_setup
    nli = write_nli(tmp_path / "nli.jsonl", stsb_sample(shared_data))
    seen = []
    original_fit = kcse.ConSERT.fit
    monkeypatch.setattr(kcse.ConSERT, "fit", lambda self, x, y=None, **kw: seen.append(
        (self.mode, self.max_square, x, y, kw["batch_size"])) or original_fit(self, x, y, **kw))
    recipe("sbert_nli").main(["--models", model, "--tasks", "STS-B", "--nli", str(nli),
                              "--data-dir", str(tmp_path / "data"),
                              "--output", str(tmp_path / "out")])
    (mode, max_square, (premises, hypotheses), labels, batch_size), = seen
    assert (mode, max_square, batch_size) == ("sup", False, 16)
    nli_pairs = kcse.data.read_nli(nli)
    assert premises == nli_pairs.sentences1 and hypotheses == nli_pairs.sentences2
    np.testing.assert_array_equal(labels, nli_pairs.labels)
    cells = json.loads((tmp_path / "out" / "results.json").read_text())["cells"]
    cell = cell_of(cells, "tiny_bert|last_avg|STS-B|su|sbert_nli")
    assert len(cells) == 1 and cell["training_samples"] == 24
    settings = cell["settings"]
    assert (settings["learning_rate"], settings["batch_size"], settings["epochs"],
            settings["optimizer"]) == (2e-5, 16, 1, "adamw")
    assert settings["nli"] == str(nli) and settings["nli_digest"]
    assert np.isfinite(cell["trained"]["test"]["spearman"])


def test_without_nli_both_paths_refuse_in_one_line(tiny_setup, capsys):
    tmp_path, model = tiny_setup
    with pytest.raises(SystemExit) as stop:
        recipe("sbert_nli").main(["--models", model, "--output", str(tmp_path / "out")])
    assert stop.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith("--method sbert_nli trains on NLI pairs: give --nli FILE")
    assert len(error.splitlines()) == 1
    assert kcse_main(["train", "--model", model, "--method", "sbert_nli", "--task", "STS-B",
                      "--data-dir", str(tmp_path / "data"),
                      "--output", str(tmp_path / "train")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.endswith("--method sbert_nli trains on NLI pairs: give --nli FILE")
    assert not (tmp_path / "out").exists() and not (tmp_path / "train").exists()
