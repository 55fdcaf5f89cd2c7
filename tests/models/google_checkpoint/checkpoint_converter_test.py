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
from checkpoints import write_family

os.environ.setdefault("USE_TF", "0")  # transformers: the torch models only.
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")



def hugging_face_checkpoint(tmp_path, family, pooler=True):
    """The same weights without pre-training heads, which HF's loaders need
    model classes for."""
    arrays = checkpoint_arrays(
        TINY_CONFIG,
        position_embeddings=family not in ("nezha", "roformer"),
        pooler=pooler,
    )
    arrays = {k: v for k, v in arrays.items() if k.startswith("bert/")}
    if family == "roformer":  # HF's RoFormerModel has no pooler.
        arrays = {k: v for k, v in arrays.items() if "pooler" not in k}
    folder = write_checkpoint(tmp_path / "hf", arrays, TINY_CONFIG, VOCABULARY)
    return str(folder / "bert_model.ckpt")


def keras_outputs(backbone, preprocessor):
    features = {
        key: np.asarray(value) for key, value in preprocessor(SENTENCES).items()
    }
    outputs = backbone.predict(features, verbose=0)
    return features, outputs


def torch_outputs(model, features):
    model.eval()
    with torch.no_grad():
        output = model(
            input_ids=torch.tensor(features["token_ids"], dtype=torch.long),
            token_type_ids=torch.tensor(features["segment_ids"], dtype=torch.long),
            attention_mask=torch.tensor(features["padding_mask"], dtype=torch.long),
        )
    mask = features["padding_mask"].astype(bool)
    return output.last_hidden_state.numpy(), output.get("pooler_output"), mask


def assert_same_real_tokens(actual, expected, mask):
    # Padded positions are never pooled; compare the real tokens.
    np.testing.assert_allclose(actual[mask], expected[mask], atol=1e-4)


