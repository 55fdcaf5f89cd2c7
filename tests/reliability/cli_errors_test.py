"""Bad input to the `kcse` command and the recipes: one line, exit 2, no TensorFlow.

Each case runs the command as a user does (a fresh process) and asserts the
exit code, that stderr is exactly one line `<command>: error: ...` naming
the bad flag, file or value, and, for errors found in the arguments
themselves, that TensorFlow was never imported (the error is immediate).
"""

import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tiny_grid import tiny_task_and_model

REPO = pathlib.Path(__file__).resolve().parents[2]
# Runs `main` of the `kcse` command or of a recipe file with the arguments
# given; prints whether TensorFlow was imported (stdout's last line) and
# exits with main's code.
DRIVER = """
import runpy, sys
target, argv = sys.argv[1], sys.argv[2:]
sys.argv = [target, *argv]  # As `python recipes/x.py ...` sets it.
try:
    if target == "kcse":
        from kcse.cli import main
        code = main(argv)
    else:
        code = runpy.run_path(target)["main"](argv) and 0
except SystemExit as exit:
    code = exit.code
print("tensorflow imported:", "tensorflow" in sys.modules)
sys.exit(code)
"""


def run(target, *arguments):
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    return subprocess.run(
        [sys.executable, "-c", DRIVER, str(target), *map(str, arguments)],
        capture_output=True, text=True, env=env, cwd=REPO,
    )


def assert_one_line_error(result, prefix, *fragments, tensorflow=False):
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr[-3000:]  # No traceback, no TF logs.
    assert lines[0].startswith(f"{prefix}: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert result.stdout.splitlines()[-1] == f"tensorflow imported: {tensorflow}"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bad_inputs")
    (folder / "texts.txt").write_text("你好\n今天天气很好\n", encoding="utf-8")
    (folder / "pairs.data").write_text("一个人\t两个人\t3\n猫\t狗\t1\n", encoding="utf-8")
    (folder / "a_file").write_text("not a folder")
    (folder / "existing.npy").write_bytes(b"mine")
    (folder / "existing.json").write_text("[]")
    (folder / "a_folder").mkdir()
    (folder / "a_folder" / "x").write_text("x")
    return folder


TRAIN = ["train", "--model", "e5-small", "--output", "{tmp}/run"]

