import keras
import keras_hub
import numpy as np
import pytest

import consert_reference
import kcse
from conftest import TINY_SENTENCES as SENTENCES
from conftest import assert_mirrored_step_equals_single_step
from conftest import tiny_bert
from conftest import tiny_preprocessor
from conftest import token_batch

pytestmark = pytest.mark.usefixtures("unoptimised_tensorflow_graphs")

HYPOTHESES = [s + " red" for s in reversed(SENTENCES)]
NLI_LABELS = np.array([0, 1, 2, 0, 2, 1, 0, 2])


def tiny_backbone(kind, dropout=0.0):
    keras.utils.set_random_seed(0)
    size = dict(vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=8,
                intermediate_dim=16, dropout=dropout)
    if kind == "bert":
        return tiny_bert(dropout=dropout)
    if kind == "roberta":
        return keras_hub.models.RobertaBackbone(max_sequence_length=16, **size)
    return {"nezha": kcse.models.NezhaBackbone,
            "roformer": kcse.models.RoFormerBackbone}[kind](**size)


@pytest.mark.parametrize("kind", ["bert", "roberta", "nezha", "roformer"])
def test_stages_run_apart_equal_the_backbone(kind):
    backbone = tiny_backbone(kind)
    inputs = token_batch([6, 3, 1])
    if kind == "roberta":
        del inputs["segment_ids"]
    expected = kcse.models.hidden_states_model(backbone)(inputs)["hidden_states"]
    embeddings = kcse.models.embedding_stage(backbone, inputs)
    states = kcse.models.transformer_states(
        backbone, embeddings, inputs["padding_mask"]
    )
    assert len(states) == len(expected)
    for actual, reference in zip(states, expected):
        np.testing.assert_allclose(actual, reference, atol=1e-6)


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_shuffled_positions_equal_moving_the_tokens(kind):
    # Self-attention is permutation-equivariant: embedding token i at
    # position p(i) and averaging equals putting token i at slot p(i).
    backbone = tiny_backbone(kind)
    inputs = token_batch([6, 4], sequence_length=6)
    if kind == "roberta":
        del inputs["segment_ids"]
    mask = inputs["padding_mask"]
    positions = np.asarray(kcse.layers.TokenShuffle(seed=3)(mask, training=True))
    assert not np.array_equal(positions, np.broadcast_to(np.arange(6), mask.shape))
    embeddings = kcse.models.embedding_stage(backbone, inputs, positions)
    shuffled = kcse.models.transformer_states(backbone, embeddings, mask)[-1]
    moved = {key: np.zeros_like(value) for key, value in inputs.items()}
    for row in range(len(positions)):
        for key in inputs:
            moved[key][row, positions[row]] = inputs[key][row]
    reference = kcse.models.hidden_states_model(backbone)(moved)["hidden_states"][-1]
    real = mask.astype(bool)
    for row in range(len(positions)):
        np.testing.assert_allclose(
            np.asarray(shuffled)[row][real[row]],
            np.asarray(reference)[row][positions[row][real[row]]],
            atol=1e-5,
        )


def test_shuffle_on_relative_positions_is_a_clear_error():
    backbone = tiny_backbone("nezha")
    inputs = token_batch([3])
    with pytest.raises(ValueError, match="no absolute position embeddings"):
        kcse.models.embedding_stage(backbone, inputs, np.array([[1, 0, 2, 3, 4, 5]]))


def make_consert(weights=None, mode="unsup", views=(None, None), backbone=None,
                 **options):
    encoder = kcse.SentenceEncoder(
        backbone or tiny_bert(), tiny_preprocessor(), pooling="last_avg"
    )
    if weights is not None:
        encoder.set_weights(weights)
    model = kcse.ConSERT(encoder, views=views, mode=mode, **options)
    model.compile(optimizer=keras.optimizers.SGD(0.05))
    return model


def test_nt_xent_equals_consert_loss():
    """Reference: ConSERT's `_contrastive_loss_forward`, in numpy
    (tests/consert_reference.py): the two directions summed."""
    rng = np.random.default_rng(0)
    for batch, temperature in [(2, 0.1), (8, 0.1), (5, 0.05)]:
        views = rng.normal(size=(batch, 2, 16)).astype("float32")
        loss = kcse.losses.NTXentLoss(temperature)(None, views)
        expected = consert_reference.nt_xent(views[:, 0], views[:, 1], temperature)
        np.testing.assert_allclose(float(loss), expected, rtol=1e-6)


def test_last2avg_pooling_equals_consert_last2avg():
    """kcse's last2avg, the pooling ConSERT reports, equals its `Pooling`'s
    `pooling_mode_mean_last_2_tokens` (tests/consert_reference.py): the
    masked mean of each of the last two layers, then their average."""
    rng = np.random.default_rng(0)
    states = [rng.normal(size=(3, 5, 4)).astype("float32") for _ in range(4)]
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0]], bool)
    pooled = kcse.layers.SentencePooling("last2avg")(states, mask)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(pooled),
                               consert_reference.last2avg(states, mask), atol=1e-6)


