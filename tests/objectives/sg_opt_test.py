import keras
import numpy as np
import pytest

import kcse
from kcse.models.layer_taps import embedding_layers
from conftest import TINY_SENTENCES as SENTENCES
from conftest import assert_mirrored_step_equals_single_step
from conftest import tiny_bert
from conftest import tiny_preprocessor


def make_sg_opt(weights=None, backbone=None):
    encoder = kcse.SentenceEncoder(
        backbone or tiny_bert(), tiny_preprocessor(), pooling="cls"
    )
    if weights is not None:
        encoder.set_weights(weights)
    keras.utils.set_random_seed(1)  # The projection head's initial weights.
    model = kcse.SGOpt(encoder, projection_dim=16, temperature=0.05)
    model.compile(optimizer=keras.optimizers.SGD(0.05))
    return model


def numpy_pivots(model, sentences):
    """Masked means of the frozen copy's every layer, computed apart."""
    features = model.preprocessor(sentences)
    mask = np.asarray(features["padding_mask"], "float64")[:, :, None]
    states = kcse.models.hidden_states_model(model.fixed_backbone)(features)
    return np.stack(
        [(np.asarray(s) * mask).sum(1) / mask.sum(1) for s in states["hidden_states"]],
        axis=1,
    )


def test_forward_projects_cls_and_every_layer_pivot():
    model = make_sg_opt()
    features = model.preprocessor(SENTENCES)
    outputs = np.asarray(model(features))
    assert outputs.shape == (8, 1 + 3, 16)
    cls = model.encoder.predict(SENTENCES, verbose=0)
    inputs = np.concatenate([cls[:, None], numpy_pivots(model, SENTENCES)], axis=1)
    np.testing.assert_allclose(outputs, np.asarray(model.projection(inputs)), atol=1e-5)


def test_fit_loss_adds_the_weight_regulariser():
    model = make_sg_opt()
    features = model.preprocessor(SENTENCES)
    fixed = [np.asarray(w) for w in model.fixed_backbone.weights]
    initial = float(kcse.losses.SelfGuidedLoss(0.05)(None, model(features)))
    first = model.fit(SENTENCES, batch_size=8, shuffle=False, verbose=0).history["loss"][0]
    # At the start BERT_T = BERT_F: the loss is L^opt3 alone.
    # After the step, the objective adds λ Σ‖θ_T − θ_F‖².
    distance = sum(
        float(np.sum((np.asarray(t) - f) ** 2))
        for t, f in zip(model.encoder.backbone.weights, fixed)
    )
    assert distance > 0
    y_pred = model(features)
    expected = float(kcse.losses.SelfGuidedLoss(0.05)(None, y_pred)) + 0.1 * distance
    np.testing.assert_allclose(float(model.objective(None, y_pred, None)), expected, rtol=1e-5)
    np.testing.assert_allclose(first, initial, rtol=1e-5)


def test_fixed_copy_and_embeddings_stay_frozen():
    model = make_sg_opt()
    backbone = model.encoder.backbone
    before = {w.path: np.asarray(w) for w in backbone.weights}
    fixed_before = [np.asarray(w) for w in model.fixed_backbone.weights]
    model.fit(SENTENCES, batch_size=4, epochs=2, verbose=0)
    for a, b in zip(model.fixed_backbone.weights, fixed_before):
        np.testing.assert_array_equal(np.asarray(a), b)
    embedding_paths = {
        w.path for layer in embedding_layers(backbone)
        for w in layer.weights
    }
    assert embedding_paths
    for w in backbone.weights:
        changed = not np.array_equal(np.asarray(w), before[w.path])
        if w.path in embedding_paths:
            assert not changed, w.path
    assert any(
        not np.array_equal(np.asarray(w), before[w.path])
        for w in backbone.transformer_layers[0].weights
    )


def test_mirrored_step_equals_single_step(two_cpu_strategy):
    assert_mirrored_step_equals_single_step(make_sg_opt, two_cpu_strategy, SENTENCES)


@pytest.mark.parametrize(
    "backbone_class",
    [kcse.models.NezhaBackbone, kcse.models.RoFormerBackbone],
)
def test_trains_relative_position_backbones(backbone_class):
    keras.utils.set_random_seed(0)
    backbone = backbone_class(
        vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, dropout=0.1,
    )
    model = make_sg_opt(backbone=backbone)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    history = model.fit(SENTENCES, batch_size=4, epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))


def test_whitening_to_fewer_dimensions_is_refused():
    whitening = kcse.layers.Whitening(n_components=4)
    whitening.adapt(np.random.default_rng(0).normal(size=(32, 8)))
    encoder = kcse.SentenceEncoder(
        tiny_bert(), tiny_preprocessor(), pooling="cls", whitening=whitening
    )
    with pytest.raises(ValueError, match="need one width"):
        kcse.SGOpt(encoder)


def test_config_round_trip():
    model = make_sg_opt()
    restored = kcse.SGOpt.from_config(model.get_config())
    assert (restored.projection_dim, restored.temperature, restored.regularization) == (
        16, 0.05, 0.1
    )