# (arguments, fragments the error line must hold). "{f}" is the files folder.
KCSE_CASES = {
    "batch of one": (TRAIN + ["--batch-size", "1"], ["--batch-size", ">= 2", "'1'"]),
    "batch of zero": (TRAIN + ["--batch-size", "0"], ["--batch-size", "'0'"]),
    "batch not a number": (TRAIN + ["--batch-size", "many"], ["--batch-size", "'many'"]),
    "zero epochs": (TRAIN + ["--epochs", "0"], ["--epochs", ">= 1"]),
    "zero sentences": (TRAIN + ["--sentences", "0"], ["--sentences", ">= 1"]),
    "learning rate zero": (TRAIN + ["--learning-rate", "0"], ["--learning-rate", "> 0"]),
    "learning rate negative": (TRAIN + ["--learning-rate", "-1e-5"], ["--learning-rate"]),
    "learning rate nan": (TRAIN + ["--learning-rate", "nan"], ["--learning-rate", "finite"]),
    "temperature zero": (TRAIN + ["--temperature", "0"], ["--temperature", "> 0"]),
    "temperature inf": (TRAIN + ["--temperature", "inf"], ["--temperature", "finite"]),
    "dropout one": (TRAIN + ["--dropout", "1"], ["--dropout", "< 1"]),
    "dropout negative": (TRAIN + ["--dropout", "-0.1"], ["--dropout", ">= 0"]),
    "max length zero": (TRAIN + ["--max-length", "0"], ["--max-length", ">= 1"]),
    "eval every zero": (TRAIN + ["--eval-every", "0"], ["--eval-every"]),
    "negative seed": (TRAIN + ["--seed", "-1"], ["--seed", "from 0 to 4294967295"]),
    "unknown task": (TRAIN + ["--task", "XNLI"], ["--task", "'XNLI'"]),
    "unknown method": (TRAIN + ["--method", "magic"], ["--method", "'magic'"]),
    "unknown pooling": (TRAIN + ["--pooling", "P7"], ["--pooling", "'P7'"]),
    "unknown view": (TRAIN + ["--method", "consert", "--views", "shuffle,blur"],
                     ["--views", "unknown view 'blur'"]),
    "view rate of 1.5": (TRAIN + ["--method", "consert", "--views", "dropout:1.5,shuffle"],
                         ["--views", "dropout:1.5", "< 1"]),
    "three views": (TRAIN + ["--method", "consert", "--views", "shuffle,none,shuffle"],
                    ["--views", "two views"]),
    "flag of another method": (TRAIN + ["--views", "shuffle,none"],
                               ["--views is a flag of consert, not of --method simcse"]),
    "nli for sg_opt": (TRAIN + ["--method", "sg_opt", "--nli", "{f}/pairs.data"],
                       ["--nli is a flag of consert and sup_simcse"]),
    "supervised mode without nli": (TRAIN + ["--method", "consert", "--mode", "sup"],
                                    ["--mode sup", "--nli"]),
    "missing nli file": (TRAIN + ["--method", "sup_simcse", "--nli", "{f}/no.jsonl"],
                         ["--nli", "no.jsonl: no such file"]),
    "negative projection": (TRAIN + ["--method", "sg_opt", "--projection-dim", "0"],
                            ["--projection-dim"]),
    "negative regularization": (TRAIN + ["--method", "sg_opt", "--regularization", "-1"],
                                ["--regularization", ">= 0"]),
    "output is a file": (["train", "--model", "e5-small", "--output", "{f}/a_file"],
                         ["--output", "a_file: is a file; give a folder"]),
    "missing data dir": (TRAIN + ["--data-dir", "{f}/nowhere"], ["--data-dir", "no such folder"]),
    "task missing from data dir": (TRAIN + ["--data-dir", "{f}", "--task", "BQ"],
                                   ["BQ train split not found"]),
    "su model without root": (["train", "--model", "BERT", "--output", "{tmp}/r"],
                              ["--model BERT", "--checkpoint-root"]),
    "unknown family": (["train", "--model", "{f}/a_folder:gpt", "--output", "{tmp}/r"],
                       ["--model", "unknown family 'gpt'", "nezha"]),
    "misspelt preset": (["encode", "--model", "bert_base_zhh", "--input", "{f}/texts.txt",
                         "--output", "{tmp}/v.npy"], ["--model bert_base_zhh", "bert_base_zh"]),
    "missing model folder": (["encode", "--model", "./no/such/folder", "--input",
                              "{f}/texts.txt", "--output", "{tmp}/v.npy"],
                             ["--model ./no/such/folder", "no such file or folder"]),
    "missing keras file": (["export", "--model", "{f}/no.keras", "--output", "{tmp}/s"],
                           ["--model", "no.keras: no such file"]),
    "encode output suffix": (["encode", "--model", "e5-small", "--input", "{f}/texts.txt",
                              "--output", "{tmp}/v.csv"], ["--output", ".npy or .jsonl"]),
    "encode output is a folder": (["encode", "--model", "e5-small", "--input",
                                   "{f}/texts.txt", "--output", "{f}/a_folder"],
                                  ["--output", "is a folder; give a file name"]),
    "encode output under a file": (["encode", "--model", "e5-small", "--input",
                                    "{f}/texts.txt", "--output", "{f}/a_file/v.npy"],
                                   ["--output", "a_file is a file, not a folder"]),
    "encode input is a folder": (["encode", "--model", "e5-small", "--input", "{f}/a_folder",
                                  "--output", "{tmp}/v.npy"],
                                 ["--input", "a_folder: is a folder; give a file"]),
    "encode batch of zero": (["encode", "--model", "e5-small", "--input", "{f}/texts.txt",
                              "--output", "{tmp}/v.npy", "--batch-size", "0"],
                             ["--batch-size", ">= 1"]),
    "encode would replace a file": (["encode", "--model", "e5-small", "--input",
                                     "{f}/texts.txt", "--output", "{f}/existing.npy"],
                                    ["existing.npy exists: pass --overwrite"]),
    "evaluate missing data": (["evaluate", "--model", "e5-small", "--data", "{f}/pairs.data",
                               "{f}/no.data"], ["--data", "no.data: no such file"]),
    "evaluate json would replace": (["evaluate", "--model", "e5-small", "--data",
                                     "{f}/pairs.data", "--json", "{f}/existing.json"],
                                    ["existing.json exists: pass --overwrite"]),
    "evaluate json is a folder": (["evaluate", "--model", "e5-small", "--data",
                                   "{f}/pairs.data", "--json", "{f}/a_folder"],
                                  ["--json", "is a folder"]),
    "export output is a file": (["export", "--model", "e5-small", "--output", "{f}/a_file"],
                                ["--output", "is a file; give a folder"]),
    "required flag missing": (["train", "--model", "e5-small"], ["--output", "required"]),
    "unknown precision": (TRAIN + ["--precision", "float64"],
                          ["--precision", "'float64'", "'bfloat16'"]),
    "compilation cache is a file": (TRAIN + ["--compilation-cache", "{f}/a_file"],
                                    ["--compilation-cache", "a_file: is a file"]),
    "checkpoint root is a file": (["encode", "--model", "BERT", "--checkpoint-root",
                                   "{f}/a_file", "--input", "{f}/texts.txt", "--output",
                                   "{tmp}/v.npy"], ["--checkpoint-root", "is a file"]),
}


