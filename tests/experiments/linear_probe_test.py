"""Su's linear probe (seed 002: "I fixed the weight of the Encoder, then
attached a Dense layer without activation functions, and then trained only
the final Dense layer with SimCSE"), in `kcse train` and in the grid."""

import json
import pathlib

import keras
import numpy as np

import kcse
from kcse.commands.main import main as kcse_main
from kcse.models import model_sources
from tiny_grid import cell_of
from tiny_grid import recipe
from tiny_grid import tiny_setup  # noqa: F401 (a fixture)

TRAINING = ["--sentences", "64", "--batch-size", "16", "--learning-rate", "1e-2"]


def test_kcse_train_fits_only_a_dense_layer_over_the_frozen_encoder(tiny_setup, capsys):
    tmp_path, model = tiny_setup
    code = kcse_main(["train", "--method", "linear_probe", "--model", model,
                     "--pooling", "P3", "--data-dir", str(tmp_path / "data"),
                     "--protocol", "su", "--output", str(tmp_path / "run"), *TRAINING])
    assert code == 0, capsys.readouterr().err
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    assert record["method"] == "linear_probe" and record["training_samples"] == 64
    assert "test after linear probe (SimCSE)" in capsys.readouterr().out

    trained = keras.saving.load_model(tmp_path / "run" / "encoder.keras")
    backbone, preprocessor = model_sources.load_model(
        model_sources.resolve_model(model), 64)
    # The encoder's weights are the checkpoint's, untouched.
    assert len(trained.backbone.weights) == len(backbone.weights)
    for after, before in zip(trained.backbone.weights, backbone.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(after),
                                      keras.ops.convert_to_numpy(before), err_msg=after.path)
    # On top, one Dense layer without activation: the raw vectors times its
    # kernel plus its bias, the kernel trained away from its start.
    head = trained.whitening
    assert isinstance(head, keras.layers.Dense) and head.activation is keras.activations.linear
    kernel = keras.ops.convert_to_numpy(head.kernel)
    bias = keras.ops.convert_to_numpy(head.bias)
    assert kernel.shape == (backbone.hidden_dim, backbone.hidden_dim)
    start = keras.initializers.GlorotUniform(seed=0)(kernel.shape)
    assert not np.allclose(kernel, keras.ops.convert_to_numpy(start))
    assert np.any(bias != 0)
    raw = kcse.SentenceEncoder(backbone, preprocessor, pooling="P3")
    sentences = ["今天天气很好", "一个男人在弹吉他", "猫坐在垫子上"]
    np.testing.assert_allclose(trained.encode(sentences),
                               raw.encode(sentences) @ kernel + bias, rtol=1e-4, atol=1e-5)


def test_the_grid_trains_column_c_by_the_linear_probe(tiny_setup, capsys):
    tmp_path, model = tiny_setup
    recipe("chinese_simcse").main([
        "--method", "linear_probe", "--models", model, "--tasks", "STS-B",
        "--poolings", "P1", "--data-dir", str(tmp_path / "data"),
        "--output", str(tmp_path / "grid"), *TRAINING])
    cells = json.loads((tmp_path / "grid" / "results.json").read_text())["cells"]
    cell = cell_of(cells, "tiny_bert|P1|STS-B|su|linear_probe")
    assert cell["settings"]["method"] == "linear_probe" and cell["published"] is None
    assert cell["training_samples"] == 64
    assert cell["trained"]["test"]["spearman"] != cell["raw"]["test"]["spearman"]
    assert "[1/1] tiny_bert|P1|STS-B|su|linear_probe" in capsys.readouterr().out


def test_an_encoder_with_a_linear_map_already_is_refused_before_training(tmp_path, capsys):
    saved = pathlib.Path(__file__).resolve().parents[1] / "saved_models" / "bert_whitening.keras"
    code = kcse_main(["train", "--method", "linear_probe", "--model", str(saved),
                     "--output", str(tmp_path / "run"), "--sentences", "8",
                     "--max-length", "16"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert err[0] == (f"kcse train: error: --method linear_probe: {saved}: the linear probe "
                      "trains the linear map after the pooling, and this encoder has one "
                      "already (its whitening)")
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())