def test_defaults_are_consert_scripts():
    model = kcse.ConSERT(kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor()))
    assert model.temperature == 0.1 and model.contrastive_weight == 0.15
    first, second = model.views
    assert isinstance(first, kcse.layers.FeatureCutoff) and first.rate == 0.2
    assert isinstance(second, kcse.layers.TokenShuffle)
    joint = make_consert(mode="joint", views=None)
    assert joint.views[0] is None
    assert isinstance(joint.views[1], kcse.layers.TokenCutoff) and joint.views[1].rate == 0.1
    assert joint.classifier.max_square


def consert_samples(mode):
    """`(x, y)` of the tests' step in `mode`: NLI pairs unless unsupervised."""
    if mode == "unsup":
        return SENTENCES, None
    return (SENTENCES, HYPOTHESES), NLI_LABELS


def consert_step(single_steps, mode):
    """One SGD step of `make_consert` in `mode` on all of `consert_samples`
    (`conftest.single_step`), taken once per module for each mode."""
    return single_steps(
        mode, lambda weights: make_consert(weights, mode=mode), *consert_samples(mode)
    )


def test_unsup_fit_loss_is_weighted_consert_nt_xent(single_steps):
    """Reference: ConSERT's `forward` with `--cl_loss_only --cl_rate 0.15`
    (tests/consert_reference.py). Views without augmentation and no dropout
    make both views the encoder's vectors."""
    model = make_consert()
    features = model.preprocessor(SENTENCES)
    vectors = model.encoder.predict(SENTENCES, verbose=0)
    expected = 0.15 * consert_reference.nt_xent(vectors, vectors, 0.1)
    np.testing.assert_allclose(model(features)["views"][:, 0], vectors, atol=1e-5)
    _, loss, _ = consert_step(single_steps, "unsup")
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


@pytest.mark.parametrize("mode", ["sup", "joint"])
def test_supervised_modes_equal_consert_loss(mode, single_steps):
    """Reference: ConSERT's `forward` in numpy (tests/consert_reference.py):
    softmax on (a, b, |a − b|, max(a, b)²), plus in the joint mode
    cl_rate 0.15 · (NT-Xent of the premises + NT-Xent of the hypotheses)."""
    model = make_consert(mode=mode)
    premises = model.encoder.predict(SENTENCES, verbose=0)
    hypotheses = model.encoder.predict(HYPOTHESES, verbose=0)
    kernel, bias = (np.asarray(w) for w in model.classifier.dense.weights)
    if mode == "joint":
        expected = consert_reference.joint_loss(
            premises, hypotheses, (premises, premises), (hypotheses, hypotheses),
            NLI_LABELS, kernel, bias, temperature=0.1, cl_rate=0.15,
        )
    else:
        expected = consert_reference.cross_entropy(
            consert_reference.nli_logits(premises, hypotheses, kernel, bias), NLI_LABELS
        )
    _, loss, _ = consert_step(single_steps, mode)
    np.testing.assert_allclose(loss, expected, rtol=1e-5)


@pytest.mark.parametrize("max_square", [True, False])
def test_nli_head_equals_consert_reps_to_output(max_square):
    """ConSERT's head with and without --concatenation_sent_max_square:
    (a, b, |a − b|[, max(a, b)²]) through its Dense, `_reps_to_output`
    (tests/consert_reference.py); `max_square` reaches it from kcse.ConSERT
    and survives get_config."""
    model = make_consert(mode="sup", max_square=max_square)
    rng = np.random.default_rng(0)
    premises, hypotheses = (rng.normal(size=(5, 8)).astype("float32") for _ in range(2))
    kernel, bias = (np.asarray(w) for w in model.classifier.dense.weights)
    assert kernel.shape == ((4 if max_square else 3) * 8, 3)
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(model.classifier(premises, hypotheses)),
        consert_reference.nli_logits(premises, hypotheses, kernel, bias, max_square),
        atol=1e-5)
    assert kcse.ConSERT.from_config(model.get_config()).classifier.max_square is max_square


@pytest.mark.parametrize("mode", ["unsup", "joint"])
def test_mirrored_step_equals_single_step(mode, two_cpu_strategy, single_steps):
    assert_mirrored_step_equals_single_step(
        lambda weights: make_consert(weights, mode=mode), two_cpu_strategy,
        *consert_samples(mode), single=consert_step(single_steps, mode),
    )


