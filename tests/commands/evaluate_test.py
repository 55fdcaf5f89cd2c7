"""`kcse evaluate` of tests/conftest.py's trained encoder on real STS files."""

import json

import keras

import kcse
from command_runs import kcse_in_process


def test_evaluate_prints_the_table_of_every_file(trained_command, shared_data, capsys):
    folder, _, _ = trained_command
    files = [
        shared_data / "senteval_cn" / "STS-B" / "STS-B.test.data",
        shared_data / "stsb_multi_mt" / "stsb-zh-test.csv",
    ]
    out = kcse_in_process(
        capsys, "evaluate", "--model", folder / "run" / "encoder.keras", "--data", *files,
        "--json", folder / "scores.json",
    )
    rows = json.loads((folder / "scores.json").read_text())
    encoder = keras.saving.load_model(folder / "run" / "encoder.keras")
    for path, row in zip(files, rows):
        expected = kcse.evaluation.evaluate_sts(encoder, path)
        assert row["n"] == expected["n"] == len(kcse.data.read_pairs(path))
        assert abs(row["spearman"] - expected["spearman"]) <= 1e-4
        assert f"{row['n']:>6}  {row['spearman']:>8.2f}  {row['pearson']:>8.2f}" in out
