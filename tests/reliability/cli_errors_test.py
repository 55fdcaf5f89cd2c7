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
        from kcse.commands.main import main
        code = main(argv)
    else:
        code = runpy.run_path(target)["main"](argv) and 0
except SystemExit as exit:
    code = exit.code
print("tensorflow imported:", "tensorflow" in sys.modules)
sys.exit(code)
"""


def run(target, *arguments, **environment):
    """`main` of `target` in a fresh process, with `environment` set."""
    env = {key: value for key, value in os.environ.items() if key != "TF_CPP_MIN_LOG_LEVEL"}
    env.update(environment)
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
    (folder / "not_utf8.txt").write_bytes(b"fine\n\xe9t\xe9\n")  # Latin-1 on line 2.
    (folder / "one_sentence.txt").write_text("only one\n\n", encoding="utf-8")
    (folder / "existing.npy").write_bytes(b"mine")
    (folder / "existing.json").write_text("[]")
    (folder / "a_folder").mkdir()
    (folder / "a_folder" / "x").write_text("x")
    (folder / "texts.jsonl").write_text('{"text": "你好"}\n', encoding="utf-8")
    (folder / "corrupt.keras").write_bytes(b"not a zip archive")
    (folder / "synonyms_bad.txt").write_text("好\t佳\n喜欢 喜爱\n", encoding="utf-8")
    (folder / "synonyms_none.txt").write_text("# word<TAB>synonyms\n好\t好\n",
                                              encoding="utf-8")
    # A task whose test labels are all equal: Spearman is undefined there.
    write_constant_task(folder / "constant", "test")
    return folder


def write_constant_task(data_dir, split, pairs=3):
    """`data_dir/STS-B/` of the bundled STS-B's first pairs, `split`'s
    labels all 3 (`pairs` of them)."""
    from kcse.data.chinese import BUNDLED_CHINESE_STS

    (data_dir / "STS-B").mkdir(parents=True)
    for name in ("train", "valid", "test"):
        lines = (BUNDLED_CHINESE_STS / "STS-B" / f"STS-B.{name}.data").read_text(
            encoding="utf-8").splitlines()[:pairs if name == split else 20]
        if name == split:
            lines = ["\t".join(line.split("\t")[:2] + ["3"]) for line in lines]
        (data_dir / "STS-B" / f"STS-B.{name}.data").write_text(
            "\n".join(lines) + "\n", encoding="utf-8")
    return data_dir


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
    "max length zero": (TRAIN + ["--max-length", "0"], ["--max-length", ">= 3"]),
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
    # Issue 29: said at once, in words that fit.
    "train on constant test labels": (
        TRAIN + ["--data-dir", "{f}/constant"],
        ["{f}/constant/STS-B/STS-B.test.data: The gold scores are all equal (3), so "
         "Spearman's correlation with them is undefined; kcse train scores the test "
         "split before and after training"]),
    "a bad synonym line": (
        TRAIN + ["--text-views", "synonym_substitution,word_deletion",
                 "--synonyms", "{f}/synonyms_bad.txt"],
        ["--synonyms {f}/synonyms_bad.txt:2: expected word<TAB>synonyms"]),
    "a synonym table without synonyms": (
        TRAIN + ["--text-views", "synonym_substitution,word_deletion",
                 "--synonyms", "{f}/synonyms_none.txt"],
        ["--synonyms {f}/synonyms_none.txt: no word with a synonym"]),
    "an empty text view": (TRAIN + ["--text-views", "word_deletion,,reordering"],
                           ["--text-views", "an empty item in 'word_deletion,,reordering'"]),
    "a corrupt keras file": (
        ["encode", "--model", "{f}/corrupt.keras", "--input", "{f}/texts.txt",
         "--output", "{tmp}/v.npy"],
        ["--model {f}/corrupt.keras: not a valid Keras archive (File is not a zip file)"]),
    "a jsonl file as the model": (
        ["encode", "--model", "{f}/texts.jsonl", "--input", "{f}/texts.txt",
         "--output", "{tmp}/v.npy"],
        ["--model {f}/texts.jsonl: a file, but not a model; give a .keras file"]),
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
        (["--poolings", "P1,,P3"], ["--poolings", "an empty item in 'P1,,P3'"]),
        (["--postprocess", "whitening,"], ["--postprocess", "an empty item"]),
        (["--postprocess", "whitening,c+w"], ["--postprocess", "'c+w'", "trained-whitening"]),
        (["--text-views", "synonym_substitution,word_deletion", "--synonyms",
          "{f}/synonyms_bad.txt"], ["--synonyms {f}/synonyms_bad.txt:2:"]),
    ],
    "consert": [
        (["--views", "adversarial:0,shuffle"], ["--views", "adversarial:0", "> 0"]),
        (["--mode", "joint"], ["--mode joint", "--nli"]),
        (["--train-file", "{f}/not_utf8.txt"],
         ["--train-file {f}/not_utf8.txt:2: not UTF-8 text"]),
        (["--contrastive-weight", "-1"], ["--contrastive-weight", ">= 0"]),
    ],
    "sg_opt": [(["--projection-dim", "0"], ["--projection-dim", ">= 1"])],
    "sup_simcse": [
        (["--nli", "{f}/a_folder"], ["--nli", "is a folder"]),
        (["--hard-negative-weight", "nan"], ["--hard-negative-weight", "finite"]),
        (["--train-file", "{f}/texts.txt"],
         ["--train-file: --method sup_simcse trains on labelled pairs"]),
    ],
    "english_simcse": [
        (["--epochs", "0"], ["--epochs", ">= 1"]),
        (["--model", "{f}/corrupt.keras"],
         ["--model {f}/corrupt.keras: a saved kcse encoder; this recipe starts from a "
          "keras-hub preset or a model folder: train it with `kcse train --model "
          "{f}/corrupt.keras`"]),
        (["--language", "xx"], ["--language", "invalid choice: 'xx'", "'de', 'en'"]),
        (["--max-length", "2"], ["--max-length", ">= 3 ([CLS], at least one token and [SEP]"]),
        (["--hidden-dropout", "1.5"], ["--hidden-dropout", "< 1"]),
        (["--precision", "half"], ["--precision", "'half'"]),
        (["--train-file", "{f}/not_utf8.txt"],
         ["--train-file {f}/not_utf8.txt:2: not UTF-8 text"]),
        (["--train-file", "{f}/one_sentence.txt"],
         ["--train-file {f}/one_sentence.txt: 1 sentence; --method simcse contrasts "
          "in-batch negatives and needs at least 2"]),
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
    # The checkpoint's files say it (its .index lists no pooler): before
    # TensorFlow starts, not after the model loaded.
    from checkpoints import write_family

    folder = write_family(tmp_path, "bert", pooler=False)
    result = run("kcse", "encode", "--model", f"{folder}:bert", "--pooling", "P2",
                 "--input", files / "texts.txt", "--output", tmp_path / "v.npy")
    assert_one_line_error(
        result, "kcse encode",
        f"--pooling P2: {folder / 'bert_model.ckpt.index'}: no pretrained pooler (no "
        "variable bert/pooler/dense/kernel); use another pooling")
    assert not (tmp_path / "v.npy").exists()


@pytest.fixture
def no_model_loads(monkeypatch):
    """Every way the commands and recipes load a model fails the test."""
    import keras

    from kcse.experiments import grid
    from kcse.models import model_sources

    def load(*args, **kwargs):
        raise AssertionError("a model was loaded")

    for owner in (model_sources, grid):
        monkeypatch.setattr(owner, "load_model", load)
    monkeypatch.setattr(keras.saving, "load_model", load)


def assert_error_line(capsys, prefix, message):
    """stderr is exactly one line, `<prefix>: error: <message>`."""
    assert capsys.readouterr().err == f"{prefix}: error: {message}\n"


@pytest.mark.parametrize("pooling, family, pooler, problem", [
    ("P2", "nezha", False, "{index}: no pretrained pooler (no variable "
                           "bert/pooler/dense/kernel)"),
    ("pooler", "bert", False, "{index}: no pretrained pooler (no variable "
                              "bert/pooler/dense/kernel)"),
    ("wk", "bert", True, "{config}: 2 transformer blocks, too few for WK pooling "
                         "(layer_start 4, context window 2: 6 or more)"),
])
@pytest.mark.parametrize("command", ["train", "evaluate", "encode", "export"])
def test_a_pooling_the_checkpoint_lacks_is_refused_before_it_loads(
        command, pooling, family, pooler, problem, tmp_path, files, capsys, no_model_loads):
    from checkpoints import write_family

    from kcse.commands.main import main as kcse_main

    folder = write_family(tmp_path, family, pooler=pooler)
    rest = {"train": ["--output", str(tmp_path / "run")],
            "evaluate": ["--data", str(files / "pairs.data")],
            "encode": ["--input", str(files / "texts.txt"), "--output", str(tmp_path / "v.npy")],
            "export": ["--output", str(tmp_path / "served")]}[command]
    assert kcse_main([command, "--model", f"{folder}:{family}", "--pooling", pooling,
                     *rest]) == 2
    problem = problem.format(index=folder / "bert_model.ckpt.index",
                             config=folder / "bert_config.json")
    assert_error_line(capsys, f"kcse {command}",
                      f"--pooling {pooling}: {problem}; use another pooling")


def test_a_pooling_the_files_cannot_tell_is_left_to_the_loading(tmp_path):
    # A folder without a readable config, presets by name: nothing is known
    # before loading, so the check after it loads (SentenceEncoder) decides.
    from kcse.models import model_sources

    (tmp_path / "model").mkdir()
    assert model_sources.pooling_problem(str(tmp_path / "model"), "wk") is None
    assert model_sources.pooling_problem("e5-small", "P2") is None
    assert model_sources.pooling_problem("bert_tiny_en_uncased", "wk") is None


@pytest.mark.parametrize("split, protocol, pairs, problem", [
    ("test", "su", 3, "The gold scores are all equal (3), so Spearman's correlation "
                      "with them is undefined; kcse train scores the test split before "
                      "and after training"),
    ("test", "su", 1, "STS evaluation needs at least 2 pairs; got 1; kcse train scores "
                      "the test split before and after training"),
    ("valid", "clean", 3, "The gold scores are all equal (3), so Spearman's correlation "
                          "with them is undefined; kcse train scores the valid split to "
                          "keep the best step"),
])
def test_train_refuses_a_split_it_cannot_score_before_the_model_loads(
        split, protocol, pairs, problem, tmp_path, capsys, no_model_loads, monkeypatch):
    from kcse.commands import train
    from kcse.commands.main import main as kcse_main

    started = []
    monkeypatch.setattr(train, "start_keras", lambda *args: started.append(1))
    data_dir = write_constant_task(tmp_path / "data", split, pairs)
    assert kcse_main(["train", "--model", "e5-small", "--data-dir", str(data_dir),
                     "--protocol", protocol, "--output", str(tmp_path / "run")]) == 2
    assert_error_line(capsys, "kcse train",
                      f"{data_dir / 'STS-B' / f'STS-B.{split}.data'}: {problem}")
    assert started == [] and not (tmp_path / "run").exists()


def test_train_without_valid_selection_does_not_score_valid(tmp_path, monkeypatch):
    # --protocol su keeps no step on valid: constant valid labels are not scored.
    from kcse.commands import train
    from kcse.commands.main import main as kcse_main

    data_dir = write_constant_task(tmp_path / "data", "valid")
    monkeypatch.setattr(train, "start_keras", lambda *args: (_ for _ in ()).throw(
        RuntimeError("reached the training")))
    with pytest.raises(RuntimeError, match="reached the training"):
        kcse_main(["train", "--model", "e5-small", "--data-dir", str(data_dir),
                  "--protocol", "su", "--output", str(tmp_path / "run")])


@pytest.mark.parametrize("split, pairs, problem", [
    ("test", 3, "The gold scores are all equal (3), so Spearman's correlation with them "
                "is undefined"),
    ("train", 1, "STS evaluation needs at least 2 pairs; got 1"),
])
def test_recipes_refuse_a_split_the_grid_cannot_score_before_any_model_loads(
        split, pairs, problem, tmp_path, files, capsys, no_model_loads, monkeypatch):
    from checkpoints import write_family
    from tiny_grid import recipe

    monkeypatch.setattr(sys, "argv", ["chinese_simcse.py"])  # The parser's prog.
    data_dir = write_constant_task(tmp_path / "data", split, pairs)
    folder = write_family(tmp_path, "bert")
    with pytest.raises(SystemExit) as exit:
        recipe("chinese_simcse").main([
            "--models", f"{folder}:bert", "--data-dir", str(data_dir),
            "--output", str(tmp_path / "out"), "--poolings", "P3"])
    assert exit.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"chinese_simcse.py: error: {data_dir / 'STS-B' / f'STS-B.{split}.data'}: "
        f"{problem}; the grid scores every split of a task ({split} here)"]


@pytest.mark.parametrize("content, message", [
    ("好\t佳\n喜欢 喜爱\n", "{path}:2: expected word<TAB>synonyms separated by spaces; "
                          "no tab in '喜欢 喜爱'."),
    ("好\t\n", "{path}:1: '好' has no synonym after the tab."),
    ("# only a comment\n\n", "{path}: no word with a synonym; give a line per word, "
                             "word<TAB>synonym synonym ..."),
    (b"\xff\xfe\xfd\n", "{path}:1: not valid utf-8-sig text"),
])
def test_a_bad_synonym_file_is_refused_before_the_model_loads(
        content, message, tmp_path, capsys, no_model_loads, monkeypatch):
    from kcse.commands import train
    from kcse.commands.main import main as kcse_main
    from tiny_grid import recipe

    monkeypatch.setattr(sys, "argv", ["chinese_simcse.py"])  # The parser's prog.
    path = tmp_path / "synonyms.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    views = ["--text-views", "synonym_substitution,word_deletion", "--synonyms", str(path)]
    monkeypatch.setattr(train, "start_keras", lambda *args: pytest.fail("TF started"))
    assert kcse_main(["train", "--model", "e5-small", "--output", str(tmp_path / "run"),
                     *views]) == 2
    error = capsys.readouterr().err
    expected = "kcse train: error: --synonyms " + message.format(path=path)
    assert error.startswith(expected) and error.count("\n") == 1, error
    with pytest.raises(SystemExit) as exit:
        recipe("chinese_simcse").main(["--output", str(tmp_path / "out"), *views])
    assert exit.value.code == 2
    error = capsys.readouterr().err
    assert error.startswith(expected.replace("kcse train", "chinese_simcse.py"))
    assert error.count("\n") == 1


def test_a_good_synonym_file_is_read_once_by_the_checks(tmp_path):
    from kcse.experiments import command_line

    path = tmp_path / "synonyms.txt"
    path.write_text("好\t佳 好\n", encoding="utf-8")
    parser = command_line.comparison_parser("doc\n\nmore", tmp_path / "out")
    command_line.add_method_arguments(parser, ["simcse"])
    args = parser.parse_args(["--text-views", "synonym_substitution,word_deletion",
                              "--synonyms", str(path), "--output", str(tmp_path / "out")])
    command_line.check_comparison_arguments(args, "simcse")
    assert args.synonym_table == {"好": ["佳", "好"]}


def test_a_corrupt_keras_file_is_not_called_missing(tmp_path, capsys, no_model_loads):
    import zipfile

    from kcse.commands.main import main as kcse_main

    for name, write, problem in [
        ("corrupt.keras", lambda path: path.write_bytes(b"PK\x03\x04 cut short"),
         "not a valid Keras archive (File is not a zip file); a .keras file is a zip "
         "archive holding config.json"),
        ("other.keras", lambda path: zipfile.ZipFile(path, "w").close(),
         "not a valid Keras archive (no config.json in the zip archive); a .keras file "
         "is a zip archive holding config.json"),
    ]:
        path = tmp_path / name
        write(path)
        assert kcse_main(["export", "--model", str(path), "--output",
                         str(tmp_path / "served")]) == 2
        assert_error_line(capsys, "kcse export", f"--model {path}: {problem}")


@pytest.mark.parametrize("name", ["texts.jsonl", "pairs.data"])
def test_an_existing_file_that_is_no_model_is_not_called_missing(
        name, files, capsys, no_model_loads, monkeypatch):
    from kcse.commands.main import main as kcse_main

    for model in (str(files / name), name):  # A path, and a bare name in the folder.
        monkeypatch.chdir(files)
        assert kcse_main(["evaluate", "--model", model, "--data",
                         str(files / "pairs.data")]) == 2
        error = capsys.readouterr().err
        assert error.startswith(
            f"kcse evaluate: error: --model {model}: a file, but not a model; give a "
            ".keras file, a model folder, a model name (e5-small, BERT, "), error
        assert error.endswith(") or a keras-hub preset\n")


def test_a_read_only_file_system_is_called_so(tmp_path, files, monkeypatch, capsys):
    from kcse.commands.main import main as kcse_main

    target = tmp_path / "mounted"
    target.mkdir()
    real_statvfs, real_access = os.statvfs, os.access

    class ReadOnly:
        def __init__(self, real):
            self.real = real

        def __getattr__(self, name):
            value = getattr(self.real, name)
            return value | os.ST_RDONLY if name == "f_flag" else value

    monkeypatch.setattr(os, "statvfs", lambda path: (
        ReadOnly(real_statvfs(path)) if pathlib.Path(path) == target else real_statvfs(path)))
    # access(2) fails with EROFS there, whoever asks.
    monkeypatch.setattr(os, "access", lambda path, mode: (
        False if pathlib.Path(path) == target and mode & os.W_OK else real_access(path, mode)))
    for command, output in [("encode", target / "v.npy"), ("export", target / "served"),
                            ("train", target / "run")]:
        rest = ["--input", str(files / "texts.txt")] if command == "encode" else []
        assert kcse_main([command, "--model", "e5-small", *rest,
                         "--output", str(output)]) == 2
        assert_error_line(capsys, f"kcse {command}",
                          f"--output {output}: cannot write in {target} (read-only file system)")


def test_a_saved_encoder_keeps_its_pooling_and_takes_a_max_length(tmp_path, files, capsys):
    import keras_hub

    import kcse
    from kcse.commands.main import main as kcse_main

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30, num_layers=1, num_heads=1, hidden_dim=8,
        intermediate_dim=8, max_sequence_length=16)
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "你", "好"])
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(tokenizer, sequence_length=16)
    kcse.SentenceEncoder(backbone, preprocessor, pooling="cls").save(tmp_path / "e.keras")
    model = ["--model", str(tmp_path / "e.keras"), "--input", str(files / "texts.txt")]

    assert kcse_main(["encode", *model, "--pooling", "P3", "--output",
                     str(tmp_path / "v.npy")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("kcse encode: error: --pooling P3: ") and "'cls'" in error
    assert kcse_main(["encode", *model, "--max-length", "17", "--output",
                     str(tmp_path / "v.npy")]) == 2
    assert "--max-length 17: the model has position embeddings for 16 tokens" in (
        capsys.readouterr().err)
    # P1 is cls: the same pooling, accepted; a shorter length is applied.
    assert kcse_main(["encode", *model, "--pooling", "P1", "--max-length", "4",
                     "--output", str(tmp_path / "v.npy")]) == 0
    assert np.load(tmp_path / "v.npy").shape == (2, 8)


def test_an_unwritable_output_is_refused(tmp_path, files, monkeypatch, capsys):
    from kcse.commands.main import main as kcse_main

    target = tmp_path / "locked"
    target.mkdir()
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: (
        False if pathlib.Path(path) == target else real_access(path, mode)))
    assert kcse_main(["encode", "--model", "e5-small", "--input", str(files / "texts.txt"),
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
    from kcse.commands.main import main as kcse_main

    data = tmp_path / "few.data"
    data.write_text(content, encoding="utf-8")
    assert kcse_main(["evaluate", "--model", "e5-small", "--data", str(data)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"kcse evaluate: error: {data}: ") and message in error, error