@pytest.mark.parametrize(
    "kind,views",
    [
        ("bert", (kcse.layers.TokenShuffle, kcse.layers.FeatureCutoff)),
        ("nezha", (kcse.layers.TokenCutoff, kcse.layers.SpanCutoff)),
        ("roformer", (kcse.layers.EmbeddingDropout, kcse.layers.FeatureCutoff)),
    ],
)
def test_trains_through_fit_on_tiny_backbones(kind, views):
    backbone = tiny_backbone(kind, dropout=0.1)
    made = [view(seed=1) if view is kcse.layers.TokenShuffle else view(0.2, seed=1)
            for view in views]
    model = make_consert(views=made, backbone=backbone)
    model.compile(optimizer=keras.optimizers.Adam(1e-3))
    before = model.encoder.get_weights()
    history = model.fit(SENTENCES, batch_size=4, epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))
    assert max(np.abs(a - b).max() for a, b in zip(model.encoder.get_weights(), before)) > 1e-4


def test_bad_modes_views_and_data():
    with pytest.raises(ValueError, match="mode must be one of"):
        make_consert(mode="sup-unsup")
    with pytest.raises(ValueError, match="two views"):
        kcse.ConSERT(kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor()), views=[None])
    with pytest.raises(ValueError, match="needs NLI labels"):
        make_consert(mode="sup").fit((SENTENCES, HYPOTHESES), batch_size=8, verbose=0)
    with pytest.raises(ValueError, match="pairs with NLI labels"):
        make_consert(mode="joint").fit(SENTENCES, NLI_LABELS, batch_size=8, verbose=0)


def test_config_round_trip():
    model = make_consert(
        mode="joint", views=(kcse.layers.TokenShuffle(seed=2), kcse.layers.SpanCutoff(0.3)),
        contrastive_weight=0.5,
    )
    restored = kcse.ConSERT.from_config(model.get_config())
    assert restored.mode == "joint" and restored.contrastive_weight == 0.5
    assert isinstance(restored.views[0], kcse.layers.TokenShuffle)
    assert restored.views[1].rate == 0.3


def test_adversarial_perturbation_equals_consert_noise_on_real_tokens():
    """Reference: ConSERT's `AdvCLSoftmaxLoss.forward` (tests/consert_reference.py),
    whose 1e-10 shows on a token with a gradient of norm 1e-9."""
    view = kcse.layers.AdversarialPerturbation(noise_norm=0.5)
    embeddings = np.random.default_rng(0).normal(size=(2, 4, 6)).astype("float32")
    gradient = np.random.default_rng(1).normal(size=(2, 4, 6)).astype("float32")
    gradient[1, 1] *= 1e-9 / np.linalg.norm(gradient[1, 1])
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]])
    out, out_mask = view(embeddings, mask, gradient=gradient, training=True)
    noise = np.asarray(out) - embeddings
    real = mask.astype(bool)
    expected = consert_reference.adversarial_noise(gradient, 0.5)
    np.testing.assert_allclose(noise[real], expected[real], atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(noise[real], axis=-1),
                               [0.5] * 4 + [0.5 / 1.1], rtol=1e-5)
    assert (noise[~real] == 0).all()
    np.testing.assert_array_equal(out_mask, mask)
    np.testing.assert_array_equal(view(embeddings, mask, training=False)[0], embeddings)
    with pytest.raises(ValueError, match="needs the gradient of a supervised"):
        view(embeddings, mask, training=True)


def test_adversarial_view_refuses_unlabelled_training():
    adversarial = (None, kcse.layers.AdversarialPerturbation())
    for mode in ("unsup", "sup"):
        with pytest.raises(ValueError, match="needs labelled pairs and mode='joint'"):
            make_consert(mode=mode, views=adversarial)
    model = make_consert(mode="joint", views=adversarial)
    with pytest.raises(ValueError, match="needs NLI labels"):
        model.fit((SENTENCES, HYPOTHESES), batch_size=8, verbose=0)


def test_adversarial_gradient_is_the_nli_loss_gradient_and_trains():
    model = make_consert(
        mode="joint", views=(None, kcse.layers.AdversarialPerturbation(0.1))
    )
    features = model.preprocessor(SENTENCES + HYPOTHESES)
    order = np.stack([np.arange(8), np.arange(8) + 8], axis=1).reshape(-1)
    flat = {key: np.asarray(value)[order] for key, value in features.items()}
    gradient = np.asarray(model._adversarial_gradient(flat, NLI_LABELS, training=False))
    backbone = model.encoder.backbone
    embeddings = np.asarray(kcse.models.embedding_stage(backbone, flat))

    def nli_loss(e):
        states = kcse.models.transformer_states(backbone, e, flat["padding_mask"])
        vectors = np.asarray(model.encoder.pool(states, flat["padding_mask"]))
        logits = np.asarray(model.classifier(vectors[0::2], vectors[1::2]), "float64")
        return consert_reference.cross_entropy(logits, NLI_LABELS)

    # A central difference along the gradient gives its norm.
    step = 1e-2
    direction = gradient / np.linalg.norm(gradient)
    slope = (nli_loss(embeddings + step * direction) - nli_loss(embeddings - step * direction)) / (2 * step)
    np.testing.assert_allclose(slope, np.linalg.norm(gradient), rtol=2e-2)

    history = model.fit((SENTENCES, HYPOTHESES), NLI_LABELS, batch_size=4, epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))
