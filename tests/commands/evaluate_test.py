"""`kcse evaluate` of tests/conftest.py's trained encoder on real STS files."""

import json

import keras

import kcse
from command_runs import kcse_in_process
from conftest import TINY_PAIRS
from conftest import tiny_encoder_file
from kcse.commands.evaluate import data_names


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


def test_the_table_labels_rows_by_data_set_names(tmp_path, capsys):
    """Rows are named by file stem, with folders only where stems clash,
    not by the paths given (absolute here)."""
    model, _ = tiny_encoder_file(tmp_path, 1)
    lines = "".join(f"{a}\t{b}\t{score}\n" for a, b, score in zip(*TINY_PAIRS))
    files = [tmp_path / "first" / "STS-B.test.data", tmp_path / "second" / "STS-B.test.data",
             tmp_path / "first" / "LCQMC.test.data"]
    for path in files:
        path.parent.mkdir(exist_ok=True)
        path.write_text(lines)
    out = kcse_in_process(capsys, "evaluate", "--model", model, "--data", *files,
                          "--json", tmp_path / "scores.json")
    header, *rows = out.splitlines()[-4:]
    names = ["first/STS-B.test", "second/STS-B.test", "LCQMC.test"]
    assert header.split() == ["data", "pairs", "spearman", "pearson"]
    assert [row.split()[0] for row in rows] == names
    assert str(tmp_path) not in header + "".join(rows)
    written = json.loads((tmp_path / "scores.json").read_text())
    assert [(row["data"], row["file"]) for row in written] == list(zip(names, map(str, files)))


def test_data_names_are_unique_and_short():
    assert data_names(["/a/senteval_cn/STS-B/STS-B.test.data", "/b/stsb-zh-test.csv"]) == [
        "STS-B.test", "stsb-zh-test"]
    assert data_names(["/a/q/x.data", "/b/q/x.data", "y.tsv"]) == ["a/q/x", "b/q/x", "y"]
    assert data_names(["x.data", "x.csv", "r/x.data"]) == ["x.data", "x.csv", "r/x"]
    assert data_names(["x.data", "x.data"]) == ["x.data", "x.data #2"]