def fill(arguments, files, tmp_path):
    return [argument.format(f=files, tmp=tmp_path) for argument in arguments]


@pytest.mark.parametrize("case", sorted(KCSE_CASES))
def test_kcse_refuses_bad_arguments_at_once(case, files, tmp_path):
    arguments, fragments = KCSE_CASES[case]
    arguments = fill(arguments, files, tmp_path)
    result = run("kcse", *arguments)
    assert_one_line_error(result, f"kcse {arguments[0]}", *fill(fragments, files, tmp_path))
    # Nothing was written: no run folder, no vectors, the user's files intact.
    assert list(tmp_path.iterdir()) == []
    assert (files / "existing.npy").read_bytes() == b"mine"


RECIPE_CASES = {
    "chinese_simcse": [
        (["--poolings", "P1,P9"], ["--poolings", "'P9'"]),
        (["--poolings", "P1,P1"], ["--poolings", "twice"]),
        (["--tasks", "STS-B,XNLI"], ["--tasks", "'XNLI'"]),
        (["--tasks", ""], ["--tasks", "comma-separated"]),
        (["--models", "e5-small,bret"], ["--models bret"]),
        (["--seeds", "0"], ["--seeds", ">= 1"]),
        (["--seed", "4294967295", "--seeds", "2"], ["--seed 4294967295 --seeds 2"]),
        (["--output", "{f}/a_file"], ["--output", "is a file"]),
        (["--trained-splits", "dev"], ["--trained-splits", "'dev'"]),
        (["--protocol", "dirty"], ["--protocol", "'dirty'"]),
        (["--long-max-length", "0"], ["--long-max-length"]),
        (["--precision", "fp16"], ["--precision", "'fp16'", "'float16'"]),
        (["--compilation-cache", "{f}/a_file"], ["--compilation-cache", "is a file"]),
    ],
    "consert": [
        (["--views", "adversarial:0,shuffle"], ["--views", "adversarial:0", "> 0"]),
        (["--mode", "joint"], ["--mode joint", "--nli"]),
        (["--contrastive-weight", "-1"], ["--contrastive-weight", ">= 0"]),
    ],
    "sg_opt": [(["--projection-dim", "0"], ["--projection-dim", ">= 1"])],
    "sup_simcse": [
        (["--nli", "{f}/a_folder"], ["--nli", "is a folder"]),
        (["--hard-negative-weight", "nan"], ["--hard-negative-weight", "finite"]),
    ],
    "english_simcse": [
        (["--epochs", "0"], ["--epochs", ">= 1"]),
        (["--language", "xx"], ["--data-dir", "stsb-xx-train.csv: no such file"]),
        (["--hidden-dropout", "1.5"], ["--hidden-dropout", "< 1"]),
        (["--precision", "half"], ["--precision", "'half'"]),
    ],
}


@pytest.mark.parametrize(
    "recipe, index",
    [(recipe, index) for recipe, cases in RECIPE_CASES.items() for index in range(len(cases))],
)
def test_recipes_refuse_bad_arguments_at_once(recipe, index, files, shared_data):
    arguments, fragments = RECIPE_CASES[recipe][index]
    result = run(REPO / "recipes" / f"{recipe}.py", *fill(arguments, files, ""),
                 *(["--data-dir", shared_data] if recipe == "english_simcse" else []))
    assert_one_line_error(result, f"{recipe}.py", *fill(fragments, files, ""))


# Errors that need the model: found right after it loads, before any work.


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, shared_data):
    folder = tmp_path_factory.mktemp("tiny")
    return folder, tiny_task_and_model(folder, shared_data)  # 128 positions.


