"""What the commands write: never an input, one writer at a time, and with
--overwrite only what kcse wrote there before.

Each refusal is one line, exit 2, before the model loads (no "model:" line),
and every file that was there is still there byte for byte.
"""

import json
import os
import pathlib

import pytest

from conftest import tiny_encoder_file
from tiny_grid import tiny_task_and_model
from kcse.commands.main import main as kcse_main
from kcse.foundation import file_locks


@pytest.fixture(scope="module")
def model_and_texts(tmp_path_factory):
    return tiny_encoder_file(tmp_path_factory.mktemp("model"), 4)


@pytest.fixture
def run_folder(tmp_path, model_and_texts):
    """A folder as `kcse train` leaves it, with a note of the user's."""
    model, texts = model_and_texts
    folder = tmp_path / "runs" / "x"
    folder.mkdir(parents=True)
    (folder / "encoder.keras").write_bytes(model.read_bytes())
    (folder / "train.json").write_text('{"method": "simcse"}\n')
    (folder / "notes.txt").write_text("mine\n")
    (folder / "texts.txt").write_text(texts.read_text())
    return folder


def files(folder):
    return {path.relative_to(folder).as_posix(): path.read_bytes()
            for path in sorted(pathlib.Path(folder).rglob("*")) if path.is_file()}


def refused(capsys, argv, *fragments):
    """Runs `kcse argv`: exit 2, one line with `fragments`, no model loaded."""
    code = kcse_main([str(part) for part in argv])
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    for fragment in fragments:
        assert str(fragment) in lines[0], (fragment, lines[0])
    assert "model:" not in out
    return lines[0]


@pytest.mark.parametrize("fmt", ["sentence_transformers", "tf_saved_model"])
@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_export_over_the_folder_of_its_model_is_refused(run_folder, capsys, fmt, overwrite):
    before = files(run_folder.parent)
    model = run_folder / "encoder.keras"
    for output in (run_folder, run_folder.parent):  # The folder, and a folder above it.
        line = refused(capsys, ["export", "--model", model, "--format", fmt,
                                "--output", output, *overwrite],
                       f"--output {output}: holds --model {model}",
                       "kcse never writes over what it reads")
        assert line.startswith("kcse export: error: ")
    assert files(run_folder.parent) == before


def test_the_same_path_by_another_name_is_the_same_path(run_folder, capsys, monkeypatch):
    before = files(run_folder.parent)
    model = run_folder / "encoder.keras"
    (run_folder.parent / "link").symlink_to(run_folder)
    monkeypatch.chdir(run_folder)
    for output in (run_folder.parent / "link", pathlib.Path("../x/../x"), pathlib.Path(".")):
        refused(capsys, ["export", "--model", model, "--output", output, "--overwrite"],
                f"--output {output}: holds --model {model}")
    # A hard link: another name of the input file itself.
    jsonl = run_folder / "lines.jsonl"
    jsonl.write_text('{"text": "the cat"}\n')
    os.link(jsonl, run_folder / "vectors.jsonl")
    before = files(run_folder.parent)
    refused(capsys, ["encode", "--model", model, "--input", "lines.jsonl",
                     "--output", "vectors.jsonl", "--overwrite"],
            "--output vectors.jsonl: is --input lines.jsonl")
    assert files(run_folder.parent) == before


def test_evaluate_and_train_never_write_over_their_inputs(run_folder, capsys, shared_data):
    model = run_folder / "encoder.keras"
    pairs = run_folder / "pairs.data"
    pairs.write_text("一个人\t两个人\t3\n猫\t狗\t1\n", encoding="utf-8")
    before = files(run_folder.parent)
    refused(capsys, ["evaluate", "--model", model, "--data", pairs, "--json", pairs,
                     "--overwrite"], f"--json {pairs}: is --data {pairs}")
    table = run_folder / "table.md"
    same_table = run_folder / ".." / "x" / "table.md"
    refused(capsys, ["evaluate", "--model", model, "--suite", "english-sts", "--data-dir",
                     shared_data, "--json", table, "--markdown", same_table],
            f"--markdown {same_table}: is --json {table}")
    refused(capsys, ["evaluate", "--model", model, "--suite", "english-sts", "--data-dir",
                     shared_data, "--json", shared_data / "sts_en" / "table.json"],
            f"--json {shared_data / 'sts_en' / 'table.json'}: lies inside --data-dir")
    data = shared_data / "senteval_cn"
    refused(capsys, ["train", "--model", model, "--data-dir", data, "--task", "STS-B",
                     "--output", run_folder, "--overwrite"],
            f"--output {run_folder}: holds --model {model}")
    refused(capsys, ["train", "--model", model, "--data-dir", data, "--task", "STS-B",
                     "--output", data / "STS-B" / "run"],
            f"--output {data / 'STS-B' / 'run'}: lies inside --data-dir {data}")
    assert files(run_folder.parent) == before


