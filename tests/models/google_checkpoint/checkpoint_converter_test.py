import json
import os

import keras
import numpy as np
import pytest

import kcse
from checkpoints import TINY_CONFIG
from checkpoints import checkpoint_arrays
from checkpoints import SENTENCES
from checkpoints import VOCABULARY
from checkpoints import write_checkpoint
from checkpoints import torch_outputs
from checkpoints import write_family
from checkpoints import hf_config
from checkpoints import hugging_face_checkpoint
from tests.layer_checks import run_backbone_test

os.environ.setdefault("USE_TF", "0")  # transformers: the torch models only.
# The references: pinned in the dev extras, so a missing one fails (no skip).
import transformers  # noqa: E402


def keras_outputs(backbone, preprocessor):
    features = {
        key: np.asarray(value) for key, value in preprocessor(SENTENCES).items()
    }
    outputs = backbone.predict(features, verbose=0)
    return features, outputs


def assert_same_real_tokens(actual, expected, mask):
    # Padded positions are never pooled; compare the real tokens.
    np.testing.assert_allclose(actual[mask], expected[mask], atol=1e-4)


def hugging_face_bert(tmp_path, config):
    """HF's `BertModel` of `config`, holding the checkpoint's weights."""
    model = transformers.BertModel(hf_config(transformers.BertConfig, config))
    transformers.load_tf_weights_in_bert(
        model, model.config, hugging_face_checkpoint(tmp_path, "bert", config=config)
    )
    return model


# Measured on these tiny random checkpoints: kcse and HF with the same
# activation agree to ~2e-6; the exact and the tanh GELU give outputs
# 1.5e-3 apart (sequence_output; 4.3e-4 pooled), which a 1e-4 tolerance
# tells apart.
OTHER_GELU = {"gelu": "gelu_new", "gelu_new": "gelu"}


@pytest.mark.parametrize("hidden_act", ["gelu", "gelu_new"])
def test_bert_runs_the_activation_its_config_names(tmp_path, hidden_act):
    """Reference: Hugging Face transformers' `BertModel` built from the same
    bert_config.json (its `hidden_act` included) and filled by HF's own
    TF-checkpoint reader, `load_tf_weights_in_bert`: written independently
    of kcse and keras-hub. HF reads "gelu" as the exact erf GELU and
    "gelu_new" as the tanh approximation, as bert4keras (Su's runs) does.

    Before kcse honoured `hidden_act`, keras-hub's BERT ran the tanh GELU
    for both: 1.5e-3 from HF's "gelu" model (fails here), equal to the
    "gelu_new" one but with no `activation` in its config (fails here).
    """
    config = dict(TINY_CONFIG, hidden_act=hidden_act)
    folder = write_family(tmp_path, "bert", config=config)
    backbone, preprocessor = kcse.models.from_checkpoint(folder, "bert", 16)
    features, outputs = keras_outputs(backbone, preprocessor)
    model = hugging_face_bert(tmp_path, config)
    sequence, pooled, mask = torch_outputs(model, features)
    assert_same_real_tokens(outputs["sequence_output"], sequence, mask)
    np.testing.assert_allclose(outputs["pooled_output"], pooled.numpy(), atol=1e-4)
    assert isinstance(backbone, kcse.models.BertBackbone)
    assert backbone.get_config()["activation"] == hidden_act
    # The other GELU is far outside the tolerance on these weights.
    other = transformers.BertModel(
        hf_config(transformers.BertConfig, config, hidden_act=OTHER_GELU[hidden_act])
    )
    other.load_state_dict(model.state_dict())
    other_sequence, _, _ = torch_outputs(other, features)
    assert np.abs(other_sequence - sequence)[mask].max() > 1e-3