def hf_config(config_class, **extra):
    config = dict(TINY_CONFIG, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    config.update(extra)
    return config_class(**config)


def test_bert_matches_hugging_face(tmp_path):
    folder = write_family(tmp_path, "bert")
    backbone, preprocessor = kcse.models.from_checkpoint(folder, "bert", 16)
    features, outputs = keras_outputs(backbone, preprocessor)
    # keras-hub's BERT uses the tanh GELU of Google's original code.
    model = transformers.BertModel(
        hf_config(transformers.BertConfig, hidden_act="gelu_new")
    )
    transformers.load_tf_weights_in_bert(
        model, model.config, hugging_face_checkpoint(tmp_path, "bert")
    )
    sequence, pooled, mask = torch_outputs(model, features)
    assert_same_real_tokens(outputs["sequence_output"], sequence, mask)
    np.testing.assert_allclose(outputs["pooled_output"], pooled.numpy(), atol=1e-4)


@pytest.mark.parametrize("pooler", [True, False])
def test_roformer_matches_hugging_face(tmp_path, pooler):
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


def nezha_reference(arrays, features, max_relative_position=64):
    """NEZHA forward pass in numpy, written from the paper (float64)."""
    token_ids, mask = features["token_ids"], features["padding_mask"].astype(bool)
    hidden = TINY_CONFIG["hidden_size"]
    heads = TINY_CONFIG["num_attention_heads"]
    depth = hidden // heads

    def layer_norm(x, name):
        mean = x.mean(-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(variance + 1e-12) * arrays[
            f"{name}/gamma"
        ] + arrays[f"{name}/beta"]

    def dense(x, name):
        return x @ arrays[f"{name}/kernel"] + arrays[f"{name}/bias"]

    def gelu(x):
        from scipy.special import erf

        return 0.5 * x * (1 + erf(x / np.sqrt(2)))

    # Relative position embeddings: a sinusoid of the clipped distance j - i.
    length = token_ids.shape[1]
    table = np.zeros((2 * max_relative_position + 1, depth))
    for position in range(table.shape[0]):
        for i in range(depth // 2):
            angle = position / 10000 ** (2 * i / depth)
            table[position, 2 * i] = np.sin(angle)
            table[position, 2 * i + 1] = np.cos(angle)
    distance = np.arange(length)[None, :] - np.arange(length)[:, None]
    relative = table[
        np.clip(distance, -max_relative_position, max_relative_position)
        + max_relative_position
    ]

    x = arrays["bert/embeddings/word_embeddings"][token_ids] + arrays[
        "bert/embeddings/token_type_embeddings"
    ][features["segment_ids"]]
    x = layer_norm(x.astype("float64"), "bert/embeddings/LayerNorm")
    for i in range(TINY_CONFIG["num_hidden_layers"]):
        name = f"bert/encoder/layer_{i}"

        def split(t):
            return t.reshape(t.shape[0], length, heads, depth)

        q = split(dense(x, f"{name}/attention/self/query"))
        k = split(dense(x, f"{name}/attention/self/key"))
        v = split(dense(x, f"{name}/attention/self/value"))
        logits = np.einsum("bihd,bjhd->bhij", q, k) + np.einsum(
            "bihd,ijd->bhij", q, relative
        )
        logits = logits / np.sqrt(depth) + np.where(mask, 0, -1e9)[:, None, None, :]
        weights = np.exp(logits - logits.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        context = np.einsum("bhij,bjhd->bihd", weights, v) + np.einsum(
            "bhij,ijd->bihd", weights, relative
        )
        attention = dense(context.reshape(x.shape), f"{name}/attention/output/dense")
        x = layer_norm(x + attention, f"{name}/attention/output/LayerNorm")
        inner = gelu(dense(x, f"{name}/intermediate/dense"))
        x = layer_norm(x + dense(inner, f"{name}/output/dense"), f"{name}/output/LayerNorm")
    pooled = np.tanh(dense(x[:, 0], "bert/pooler/dense"))
    return x, pooled, mask


def test_nezha_matches_a_numpy_implementation_of_the_paper(tmp_path):
    folder = write_family(tmp_path, "nezha")
    backbone, preprocessor = kcse.models.from_checkpoint(folder, "nezha", 16)
    assert isinstance(backbone, kcse.models.NezhaBackbone)
    features, outputs = keras_outputs(backbone, preprocessor)
    arrays = checkpoint_arrays(TINY_CONFIG, position_embeddings=False)
    sequence, pooled, mask = nezha_reference(arrays, features)
    assert_same_real_tokens(outputs["sequence_output"], sequence, mask)
    np.testing.assert_allclose(outputs["pooled_output"], pooled, atol=1e-4)


def test_nezha_clips_relative_positions(tmp_path):
    # With m = 2 the reference and kcse both clip beyond distance 2.
    config = dict(TINY_CONFIG, max_relative_position=2)
    folder = write_family(tmp_path, "nezha", config=config)
    backbone, preprocessor = kcse.models.from_checkpoint(folder, "nezha", 16)
    features, outputs = keras_outputs(backbone, preprocessor)
    arrays = checkpoint_arrays(config, position_embeddings=False)
    sequence, _, mask = nezha_reference(arrays, features, max_relative_position=2)
    assert_same_real_tokens(outputs["sequence_output"], sequence, mask)
    unclipped, _, _ = nezha_reference(arrays, features)
    assert np.abs(unclipped - sequence)[mask].max() > 1e-3


def test_nezha_matches_hugging_face_when_installed(tmp_path):
    if not hasattr(transformers, "NezhaModel"):
        pytest.skip("this transformers release has no NezhaModel")
    folder = write_family(tmp_path, "nezha")
    backbone, preprocessor = kcse.models.from_checkpoint(folder, "nezha", 16)
    features, outputs = keras_outputs(backbone, preprocessor)
    model = transformers.NezhaModel(hf_config(transformers.NezhaConfig))
    transformers.load_tf_weights_in_bert(
        model, model.config, hugging_face_checkpoint(tmp_path, "nezha")
    )
    sequence, pooled, mask = torch_outputs(model, features)
    assert_same_real_tokens(outputs["sequence_output"], sequence, mask)
    np.testing.assert_allclose(outputs["pooled_output"], pooled.numpy(), atol=1e-4)


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
