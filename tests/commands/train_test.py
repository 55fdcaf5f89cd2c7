"""`kcse train` on real STS-B pairs (tests/conftest.py's `trained_command`, run as a new
process): what it writes and prints, and what it refuses or stops."""

import json
import re

import keras
import numpy as np

import kcse
from command_runs import PREFIX
from command_runs import train_arguments
from kcse.commands import train
from kcse.commands.main import main
from kcse.experiments.methods.simcse import SimCSEMethod
from princeton_simcse_reference import mlp_output
from tiny_grid import read_strict_json


def test_train_writes_the_encoder_and_its_scores(trained_command):
    folder, _, out = trained_command
    record = json.loads((folder / "run" / "train.json").read_text())
    assert record["method"] == "simcse" and record["protocol"] == "su"
    assert record["training_samples"] == 64 and record["pooling"] == "cls"
    assert record["before"]["n"] == record["after"]["n"] == 37
    assert record["before"]["spearman"] != record["after"]["spearman"]
    assert f"test before: Spearman {record['before']['spearman']:.2f}" in out
    assert f"test after SimCSE: Spearman {record['after']['spearman']:.2f}" in out
    # Not Keras' ANSI-coloured bar nor its lines: kcse's progress, on
    # standard error (tests/foundation/progress_test.py).
    assert "\x1b" not in out and "\b" not in out and "loss:" not in out
    encoder = keras.saving.load_model(folder / "run" / "encoder.keras")
    # The file keeps the prefix it was trained and scored with; encode prepends it.
    assert record["prefix"] == PREFIX
    assert encoder.prompts == {"query": PREFIX} and encoder.default_prompt_name == "query"
    pairs = kcse.data.read_pairs(folder / "data" / "STS-B" / "STS-B.test.data")
    again = kcse.evaluation.evaluate_sts(encoder, pairs)["spearman"]
    assert abs(again - record["after"]["spearman"]) <= 1e-4


def test_sup_simcse_keep_mlp_saves_princetons_mlp_as_the_pooler(trained_command, tmp_path,
                                                               capsys):
    """Reference: princeton-nlp/SimCSE simcse/models.py `sentemb_forward`
    with `pooler_type "cls"` and without `--mlp_only_train`: `MLPLayer`
    (torch, tests/princeton_simcse_reference.py) of [CLS], with the saved
    encoder's MLP weights; kcse gives the [CLS] states. Only the cls row:
    the MLP sits on [CLS]."""
    folder, model, _ = trained_command
    arguments = train_arguments(folder, model, "--method", "sup_simcse", "--keep-mlp")
    arguments[arguments.index("--output") + 1] = str(tmp_path / "run")
    assert main(arguments) == 0
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    assert record["pooling"] == "pooler" and record["settings"]["keep_mlp"] is True
    encoder = keras.saving.load_model(tmp_path / "run" / "encoder.keras")
    assert (encoder.pooling, encoder.pooler_activation) == ("pooler", "tanh")
    kernel, bias = encoder.backbone.get_layer("pooled_dense").get_weights()
    assert abs(kernel.std() - 0.02) < 0.01  # Drawn as princeton's MLP, then trained.
    texts = ["一个男人在弹吉他。", "一只猫在睡觉。"]
    cls = kcse.SentenceEncoder(encoder.backbone, encoder.preprocessor, pooling="cls")
    np.testing.assert_allclose(
        encoder.encode(texts), mlp_output(kernel, bias, cls.encode(texts)),
        atol=1e-5)

    arguments[arguments.index("P1")] = "P3"
    assert main(arguments + ["--overwrite"]) == 2
    assert capsys.readouterr().err.strip().endswith(
        "--keep-mlp trains [CLS] through princeton's MLP: pooling cls (P1) only, not last_avg")


def test_train_refuses_to_replace_a_model_before_any_work(trained_command, capsys):
    folder, model, _ = trained_command
    assert main(train_arguments(folder, model)) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == (
        f"kcse train: error: {folder / 'run' / 'encoder.keras'} exists: pass "
        "--overwrite to replace it")
    assert "model:" not in captured.out  # Refused before loading the model.


def test_a_nan_loss_stops_training_and_saves_nothing(trained_command, capsys):
    folder, model, _ = trained_command
    saved = {name: (folder / "run" / name).read_bytes()
             for name in ("encoder.keras", "train.json")}
    # A temperature of 1e-30 scales the cosines to ~1e30: the first step's
    # gradient overflows the weights, the next loss is NaN.
    code = main(train_arguments(folder, model, "--temperature", "1e-30", "--overwrite"))
    assert code == 1
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1, error
    assert re.fullmatch(
        r"kcse train: error: the training loss became (nan|inf|-inf) at step \d+; "
        r"training stopped; nothing written", error), error
    # The previous model and its record are untouched; no temporaries.
    for name, content in saved.items():
        assert (folder / "run" / name).read_bytes() == content
    assert sorted(p.name for p in (folder / "run").iterdir()) == ["encoder.keras", "train.json"]


def test_train_json_is_strict_and_records_provenance(trained_command):
    folder, _, out = trained_command
    record = read_strict_json(folder / "run" / "train.json")
    assert record["model_source"].startswith("original bert checkpoint ")
    assert f"model: {record['model_source']}" in out
    assert record["settings"]["seed"] == 0 and record["kept_step"] is None
    assert record["settings"]["precision"] == "float32"
    assert record["training_seconds"] > 0
    assert (record["method_title"], record["citation"]) == ("SimCSE", SimCSEMethod.citation)
    origin = record["provenance"]
    assert origin["keras"] == keras.__version__ and origin["kcse"] == kcse.__version__
    assert origin["backend"] == keras.config.backend() and origin["date"]


def test_train_builds_the_model_in_the_precision_asked(trained_command, monkeypatch, capsys):
    folder, model, _ = trained_command
    policies = []

    def load_encoder(*args, **kwargs):
        encoder, prefix, source = real_load_encoder(*args, **kwargs)
        policies.append(encoder.backbone.dtype_policy.name)
        return encoder, prefix, source

    real_load_encoder = train.load_encoder
    monkeypatch.setattr(train, "load_encoder", load_encoder)
    arguments = train_arguments(folder, model, "--precision", "bfloat16")
    output = arguments.index("--output") + 1
    arguments[output] = str(folder / "run_bfloat16")
    assert main(arguments) in (0, None)
    out = capsys.readouterr().out
    assert policies == ["mixed_bfloat16"]
    assert keras.config.dtype_policy().name == "float32"  # Put back after the command.
    assert out.splitlines()[0].startswith(
        "precision bfloat16 (Keras dtype policy mixed_bfloat16); compilation cache ")
    record = read_strict_json(folder / "run_bfloat16" / "train.json")
    assert record["settings"]["precision"] == "bfloat16"
    assert np.isfinite(record["after"]["spearman"])


def test_train_refuses_a_precision_its_saved_encoder_does_not_compute_in(trained_command, capsys):
    folder, _, _ = trained_command
    arguments = train_arguments(folder, folder / "run" / "encoder.keras", "--precision",
                                "bfloat16")
    arguments[arguments.index("--output") + 1] = str(folder / "run_refused")
    assert main(arguments) == 2
    error = capsys.readouterr().err.strip()
    assert error == (f"kcse train: error: --precision bfloat16: {folder / 'run' / 'encoder.keras'} "
                     "computes in float32, the precision it was saved with; pass "
                     "--precision float32")
    assert not (folder / "run_refused").exists()
