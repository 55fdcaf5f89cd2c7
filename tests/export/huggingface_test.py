"""A backbone as a transformers folder: names, weights, hidden states, refusals.

References: transformers' own reader of Google-format checkpoints
(`load_tf_weights_in_bert`) for the parameter names and values, and its
`BertModel` / `NezhaModel` (loaded by `AutoModel` from the folder) for the
hidden states. Neither shares code with kcse or keras-hub.
"""

import json

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

MODEL_CLASSES = {"bert": transformers.BertModel, "nezha": transformers.NezhaModel}
CONFIG_CLASSES = {"bert": transformers.BertConfig, "nezha": transformers.NezhaConfig}
# Hidden states of the tiny random models (weights ~N(0, 0.5)), float32.
HIDDEN_STATE_TOLERANCE = 1e-5


def exported(tmp_path, family, sequence_length=32):
    folder = write_family(tmp_path, family)
    encoder = kcse.SentenceEncoder.from_checkpoint(folder, family, sequence_length, pooling="P1")
    return encoder, kcse.export.export_huggingface(encoder, tmp_path / f"{family}-hf")


@pytest.mark.parametrize("family", ["bert", "nezha"])
def test_weights_are_named_and_valued_as_transformers_reads_the_checkpoint(tmp_path, family):
    _, folder = exported(tmp_path, family)
    from safetensors.numpy import load_file

    ours = load_file(folder / "model.safetensors")
    reference = MODEL_CLASSES[family](hf_config(CONFIG_CLASSES[family]))
    transformers.load_tf_weights_in_bert(
        reference, reference.config, hugging_face_checkpoint(tmp_path, family))
    theirs = {name: value.numpy() for name, value in reference.state_dict().items()
              if not name.endswith("position_ids")}
    if family == "nezha":  # A buffer HF computes from the config, not a weight.
        theirs = {n: v for n, v in theirs.items() if "relative_positions_encoding" not in n}
    assert sorted(ours) == sorted(theirs)
    for name, value in theirs.items():
        np.testing.assert_array_equal(ours[name], value, err_msg=name)


@pytest.mark.parametrize("family", ["bert", "nezha"])
def test_auto_model_gives_kcse_hidden_states_on_chinese_stsb(tmp_path, family):
    encoder, folder = exported(tmp_path, family)
    model = transformers.AutoModel.from_pretrained(folder)
    assert type(model) is MODEL_CLASSES[family]
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


@pytest.mark.parametrize("family,reason", [("roformer", "not exported to Hugging Face yet"),
                                           ("wobert", "jieba")])
def test_unsupported_families_are_refused_before_writing(tmp_path, family, reason):
    folder = write_family(tmp_path, family, pooler=False)
    encoder = kcse.SentenceEncoder.from_checkpoint(folder, family, 16, pooling="P3")
    with pytest.raises(UnsupportedExportError, match=reason):
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
    (folder / "mine.txt").write_text("kept?")
    kcse.export.export_huggingface(encoder, folder, overwrite=True)
    assert sorted(path.name for path in folder.iterdir()) == sorted(before)