def test_the_activation_survives_a_keras_file(tmp_path):
    """A converted `gelu_new` BERT, saved in a SentenceEncoder's `.keras`
    file and loaded, still runs the tanh GELU. Reference: HF's `BertModel`
    with `hidden_act="gelu_new"` (as in the test above); a restored
    backbone that fell back to kcse's default (exact GELU) would be 1.5e-3
    away from it."""
    config = dict(TINY_CONFIG, hidden_act="gelu_new")
    folder = write_family(tmp_path, "bert", config=config)
    encoder = kcse.SentenceEncoder.from_checkpoint(
        folder, "bert", sequence_length=16, pooling="P3"
    )
    encoder.save(tmp_path / "encoder.keras")
    restored = keras.models.load_model(tmp_path / "encoder.keras")
    assert type(restored.backbone) is kcse.models.BertBackbone
    assert restored.backbone.get_config()["activation"] == "gelu_new"
    features, outputs = keras_outputs(restored.backbone, encoder.preprocessor)
    sequence, pooled, mask = torch_outputs(hugging_face_bert(tmp_path, config), features)
    assert_same_real_tokens(outputs["sequence_output"], sequence, mask)
    np.testing.assert_allclose(outputs["pooled_output"], pooled.numpy(), atol=1e-4)


@pytest.mark.parametrize("activation", ["gelu", "gelu_new"])
def test_bert_backbone_keeps_its_activation(activation):
    # get_config/from_config and a `.keras` file keep `activation`.
    rng = np.random.default_rng(0)
    inputs = {
        "token_ids": rng.integers(1, 20, size=(2, 8)).astype("int32"),
        "segment_ids": np.zeros((2, 8), "int32"),
        "padding_mask": np.ones((2, 8), "int32"),
    }
    backbone = run_backbone_test(
        kcse.models.BertBackbone,
        dict(vocabulary_size=20, num_layers=2, num_heads=2, hidden_dim=8,
             intermediate_dim=16, max_sequence_length=8, activation=activation),
        inputs,
        {"sequence_output": (2, 8, 8), "pooled_output": (2, 8)},
    )
    assert backbone.get_config()["activation"] == activation
    with pytest.raises(ValueError, match="hidden_act 'swish_x' is not one of"):
        kcse.models.BertBackbone(
            vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8,
            intermediate_dim=16, activation="swish_x")


def test_an_unknown_hidden_act_names_the_file_and_the_field(tmp_path):
    folder = write_family(tmp_path, "bert", config=dict(TINY_CONFIG, hidden_act="swish_x"))
    with pytest.raises(
        kcse.models.CheckpointError,
        match=r"bert/bert_config\.json: field hidden_act is 'swish_x'; kcse knows \['gelu'",
    ):
        kcse.models.from_checkpoint(folder, "bert")


@pytest.mark.parametrize("pooler", [True, False])
def test_roformer_matches_hugging_face(tmp_path, pooler):
    """Reference: Hugging Face transformers' `RoFormerModel`, loaded with
    HF's `load_tf_weights_in_roformer` (the reader HF wrote for Su's
    original RoFormer checkpoints): independent of kcse and keras-hub. It
    is RoFormer v1 as Su released it (bert4keras): queries and keys
    rotated pairwise (dims 2i, 2i+1) by sinusoidal angles of the position,
    values not rotated (`rotary_value=False`, the default), no absolute
    position embeddings. It runs TINY_CONFIG's `hidden_act` ("gelu", exact).
    """
    folder = write_family(tmp_path, "roformer", pooler=pooler)
    backbone, preprocessor = kcse.models.from_checkpoint(folder, "roformer", 16)
    assert isinstance(backbone, kcse.models.RoFormerBackbone)
    features, outputs = keras_outputs(backbone, preprocessor)
    model = transformers.RoFormerModel(
        hf_config(transformers.RoFormerConfig, embedding_size=8)
    )
    transformers.load_tf_weights_in_roformer(
        model, model.config, hugging_face_checkpoint(tmp_path, "roformer", pooler)
    )
    sequence, _, mask = torch_outputs(model, features)
    assert_same_real_tokens(outputs["sequence_output"], sequence, mask)
    if pooler:
        # RoFormer's HF model has no pooler: check BERT's pooler formula.
        arrays = checkpoint_arrays(TINY_CONFIG, position_embeddings=False)
        expected = np.tanh(
            sequence[:, 0] @ arrays["bert/pooler/dense/kernel"]
            + arrays["bert/pooler/dense/bias"]
        )
        np.testing.assert_allclose(outputs["pooled_output"], expected, atol=1e-4)
    else:
        assert "pooled_output" not in outputs
        with pytest.raises(ValueError, match="no 'pooled_dense'"):
            kcse.SentenceEncoder(backbone, preprocessor, pooling="P2")