def test_overwrite_replaces_an_earlier_export_but_no_file_of_the_user(
        model_and_texts, tmp_path, capsys):
    model, _ = model_and_texts
    output = tmp_path / "served"
    argv = ["export", "--model", str(model), "--format", "sentence_transformers",
            "--output", str(output)]
    assert kcse_main(argv) == 0
    first = files(output)
    assert "kcse_export.json" in first and "modules.json" in first
    (output / "modules.json").write_text("[]")  # A file kcse wrote: replaced.
    assert kcse_main(argv + ["--overwrite"]) == 0
    assert files(output) == first
    capsys.readouterr()
    (output / "1_Pooling" / "mine.txt").write_text("kept\n")
    before = files(output)
    refused(capsys, argv + ["--overwrite"],
            f"--output {output}: holds 1_Pooling/mine.txt, which kcse did not write there")
    assert files(output) == before
    (output / "1_Pooling" / "mine.txt").unlink()
    (output / "kcse_export.json").unlink()  # No list of what kcse wrote: all the user's.
    before = files(output)
    refused(capsys, argv + ["--overwrite"], "holds 1_Pooling/config.json, which kcse did not")
    assert files(output) == before
    assert not [path for path in tmp_path.iterdir() if path.name.startswith(".")]


def test_a_second_writer_of_one_output_stops_before_the_model_loads(model_and_texts,
                                                                     tmp_path, capsys):
    model, texts = model_and_texts
    cases = [
        ["export", "--model", model, "--output", tmp_path / "served"],
        ["encode", "--model", model, "--input", texts, "--output", tmp_path / "v.npy"],
        ["train", "--model", model, "--output", tmp_path / "run"],
    ]
    for argv in cases:
        output = argv[-1]
        with file_locks.claiming(output):
            refused(capsys, argv, f"kcse {argv[0]}: error: {output} is being written by "
                    f"process {os.getpid()}")
        assert not output.exists()
    assert list(tmp_path.iterdir()) == []  # Nor a claim file left behind.
    assert kcse_main([str(part) for part in cases[1]]) == 0  # Released: a run writes it.
    assert "wrote 4 vectors" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == [tmp_path / "v.npy"]


@pytest.mark.parametrize("fmt", ["tf_saved_model", "sentence_transformers"])
def test_the_api_never_replaces_a_folder_holding_files_kcse_did_not_write(run_folder, fmt):
    import keras

    encoder = keras.saving.load_model(run_folder / "encoder.keras")
    before = files(run_folder)
    with pytest.raises(FileExistsError, match=f"{run_folder} holds encoder.keras, which kcse "
                       "did not write there; overwrite replaces only a folder kcse wrote"):
        encoder.export(run_folder, format=fmt, overwrite=True)
    assert files(run_folder) == before


def test_train_overwrite_replaces_its_two_files_and_keeps_the_others(tmp_path, shared_data,
                                                                     capsys):
    model = tiny_task_and_model(tmp_path, shared_data)  # PATH:bert, a checkpoint folder.
    checkpoint = pathlib.Path(model.rsplit(":", 1)[0])
    output = tmp_path / "run"
    output.mkdir()
    (output / "encoder.keras").write_bytes(b"earlier encoder")
    (output / "train.json").write_text("{}\n")
    (output / "notes.txt").write_text("mine\n")
    argv = ["train", "--model", model, "--pooling", "P1", "--data-dir", tmp_path / "data",
            "--task", "STS-B", "--protocol", "su", "--sentences", "32", "--batch-size", "16"]
    before = files(tmp_path)
    refused(capsys, argv + ["--output", checkpoint / "run", "--overwrite"],
            f"--output {checkpoint / 'run'}: lies inside --model {checkpoint}")
    refused(capsys, argv + ["--output", tmp_path / "data" / "run"],
            f"--output {tmp_path / 'data' / 'run'}: lies inside --data-dir {tmp_path / 'data'}")
    refused(capsys, argv + ["--output", output], f"{output / 'encoder.keras'} exists: pass "
            "--overwrite to replace it")
    assert files(tmp_path) == before
    assert kcse_main([str(part) for part in argv + ["--output", output, "--overwrite"]]) == 0
    assert (output / "notes.txt").read_text() == "mine\n"
    assert (output / "encoder.keras").read_bytes() != b"earlier encoder"
    assert json.loads((output / "train.json").read_text())["method"] == "simcse"
    assert sorted(path.name for path in output.iterdir()) == [
        "encoder.keras", "notes.txt", "train.json"]
    assert {path.name for path in tmp_path.iterdir()} == {"data", "tiny_bert", "run"}
