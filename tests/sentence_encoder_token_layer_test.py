"""`SentenceEncoder(token_layer=...)`: IS-BERT's CNN between the backbone and
the pooling, kept by every path that builds an encoder from another, by
`.keras` files and the ONNX Runtime cache, and refused by the folders that
cannot hold it."""

import keras
import numpy as np
import pytest

import kcse
from conftest import TINY_SENTENCES as SENTENCES
from conftest import tiny_bert
from conftest import tiny_preprocessor
from kcse.experiments import methods
from kcse.export.formats import UnsupportedExportError
from kcse.onnx_runtime import cache_key


def cnn_encoder(pooling="last_avg", seed=0):
    return kcse.SentenceEncoder(
        tiny_bert(), tiny_preprocessor(), pooling=pooling,
        token_layer=kcse.layers.TokenConvolution(filters=4, kernel_sizes=(1, 3), seed=seed))


def test_vectors_pool_the_layers_features_and_survive_a_keras_file(tmp_path):
    """Mean, max and [CLS] of the CNN's features of the last layer's states."""
    for pooling in ("last_avg", "max", "cls"):
        encoder = cnn_encoder(pooling)
        features = encoder.preprocessor(SENTENCES)
        states = encoder.hidden_states(features)["hidden_states"][-1]
        mask = np.asarray(features["padding_mask"])
        local = keras.ops.convert_to_numpy(encoder.token_layer(states * mask[..., None]))
        expected = {"last_avg": (local * mask[..., None]).sum(1) / mask.sum(1, keepdims=True),
                    "max": np.where(mask[..., None], local, -np.inf).max(1),
                    "cls": local[:, 0]}[pooling]
        vectors = encoder.encode(SENTENCES)
        assert vectors.shape == (len(SENTENCES), 8) and encoder.output_dim == 8
        np.testing.assert_allclose(vectors, expected, atol=1e-5)
    encoder.save(tmp_path / "cnn.keras")
    restored = keras.saving.load_model(tmp_path / "cnn.keras")
    assert restored.token_layer.kernel_sizes == (1, 3)
    np.testing.assert_allclose(restored.encode(SENTENCES), vectors, atol=1e-6)


def test_every_rebuilt_encoder_keeps_the_token_layer():
    """A training pooling (ConSERT), a head (the linear probe), a twin
    (Contrastive Tension): the same CNN, or a copy of it for the twin, and
    the prompts; supervised SimCSE's MLP cannot follow a token layer."""
    encoder = cnn_encoder()
    encoder.prompts = {"query": "q "}
    encoder.default_prompt_name = "query"
    trained = methods.ConSERTMethod(training_pooling="max").training_encoder(encoder)
    probed = methods.LinearProbeMethod().encoder_to_train(encoder, seed=0)
    for rebuilt in (trained, probed):
        assert rebuilt.token_layer is encoder.token_layer and rebuilt.backbone is encoder.backbone
        assert rebuilt.default_prompt == "q "
    assert trained.pooling == "max" and probed.output_dim == 8
    twin = kcse.ContrastiveTension(encoder).twin_encoder
    assert twin.token_layer is not encoder.token_layer
    features = encoder.preprocessor(SENTENCES)
    np.testing.assert_allclose(twin(features), encoder(features), atol=1e-6)
    with pytest.raises(ValueError, match="token_layer feeds a pooling"):
        methods.SupervisedSimCSEMethod(keep_mlp=True).encoder_to_train(cnn_encoder("cls"), 0)


def test_other_poolings_folders_and_a_changed_cnn_are_told_apart(tmp_path):
    with pytest.raises(ValueError, match="got pooling='first_last_avg'"):
        cnn_encoder("P4")
    encoder = cnn_encoder()
    for format in ("huggingface", "sentence_transformers"):
        with pytest.raises(UnsupportedExportError, match="export it as ONNX or a SavedModel"):
            encoder.export(tmp_path / format, format=format)
        assert not (tmp_path / format).exists()
    # The ONNX Runtime cache: another CNN is another model.
    plain = kcse.SentenceEncoder(encoder.backbone, encoder.preprocessor, pooling="last_avg")
    assert len({cache_key(encoder), cache_key(plain), cache_key(cnn_encoder(seed=1))}) == 3