def hugging_face_nezha(tmp_path, config, features):
    """Outputs of HF's `NezhaModel` of `config` holding the checkpoint's weights."""
    model = transformers.NezhaModel(hf_config(transformers.NezhaConfig, config))
    transformers.load_tf_weights_in_bert(
        model, model.config, hugging_face_checkpoint(tmp_path, "nezha", config=config)
    )
    return model, torch_outputs(model, features)


def test_nezha_matches_hugging_face(tmp_path):
    """Reference: Hugging Face transformers' `NezhaModel`
    (`transformers.models.deprecated.nezha`), HF's port of Huawei's NEZHA
    PyTorch code, filled by HF's TF-checkpoint reader
    `load_tf_weights_in_bert`. It shares no code with kcse or keras-hub: its
    relative positions (distance j - i clipped to ±max_relative_position,
    shifted by max_relative_position, looked up in a fixed sin/cos table,
    added to the attention logits and to its output) come from Huawei's
    implementation, not from kcse's indexing. It runs the config's
    `hidden_act` ("gelu", exact).
    """
    folder = write_family(tmp_path, "nezha")
    backbone, preprocessor = kcse.models.from_checkpoint(folder, "nezha", 16)
    assert isinstance(backbone, kcse.models.NezhaBackbone)
    features, outputs = keras_outputs(backbone, preprocessor)
    _, (sequence, pooled, mask) = hugging_face_nezha(tmp_path, TINY_CONFIG, features)
    assert_same_real_tokens(outputs["sequence_output"], sequence, mask)
    np.testing.assert_allclose(outputs["pooled_output"], pooled.numpy(), atol=1e-4)


def test_nezha_clips_relative_positions(tmp_path):
    """max_relative_position m = 2 (bert_config.json) is honoured.

    Reference: HF's `NezhaModel` with m = 2, independent of kcse (see
    `test_nezha_matches_hugging_face`). Clipping matters on these sentences
    (up to 8 tokens): the same HF model with m = 64 is 2.5 away (measured).
    """
    config = dict(TINY_CONFIG, max_relative_position=2)
    folder = write_family(tmp_path, "nezha", config=config)
    backbone, preprocessor = kcse.models.from_checkpoint(folder, "nezha", 16)
    features, outputs = keras_outputs(backbone, preprocessor)
    model, (sequence, _, mask) = hugging_face_nezha(tmp_path, config, features)
    assert model.config.max_relative_position == 2
    assert_same_real_tokens(outputs["sequence_output"], sequence, mask)
    unclipped = transformers.NezhaModel(hf_config(transformers.NezhaConfig, TINY_CONFIG))
    unclipped.load_state_dict(model.state_dict())
    assert unclipped.config.max_relative_position == 64
    unclipped_sequence, _, _ = torch_outputs(unclipped, features)
    assert np.abs(unclipped_sequence - sequence)[mask].max() > 0.1
    assert np.abs(outputs["sequence_output"] - unclipped_sequence)[mask].max() > 0.1


def test_missing_unknown_and_misshaped_variables_are_listed_together(tmp_path):
    arrays = checkpoint_arrays(TINY_CONFIG)
    del arrays["bert/encoder/layer_1/attention/self/key/bias"]
    arrays["bert/encoder/layer_0/output/dense/kernel"] = np.zeros((3, 3), "float32")
    arrays["bert/encoder/layer_0/attention/self/rotation"] = np.zeros(2, "float32")
    folder = write_checkpoint(tmp_path / "broken", arrays, TINY_CONFIG, VOCABULARY)
    with pytest.raises(kcse.models.CheckpointError) as error:
        kcse.models.from_checkpoint(folder, "bert")
    message = str(error.value)
    assert "missing variables (1):\n  bert/encoder/layer_1/attention/self/key/bias" in message
    assert "unknown variables (1):\n  bert/encoder/layer_0/attention/self/rotation" in message
    assert (
        "bert/encoder/layer_0/output/dense/kernel: checkpoint [3, 3], model [16, 8]"
        in message
    )


