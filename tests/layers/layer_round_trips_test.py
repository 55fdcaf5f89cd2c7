"""Every public layer through `run_layer_test`: shapes, config, `.keras`."""

import keras_hub
import numpy as np
import pytest

import kcse
from kcse.foundation import compat
from kcse.layers import AdversarialPerturbation
from kcse.layers import EmbeddingDropout
from kcse.layers import FeatureCutoff
from kcse.layers import NLIClassifier
from kcse.layers import SentencePooling
from kcse.layers import SpanCutoff
from kcse.layers import TokenConvolution
from kcse.layers import TokenCutoff
from kcse.layers import TokenShuffle
from kcse.layers import Whitening
from kcse.layers import WKPooling
from kcse.models.relative_position import RelativePositionAttention
from kcse.models.relative_position import RelativeTransformerEncoder
from sbert_wk_reference import dissecting
from tests.layer_checks import run_layer_test

BATCH, LENGTH, DIM = 2, 6, 8
MASK = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], "int32")


def floats(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def test_every_public_layer_is_covered():
    # BertFlow, a keras.Model, has its round trips in bert_flow_test.py.
    covered = {
        "SentencePooling", "WKPooling", "Whitening", "BertFlow", "TokenShuffle", "TokenCutoff",
        "FeatureCutoff", "SpanCutoff", "EmbeddingDropout",
        "AdversarialPerturbation", "NLIClassifier", "TokenConvolution",
    }
    assert set(kcse.layers.__all__) == covered


def masked_mean(states):
    mask = MASK[..., None].astype("float32")
    return (states * mask).sum(axis=1) / mask.sum(axis=1)


@pytest.mark.parametrize(
    "mode, reference",
    [
        ("cls", lambda s: s[-1][:, 0]),
        ("P3", lambda s: masked_mean(s[-1])),
        ("P4", lambda s: (masked_mean(s[1]) + masked_mean(s[-1])) / 2),
        ("last2avg", lambda s: (masked_mean(s[-2]) + masked_mean(s[-1])) / 2),
        ("max", lambda s: np.where(MASK[..., None] == 1, s[-1], -np.inf).max(axis=1)),
    ],
)
def test_sentence_pooling(mode, reference):
    states = [floats(BATCH, LENGTH, DIM, seed=i) for i in range(4)]
    data = {"hidden_states": states, "padding_mask": MASK}
    layer = run_layer_test(SentencePooling, {"mode": mode}, data, (BATCH, DIM))
    # Aliases are stored resolved, so the config round trip is stable.
    assert layer.get_config()["mode"] == kcse.layers.sentence_pooling.resolve_pooling(mode)
    np.testing.assert_allclose(layer(states, MASK), reference(states), atol=1e-6)


def test_wk_pooling():
    """Reference: SBERT-WK's `dissecting` (BinWang28/SBERT-WK-Sentence-
    Embedding, utils.py) transcribed in tests/sbert_wk_reference.py."""
    states = [floats(BATCH, LENGTH, DIM, seed=i) for i in range(8)]
    data = {"hidden_states": states, "padding_mask": MASK}
    layer = run_layer_test(WKPooling, {"layer_start": 2, "context_window": 2},
                           data, (BATCH, DIM))
    expected = dissecting(np.stack(states, axis=1), MASK, layer_start=2)
    np.testing.assert_allclose(layer(states, MASK), expected, atol=1e-5)


@pytest.mark.parametrize("n_components", [None, 4])
def test_whitening_keeps_its_adapted_statistics(n_components):
    vectors = floats(200, DIM, seed=1) @ floats(DIM, DIM, seed=2) + 3.0
    data = floats(5, DIM, seed=3)
    layer = run_layer_test(
        Whitening,
        {"n_components": n_components},
        data,
        (5, n_components or DIM),
        setup=lambda layer: layer.adapt(vectors),
    )
    # The round trips above compared outputs of the adapted (not initial) weights.
    np.testing.assert_allclose(layer.mean, vectors.mean(axis=0), atol=1e-5)
    whitened = np.asarray(layer(vectors))
    covariance = np.cov(whitened, rowvar=False)
    np.testing.assert_allclose(covariance, np.eye(n_components or DIM), atol=1e-4)


@pytest.mark.parametrize("training", [False, True])
def test_token_shuffle(training):
    layer = run_layer_test(
        TokenShuffle, {"seed": 3}, {"padding_mask": MASK}, (BATCH, LENGTH),
        training=training,
    )
    positions = np.asarray(layer(MASK, training=training))
    if training:  # a permutation of the real slots; padding keeps its own
        assert sorted(positions[0, :4]) == [0, 1, 2, 3]
        assert list(positions[0, 4:]) == [4, 5]
        assert sorted(positions[1]) == list(range(LENGTH))
    else:  # documented: 0..length-1 when not training
        np.testing.assert_array_equal(positions, np.tile(np.arange(LENGTH), (BATCH, 1)))


@pytest.mark.parametrize(
    "layer_class", [TokenCutoff, FeatureCutoff, SpanCutoff, EmbeddingDropout]
)
@pytest.mark.parametrize("training", [False, True])
def test_embedding_augmentations(layer_class, training):
    embeddings = floats(BATCH, LENGTH, DIM) + 5.0  # no zero by chance
    data = {"embeddings": embeddings, "padding_mask": MASK}
    layer = run_layer_test(
        layer_class, {"rate": 0.5, "seed": 7}, data,
        ((BATCH, LENGTH, DIM), (BATCH, LENGTH)), training=training,
    )
    outputs, mask = (np.asarray(x) for x in layer(embeddings, MASK, training=training))
    if not training:  # documented: the identity when not training
        np.testing.assert_array_equal(outputs, embeddings)
        np.testing.assert_array_equal(mask, MASK)
    else:  # something real was cut, padding untouched
        assert (outputs[MASK == 1] == 0).any()
        np.testing.assert_array_equal(outputs[MASK == 0], embeddings[MASK == 0])


@pytest.mark.parametrize("training", [False, True])
def test_adversarial_perturbation(training):
    # Deterministic even in training: the noise is ε · g / ‖g‖ per real token.
    embeddings, gradient = floats(BATCH, LENGTH, DIM), floats(BATCH, LENGTH, DIM, seed=1)
    data = {"embeddings": embeddings, "padding_mask": MASK, "gradient": gradient}
    layer = run_layer_test(
        AdversarialPerturbation, {"noise_norm": 0.5}, data,
        ((BATCH, LENGTH, DIM), (BATCH, LENGTH)), training=training, deterministic=True,
    )
    outputs, _ = layer(embeddings, MASK, gradient=gradient, training=training)
    noise = np.linalg.norm(np.asarray(outputs) - embeddings, axis=-1)
    np.testing.assert_allclose(noise, 0.5 * MASK if training else 0 * MASK, atol=1e-5)


def test_nli_classifier_is_dense_on_concat_and_abs_difference():
    first, second = floats(4, DIM), floats(4, DIM, seed=1)
    layer = run_layer_test(
        NLIClassifier, {"num_classes": 3}, {"first": first, "second": second}, (4, 3)
    )
    kernel, bias = layer.get_weights()
    features = np.concatenate([first, second, np.abs(first - second)], axis=-1)
    np.testing.assert_allclose(layer(first, second), features @ kernel + bias, atol=1e-5)


def test_token_convolution_concatenates_same_length_convolutions():
    """Each width's Conv1D ("same": the sequence's length), in order; the
    authors' code is the reference in tests/losses/mutual_information_loss_test.py."""
    states = floats(BATCH, LENGTH, DIM)
    layer = run_layer_test(TokenConvolution, {"filters": 4, "kernel_sizes": (1, 3)}, states,
                           (BATCH, LENGTH, 8))
    width_one = layer.convolutions[0].get_weights()
    np.testing.assert_allclose(np.asarray(layer(states))[..., :4],
                               states @ width_one[0][0] + width_one[1], atol=1e-5)


@pytest.mark.parametrize("position_encoding", ["relative", "rotary"])
def test_relative_position_attention(position_encoding):
    x = floats(BATCH, LENGTH, DIM)
    attention_mask = (MASK[:, None, :] * np.ones((1, LENGTH, 1), "int32")).astype(bool)
    layer = run_layer_test(
        RelativePositionAttention,
        {"num_heads": 2, "key_dim": 4, "position_encoding": position_encoding,
         "max_relative_position": 3},  # < LENGTH: clipping is exercised
        {"query": x, "value": x, "attention_mask": attention_mask},
        (BATCH, LENGTH, DIM),
    )
    # Documented: positions add no weights to MultiHeadAttention's.
    assert len(layer.trainable_weights) == 8 and not layer.non_trainable_weights


@pytest.mark.parametrize("position_encoding", ["relative", "rotary"])
def test_relative_transformer_encoder(position_encoding):
    data = {"inputs": floats(BATCH, LENGTH, DIM), "padding_mask": MASK}
    layer = run_layer_test(
        RelativeTransformerEncoder,
        {"intermediate_dim": 16, "num_heads": 2, "position_encoding": position_encoding,
         "max_relative_position": 3},
        data,
        (BATCH, LENGTH, DIM),
    )
    attention = compat.transformer_block_parts(layer)["attention"]
    assert isinstance(attention, RelativePositionAttention)
    assert attention.position_encoding == position_encoding
    # The swapped attention replaces keras-hub's: the same weight names and
    # shapes (checkpoints map as for BERT), none left over (order differs).
    plain = keras_hub.layers.TransformerEncoder(intermediate_dim=16, num_heads=2)
    plain.build((BATCH, LENGTH, DIM))

    def named_shapes(block):
        return sorted((w.path.split("/", 1)[1], tuple(w.shape)) for w in block.weights)

    assert named_shapes(layer) == named_shapes(plain)
