"""The `kcse` command's parser and its one-line errors: each subcommand's
--help, and bad input refused with exit code 2 and one line (in a new
process: no traceback, no TensorFlow start-up lines; and in this one)."""

import zipfile

import pytest

from command_runs import TENSORFLOW_LOG_LINE
from command_runs import kcse_command
from conftest import tiny_encoder_file
from kcse.commands.main import main


@pytest.mark.parametrize("command", ["train", "evaluate", "encode", "export"])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert "--model" in out and f"usage: kcse {command}" in out
    if command == "train":
        assert "--precision {float32,bfloat16,float16}" in out
        assert "--compilation-cache DIR|auto|off" in out


def test_commands_are_quiet_unless_verbose(tmp_path):
    """No TensorFlow start-up line from `kcse --help` or a command that
    starts TensorFlow, with TF_CPP_MIN_LOG_LEVEL unset; --verbose shows them."""
    assert kcse_command("--help", log_level=None).stderr == ""
    model, texts = tiny_encoder_file(tmp_path, 2)
    runs = {verbose: kcse_command("encode", "--model", model, "--input", texts, "--output",
                                  tmp_path / f"{verbose}.npy", *verbose, log_level=None)
            for verbose in ((), ("--verbose",))}
    for run in runs.values():
        assert run.returncode == 0, run.stderr[-3000:]
    assert not TENSORFLOW_LOG_LINE.search(runs[()].stderr), runs[()].stderr[-3000:]
    assert TENSORFLOW_LOG_LINE.search(runs[("--verbose",)].stderr)


def bad_inputs(folder, model):
    (folder / "empty.txt").write_text("")
    (folder / "bad.data").write_text("一个人\t两个人\t3\n只有一列\n", encoding="utf-8")
    (folder / "bad.jsonl").write_text('{"text": "好"}\n{"text": \n', encoding="utf-8")
    (folder / "ok.txt").write_text("你好\n", encoding="utf-8")
    # A zip archive as Keras writes, whose config.json is no model: only
    # loading it would fail.
    with zipfile.ZipFile(folder / "not.keras", "w") as archive:
        archive.writestr("config.json", "not a model")
    (folder / "corrupt.keras").write_text("not a zip archive")
    keras_file = folder / "run" / "encoder.keras"
    return {
        "missing file": (
            ["evaluate", "--model", keras_file, "--data", folder / "nope.data"],
            "nope.data: no such file"),
        "missing model file": (
            ["export", "--model", folder / "nope.keras", "--output", folder / "x"],
            "nope.keras: no such file"),
        "empty file": (
            ["encode", "--model", keras_file, "--input", folder / "empty.txt",
             "--output", folder / "e.npy"],
            "empty.txt: the file is empty"),
        "malformed pair line": (
            ["evaluate", "--model", keras_file, "--data", folder / "bad.data"],
            "bad.data:2: expected 3 tab-separated fields"),
        "malformed jsonl line": (
            ["encode", "--model", keras_file, "--input", folder / "bad.jsonl",
             "--output", folder / "e.npy"],
            "bad.jsonl:2: not JSON"),
        "unknown model": (
            ["encode", "--model", "no_such_model", "--input", folder / "ok.txt",
             "--output", folder / "e.npy"],
            "--model no_such_model: not a .keras file, folder, model name"),
        "shard beyond its count": (
            ["encode", "--model", keras_file, "--input", folder / "ok.txt",
             "--output", folder / "e.npy", "--shard", "4/3"],
            "argument --shard: must be K/N, integers with 1 <= K <= N (shard K of N); "
            "got '4/3'"),
        "shard without a count": (
            ["encode", "--model", keras_file, "--input", folder / "ok.txt",
             "--output", folder / "e.npy", "--shard", "2"],
            "argument --shard: must be K/N"),
        # Checked before the model loads: not.keras is no model at all.
        "corrupt keras file": (
            ["encode", "--model", folder / "corrupt.keras", "--input", folder / "ok.txt",
             "--output", folder / "e.npy"],
            f"--model {folder / 'corrupt.keras'}: not a valid Keras archive (File is not "
            "a zip file); a .keras file is a zip archive holding config.json"),
        "empty shard": (
            ["encode", "--model", folder / "not.keras", "--input", folder / "ok.txt",
             "--output", folder / "e.npy", "--shard", "2/3"],
            "--shard 2/3: " + str(folder / "ok.txt") + " has 1 line, none in this shard"),
        "jsonl field the records use": (
            ["encode", "--model", keras_file, "--input", folder / "bad.jsonl",
             "--output", folder / "e.jsonl", "--field", "line"],
            "--field line: .jsonl output records use 'line' and 'embedding'"),
        "unknown method": (
            ["train", "--model", model, "--method", "magic", "--output", folder / "x"],
            "argument --method: invalid choice: 'magic'"),
        "bad view": (
            ["train", "--model", model, "--method", "consert", "--views",
             "shuffle,blur", "--output", folder / "x"],
            "unknown view 'blur'"),
        # The cluster's variables are checked before TensorFlow starts
        # (the test process has none of them set).
        "distributed without a cluster": (
            ["train", "--model", model, "--distributed", "--output", folder / "x"],
            "--distributed: multi-process training needs KERAS_DISTRIBUTION_JOB_ADDRESSES"),
    }


@pytest.mark.parametrize(
    "case", ["missing file", "empty file", "malformed pair line", "unknown model"]
)
def test_bad_input_exits_with_one_line(trained_command, case):
    folder, model, _ = trained_command
    arguments, message = bad_inputs(folder, model)[case]
    run = kcse_command(*arguments)
    assert run.returncode == 2
    # One line and nothing else: no traceback, no TensorFlow start-up lines.
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert run.stderr.startswith(f"kcse {arguments[0]}: error: ") and message in run.stderr


@pytest.mark.parametrize(
    "case", ["missing model file", "malformed jsonl line", "unknown method", "bad view",
             "shard beyond its count", "shard without a count", "empty shard",
             "corrupt keras file", "jsonl field the records use", "distributed without a cluster"]
)
def test_more_bad_inputs_in_process(trained_command, case, capsys):
    # The same `main` as the console script (`sys.exit(main())`), without
    # a process start each.
    folder, model, _ = trained_command
    arguments, message = bad_inputs(folder, model)[case]
    assert main([str(argument) for argument in arguments]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert error.startswith(f"kcse {arguments[0]}: error: ") and message in error