def test_a_checkpoint_of_another_size_names_the_mismatch(tmp_path):
    arrays = checkpoint_arrays(dict(TINY_CONFIG, num_hidden_layers=3))
    folder = write_checkpoint(tmp_path / "deeper", arrays, TINY_CONFIG, VOCABULARY)
    with pytest.raises(kcse.models.CheckpointError, match="layer_2"):
        kcse.models.from_checkpoint(folder, "bert")


def test_bad_folders_and_families(tmp_path):
    with pytest.raises(ValueError, match="family must be one of"):
        kcse.models.from_checkpoint(tmp_path, "gpt")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        kcse.models.from_checkpoint(tmp_path / "nowhere", "bert")
    with pytest.raises(FileNotFoundError, match="bert_config.json"):
        kcse.models.from_checkpoint(tmp_path, "bert")
    (tmp_path / "bert_config.json").write_text(json.dumps(TINY_CONFIG))
    with pytest.raises(FileNotFoundError, match=r"\*\.ckpt\.index"):
        kcse.models.from_checkpoint(tmp_path, "bert")
    folder = write_family(tmp_path, "bert")
    (folder / "bert_config.json").write_text('{"vocab_size": 40}')
    with pytest.raises(kcse.models.CheckpointError, match="bert_config.json lacks.*hidden_size"):
        kcse.models.from_checkpoint(folder, "bert")


@pytest.mark.parametrize("family", ["roberta", "simbert"])
def test_bert_architecture_families_load_like_bert(tmp_path, family):
    folder = write_family(tmp_path, family)
    backbone, preprocessor = kcse.models.from_checkpoint(folder, family, 16)
    reference, _ = kcse.models.from_checkpoint(folder, "bert", 16)
    _, outputs = keras_outputs(backbone, preprocessor)
    _, expected = keras_outputs(reference, preprocessor)
    np.testing.assert_allclose(
        outputs["sequence_output"], expected["sequence_output"], atol=1e-6
    )


@pytest.mark.parametrize("family", ["bert", "nezha", "roformer"])
def test_every_pooling_and_keras_round_trip(tmp_path, family):
    folder = write_family(tmp_path, family, pooler=family != "roformer")
    poolings = ["P1", "P3", "P4", "last2avg", "max"]
    if family != "roformer":
        poolings.append("P2")
    for pooling in poolings:
        encoder = kcse.SentenceEncoder.from_checkpoint(
            folder, family, sequence_length=16, pooling=pooling
        )
        vectors = encoder.encode(SENTENCES)
        assert vectors.shape == (4, 8) and np.all(np.isfinite(vectors))
    encoder.save(tmp_path / "encoder.keras")
    restored = keras.models.load_model(tmp_path / "encoder.keras")
    assert type(restored.backbone) is type(encoder.backbone)
    np.testing.assert_array_equal(restored.encode(SENTENCES), vectors)


def test_wobert_has_no_pooler_and_segments_words_with_jieba(tmp_path):
    folder = write_family(tmp_path, "wobert", pooler=False)
    backbone, preprocessor = kcse.models.from_checkpoint(folder, "wobert", 16)
    assert isinstance(preprocessor.tokenizer, kcse.models.JiebaWordPieceTokenizer)
    with pytest.raises(ValueError, match="pooler is all zeros"):
        kcse.SentenceEncoder(backbone, preprocessor, pooling="P2")
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="P4")
    vectors = encoder.encode(SENTENCES)
    encoder.save(tmp_path / "wobert.keras")
    restored = keras.models.load_model(tmp_path / "wobert.keras")
    assert isinstance(
        restored.preprocessor.tokenizer, kcse.models.JiebaWordPieceTokenizer
    )
    np.testing.assert_array_equal(restored.encode(SENTENCES), vectors)
    with pytest.raises(ValueError, match="pooler is all zeros"):
        kcse.SentenceEncoder(restored.backbone, pooling="P2")
