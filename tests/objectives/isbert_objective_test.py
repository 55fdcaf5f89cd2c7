"""`kcse.ISBERT` against yanzhangnlp/IS-BERT's code (tests/isbert_reference.py:
`CNN.forward`, `Pooling`'s mean and `MutualInformationLoss.forward`,
transcribed in torch), on the token-id path through `fit`."""

import keras
import numpy as np
import pytest

import isbert_reference
import kcse
from conftest import TINY_SENTENCES as SENTENCES
from conftest import assert_mirrored_step_equals_single_step
from conftest import one_step
from conftest import tiny_bert
from conftest import tiny_preprocessor

pytestmark = pytest.mark.usefixtures("unoptimised_tensorflow_graphs")


def isbert_encoder(seed=0, dropout=0.0):
    return kcse.SentenceEncoder(
        tiny_bert(seed, dropout=dropout), tiny_preprocessor(), pooling="last_avg",
        token_layer=kcse.layers.TokenConvolution(filters=4, seed=seed))


def make_isbert(weights):
    model = kcse.ISBERT(isbert_encoder())
    if weights is not None:
        model.encoder.set_weights(weights)
    model.compile(optimizer=keras.optimizers.SGD(0.05))
    return model


def authors_features(encoder, sentences):
    """The CNN features and mask of `sentences` as the authors' code makes
    them from kcse's last-layer states, each sentence alone."""
    features = encoder.preprocessor(sentences)
    states = encoder.hidden_states(features)["hidden_states"][-1]
    convolutions = [isbert_reference.conv_weights(*c.get_weights())
                    for c in encoder.token_layer.convolutions]
    mask = np.asarray(features["padding_mask"])
    return isbert_reference.isbert_features_alone(states, mask, convolutions), mask


def test_fit_loss_and_vectors_are_the_authors():
    """The first step's loss is MutualInformationLoss.forward of the CNN's
    features and their mean before the step (rel 1e-5); `encode` gives
    Pooling's mean of the features (1e-5), and the step moves the CNN."""
    model = make_isbert(None)
    local, mask = authors_features(model.encoder, SENTENCES)
    vectors = isbert_reference.isbert_mean(local, mask)
    np.testing.assert_allclose(model.encoder.encode(SENTENCES), vectors.numpy(), atol=1e-5)
    expected = isbert_reference.isbert_loss(local, vectors, mask)
    cnn_before = [w.copy() for w in model.encoder.token_layer.get_weights()]
    loss, _ = one_step(model, SENTENCES)
    assert loss == pytest.approx(expected, rel=1e-5)
    assert max(np.abs(a - b).max() for a, b in
               zip(model.encoder.token_layer.get_weights(), cnn_before)) > 1e-6


def test_a_vector_does_not_depend_on_its_batchs_padding():
    """Each sentence alone and in a batch with longer ones: the same vector
    (the [PAD] states are zeros to the CNN). The authors' CNN reads them: on
    the same padded batch, their features differ."""
    encoder = isbert_encoder()
    alone = np.stack([encoder.encode([s])[0] for s in SENTENCES])
    np.testing.assert_allclose(encoder.encode(SENTENCES, batch_size=8), alone, atol=1e-6)
    features = encoder.preprocessor(SENTENCES)
    states = encoder.hidden_states(features)["hidden_states"][-1]
    convolutions = [isbert_reference.conv_weights(*c.get_weights())
                    for c in encoder.token_layer.convolutions]
    theirs = isbert_reference.isbert_mean(
        isbert_reference.isbert_cnn(states, convolutions), features["padding_mask"])
    assert np.abs(theirs.numpy() - alone).max() > 1e-4


def test_mirrored_step_equals_single_step(two_cpu_strategy):
    """Two replicas, each its half: the gathered loss and step are one device's."""
    assert_mirrored_step_equals_single_step(make_isbert, two_cpu_strategy, SENTENCES)


def test_config_round_trips_and_bad_encoders_are_refused():
    model = kcse.ISBERT(isbert_encoder())
    restored = kcse.ISBERT.from_config(model.get_config())
    assert isinstance(restored.encoder.token_layer, kcse.layers.TokenConvolution)
    np.testing.assert_allclose(  # The same draw: the CNN's seed is in its config.
        restored.encoder.token_layer.get_weights()[0], model.encoder.token_layer.get_weights()[0])
    plain = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    with pytest.raises(ValueError, match="token_layer=kcse.layers.TokenConvolution"):
        kcse.ISBERT(plain)
    with pytest.raises(ValueError, match="pooling last_avg, not max"):
        kcse.ISBERT(isbert_encoder().with_changes(pooling="max"))
    with pytest.raises(ValueError, match="without whitening or normalize"):
        kcse.ISBERT(isbert_encoder().with_changes(normalize=True))
