"""Messages name the true cause: the file, line and field read wrongly (issue 42, item 6).

A model folder whose config is not JSON is named with the file, the line and
the column, before the model loads (never as a flag the user did not give);
`kcse export --prefix` records in the SavedModel the prefix it prints,
keeping the encoder's own prompts. Pair files' lines: tests/data/sentence_pairs_test.py.
"""

import shutil

import keras_hub
import pytest

import kcse
from checkpoints import write_family
from kcse.commands.main import SUBCOMMANDS
from kcse.commands.main import main as kcse_main

NOT_JSON = '{"vocab_size": 40,\n  hidden_size: 8}\n'
WHY = "not JSON (Expecting property name enclosed in double quotes at line 2, column 3)"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_family(tmp_path_factory.mktemp("checkpoint"), "bert")


@pytest.fixture
def texts(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("你好\n", encoding="utf-8")
    return path


@pytest.fixture
def no_model_loads(monkeypatch):
    from kcse.models import model_sources

    monkeypatch.setattr(model_sources, "load_model",
                        lambda *args, **kwargs: pytest.fail("a model was loaded"))
    for subcommand in SUBCOMMANDS:
        monkeypatch.setattr(subcommand, "start_keras", lambda *args: pytest.fail("TF started"))


@pytest.mark.parametrize("pooling", [[], ["--pooling", "wk"], ["--pooling", "P2"]])
@pytest.mark.parametrize("layout", ["checkpoint", "checkpoint:bert", "huggingface",
                                    "keras_hub"])
def test_a_model_config_that_is_not_json_is_named_before_the_model_loads(
        layout, pooling, checkpoint, texts, tmp_path, capsys, no_model_loads):
    folder = tmp_path / "model"
    if layout.startswith("checkpoint"):
        shutil.copytree(checkpoint, folder)
        config, model = folder / "bert_config.json", str(folder) + layout[10:]
    else:
        folder.mkdir()
        config, model = folder / "config.json", str(folder)
    config.write_text(NOT_JSON if layout != "keras_hub" else
                      '{"class_name": "BertBackbone", "config": {,}}', encoding="utf-8")
    why = WHY if layout != "keras_hub" else (
        "not JSON (Expecting property name enclosed in double quotes at line 1, column 43)")
    assert kcse_main(["encode", "--model", model, *pooling, "--input", str(texts),
                     "--output", str(tmp_path / "v.npy")]) == 2
    # A checkpoint folder is named as given, then its file; a preset or Hugging
    # Face folder by the file read (`model_sources.check_model`).
    named = f"{model}: {config}" if layout.startswith("checkpoint") else config
    assert capsys.readouterr().err == f"kcse encode: error: --model {named}: {why}\n"


@pytest.mark.parametrize("content, why", [
    ("[1, 2]", "not a JSON object (a list)"),
    (b"\xff\xfe{}", "cannot be read ('utf-8' codec can't decode byte 0xff in position 0: "
                    "invalid start byte)"),
])
def test_a_model_config_that_is_no_object_is_named(content, why, checkpoint, texts, tmp_path,
                                                   capsys, no_model_loads):
    folder = tmp_path / "model"
    shutil.copytree(checkpoint, folder)
    config = folder / "bert_config.json"
    if isinstance(content, bytes):
        config.write_bytes(content)
    else:
        config.write_text(content, encoding="utf-8")
    assert kcse_main(["evaluate", "--model", f"{folder}:bert", "--data", str(texts)]) == 2
    assert capsys.readouterr().err == (
        f"kcse evaluate: error: --model {folder}:bert: {config}: {why}\n")


def test_export_records_the_prefix_it_prints_and_keeps_the_encoders_prompts(tmp_path, capsys):
    # The encoder has "query" and "prefix" prompts of its own: --prefix of
    # another text is a new prompt under a free name; the SavedModel's
    # default_prompt() is the text printed, its prompts() the encoder's and it.
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (the strings signature's ops)

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30, num_layers=1, num_heads=1, hidden_dim=8, intermediate_dim=8,
        max_sequence_length=16)
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "你", "好"])
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(tokenizer, sequence_length=16)
    own = {"query": "问：", "prefix": "前：", "document": "文："}
    kcse.SentenceEncoder(backbone, preprocessor, prompts=own,
                         default_prompt_name="query").save(tmp_path / "e.keras")
    assert kcse_main(["export", "--model", str(tmp_path / "e.keras"), "--prefix", "答：",
                     "--output", str(tmp_path / "served")]) == 0
    out = capsys.readouterr().out
    assert "clients prepend '答：' to sentences (default_prompt())" in out
    served = tf.saved_model.load(str(tmp_path / "served"))
    assert served.default_prompt().numpy().decode() == "答："
    assert {name: text.numpy().decode() for name, text in served.prompts().items()} == (
        own | {"prefix_2": "答："})