def test_a_length_beyond_the_position_embeddings_is_refused(tiny_model, files, tmp_path):
    _, model = tiny_model
    result = run("kcse", "encode", "--model", model, "--max-length", "129",
                 "--input", files / "texts.txt", "--output", tmp_path / "v.npy")
    assert_one_line_error(result, "kcse encode", "--max-length 129",
                          "position embeddings for 128 tokens", tensorflow=True)
    assert "model:" not in result.stdout and not (tmp_path / "v.npy").exists()


def test_a_pooling_the_model_lacks_is_refused(tmp_path, files):
    from checkpoints import write_family

    folder = write_family(tmp_path, "bert", pooler=False)
    result = run("kcse", "encode", "--model", f"{folder}:bert", "--pooling", "P2",
                 "--input", files / "texts.txt", "--output", tmp_path / "v.npy")
    assert_one_line_error(result, "kcse encode", "--pooling P2", "pooler", tensorflow=True)
    assert not (tmp_path / "v.npy").exists()


def test_a_saved_encoder_keeps_its_pooling_and_takes_a_max_length(tmp_path, files, capsys):
    import keras_hub

    import kcse
    from kcse import cli

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30, num_layers=1, num_heads=1, hidden_dim=8,
        intermediate_dim=8, max_sequence_length=16)
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "你", "好"])
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(tokenizer, sequence_length=16)
    kcse.SentenceEncoder(backbone, preprocessor, pooling="cls").save(tmp_path / "e.keras")
    model = ["--model", str(tmp_path / "e.keras"), "--input", str(files / "texts.txt")]

    assert cli.main(["encode", *model, "--pooling", "P3", "--output",
                     str(tmp_path / "v.npy")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("kcse encode: error: --pooling P3: ") and "'cls'" in error
    assert cli.main(["encode", *model, "--max-length", "17", "--output",
                     str(tmp_path / "v.npy")]) == 2
    assert "--max-length 17: the model has position embeddings for 16 tokens" in (
        capsys.readouterr().err)
    # P1 is cls: the same pooling, accepted; a shorter length is applied.
    assert cli.main(["encode", *model, "--pooling", "P1", "--max-length", "4",
                     "--output", str(tmp_path / "v.npy")]) == 0
    assert np.load(tmp_path / "v.npy").shape == (2, 8)


def test_an_unwritable_output_is_refused(tmp_path, files, monkeypatch, capsys):
    from kcse import cli

    target = tmp_path / "locked"
    target.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: (
        False if pathlib.Path(path) == target else real_access(path, mode)))
    assert cli.main(["encode", "--model", "e5-small", "--input", str(files / "texts.txt"),
                     "--output", str(target / "v.npy")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"kcse encode: error: --output {target / 'v.npy'}: cannot write in {target} "
        "(permission denied)")


def test_a_command_is_quiet_and_plain_when_piped(tiny_model, tmp_path):
    # No TensorFlow start-up lines, no ANSI codes or backspaces from the
    # progress bar; the one truncated sentence is said once, in one line.
    _, model = tiny_model
    texts = tmp_path / "texts.txt"
    texts.write_text("你好\n" + "天气很好" * 200 + "\n今天\n", encoding="utf-8")
    result = run("kcse", "encode", "--model", model, "--max-length", "16",
                 "--input", texts, "--output", tmp_path / "v.npy")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr == (
        "kcse encode: warning: 1 of 3 sentences are longer than the maximum length 16 "
        "tokens and were truncated; raise the preprocessor's sequence_length to keep "
        "them whole.\n")
    assert "\x1b" not in result.stdout and "\b" not in result.stdout
    assert "wrote 3 vectors" in result.stdout
    assert np.load(tmp_path / "v.npy").shape[0] == 3


@pytest.mark.parametrize("content, message", [
    ("一个人\t两个人\t3\n", "needs at least 2 pairs; got 1"),
    ("一个人\t两个人\t3\n猫\t狗\t3\n", "gold scores are all equal (3)"),
])
def test_evaluate_refuses_pairs_without_a_correlation(content, message, tmp_path, capsys):
    from kcse import cli

    data = tmp_path / "few.data"
    data.write_text(content, encoding="utf-8")
    assert cli.main(["evaluate", "--model", "e5-small", "--data", str(data)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"kcse evaluate: error: {data}: ") and message in error, error
