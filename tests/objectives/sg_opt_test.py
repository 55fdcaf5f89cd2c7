import keras
import numpy as np
import pytest

import kcse
from kcse.models.layer_taps import embedding_layers
from authors_references import sg_bert_compute_diff
from authors_references import sg_bert_ntxent_loss
from authors_references import sg_bert_ntxent_loss_opt1
from authors_references import sg_bert_ntxent_loss_opt2
from authors_references import sg_bert_ntxent_loss_original
from authors_references import sg_bert_pooling
from authors_references import sg_bert_projection_head
from conftest import TINY_SENTENCES as SENTENCES
from conftest import one_step
from conftest import tiny_bert
from conftest import tiny_preprocessor

pytestmark = pytest.mark.usefixtures("unoptimised_tensorflow_graphs")


def make_sg_opt(weights=None, backbone=None, projection_dim=16, learning_rate=0.05,
                **options):
    encoder = kcse.SentenceEncoder(
        backbone or tiny_bert(), tiny_preprocessor(), pooling="cls"
    )
    if weights is not None:
        encoder.set_weights(weights)
    keras.utils.set_random_seed(1)  # The projection head's initial weights.
    model = kcse.SGOpt(encoder, projection_dim=projection_dim, temperature=0.05,
                       **options)
    model.compile(optimizer=keras.optimizers.SGD(learning_rate))
    return model


def move_tuned_weights(model, scale=0.1, seed=7):
    """Moves BERT_T away from BERT_F: adds fixed normal noise to the
    weights of its transformer blocks (all trained; the embeddings are
    frozen), so that the regulariser and its gradient are not zero."""
    rng = np.random.default_rng(seed)
    for layer in model.encoder.backbone.transformer_layers:
        for w in layer.weights:
            noise = rng.normal(0.0, scale, size=tuple(w.shape))
            w.assign(np.asarray(w) + noise.astype(w.dtype))


def numpy_pivots(model, sentences):
    """Masked means of the frozen copy's every layer, computed apart."""
    features = model.preprocessor(sentences)
    mask = np.asarray(features["padding_mask"], "float64")[:, :, None]
    states = kcse.models.hidden_states_model(model.fixed_backbone)(features)
    return np.stack(
        [(np.asarray(s) * mask).sum(1) / mask.sum(1) for s in states["hidden_states"]],
        axis=1,
    )


def authors_pivots(model, sentences, pooling):
    """`Loss.forward`'s `pooled`: SG-BERT's pooling (tests/authors_references.py)
    of the frozen copy's every layer, `(batch, layers, hidden)`."""
    features = model.preprocessor(sentences)
    states = kcse.models.hidden_states_model(model.fixed_backbone)(features)
    stacked = np.stack([np.asarray(s) for s in states["hidden_states"]], axis=1)
    return sg_bert_pooling(stacked, features["padding_mask"], pooling)


def numpy_head(model, vectors):
    """SG-BERT's projection head (tests/authors_references.py) with the
    weights of `model.projection`, Keras kernels transposed to torch's
    `(out, in)` layout."""
    dense = model.projection.layers
    return sg_bert_projection_head(
        vectors,
        [np.asarray(layer.kernel).T for layer in dense],
        [np.asarray(layer.bias) for layer in dense],
    )


def sg_bert_reference_loss(model, fixed_weights):
    """galsang/SG-BERT's training loss of `model` on SENTENCES, in numpy.

    `Loss.forward` with `obj="SG-OPT"`: the [CLS] vector of BERT_T and the
    masked mean of every layer of BERT_F (numpy), both through the
    projection head (numpy, exact GELU), into `NTXentLoss` (numpy), plus
    `lamb · compute_diff()` (λ = 0.1) against `fixed_weights`.
    """
    cls = model.encoder.predict(SENTENCES, verbose=0)
    pooled = numpy_pivots(model, SENTENCES)
    loss = sg_bert_ntxent_loss(numpy_head(model, cls), numpy_head(model, pooled), 0.05)
    diff = sg_bert_compute_diff(
        [np.asarray(w) for w in model.encoder.backbone.weights], fixed_weights
    )
    return loss + 0.1 * diff, diff


def test_forward_projects_cls_and_every_layer_pivot():
    """Reference: the [CLS] vector and numpy masked means of BERT_F's
    layers through SG-BERT's head (`nn.Linear`, `nn.GELU()`: exact erf),
    transcribed from galsang/SG-BERT loss.py in tests/authors_references.py
    and fed with the head's weights: independent of Keras' Dense and gelu."""
    model = make_sg_opt()
    features = model.preprocessor(SENTENCES)
    outputs = np.asarray(model(features))
    assert outputs.shape == (8, 1 + 3, 16)
    cls = model.encoder.predict(SENTENCES, verbose=0)
    inputs = np.concatenate([cls[:, None], numpy_pivots(model, SENTENCES)], axis=1)
    np.testing.assert_allclose(outputs, numpy_head(model, inputs), atol=1e-5)


def test_fit_loss_equals_sg_bert_loss_with_its_regulariser():
    """Reference: galsang/SG-BERT loss.py, `Loss.forward` for SG-OPT
    (`NTXentLoss` + lamb · `compute_diff`), transcribed to numpy in
    tests/authors_references.py (checked against that torch code when it
    was written). Independent: the authors' code, not
    kcse.losses.SelfGuidedLoss; only the encoder's [CLS] vectors and
    BERT_F's hidden states come from Keras.

    Step 1 starts at BERT_T = BERT_F, where compute_diff is 0; step 2
    starts after step 1 has moved BERT_T, and its reported loss must
    include lamb · compute_diff.
    """
    model = make_sg_opt()
    backbone = model.encoder.backbone
    before = {w.path: np.asarray(w) for w in backbone.weights}
    fixed = [np.asarray(w) for w in model.fixed_backbone.weights]
    for step in (1, 2):
        expected, diff = sg_bert_reference_loss(model, fixed)
        assert (diff == 0) if step == 1 else (diff > 1e-6), diff
        history = model.fit(SENTENCES, batch_size=8, shuffle=False, verbose=0)
        np.testing.assert_allclose(history.history["loss"][0], expected, rtol=1e-5)

    # BERT_F and BERT_T's embeddings stayed frozen; its first block trained.
    for a, b in zip(model.fixed_backbone.weights, fixed):
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


ONE_PIVOT_LOSSES = {
    "opt1": sg_bert_ntxent_loss_opt1,
    # The paper's L^opt2: every h_j a negative (the authors' slice drops one).
    "opt2": lambda c, h, t: sg_bert_ntxent_loss_opt2(c, h, t, first_negative=len(c) - 1),
    "base": sg_bert_ntxent_loss_original,
}


@pytest.mark.parametrize("variant", sorted(ONE_PIVOT_LOSSES))
@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_ablation_fit_loss_equals_sg_berts(variant, pooling):
    """Reference: galsang/SG-BERT loss.py, `Loss.forward` with `obj` SG,
    OPT1 or OPT2 and `pooling2` mean or max: the [CLS] vector and one
    layer's pooled states (numpy `Loss.mean_pooling`/`max_pooling`) through
    the head into `NTXentLossOriginal`/`Opt1`/`Opt2`, transcribed in
    tests/authors_references.py. `pivot_layers=(2, 3)` keeps one layer (the
    last block), so the authors' `randint(lmin, lmax)` can only draw it."""
    model = make_sg_opt(variant=variant, pivot_pooling=pooling, pivot_layers=(2, 3),
                        regularization=0.0)
    cls = numpy_head(model, model.encoder.predict(SENTENCES, verbose=0))
    pooled = numpy_head(model, authors_pivots(model, SENTENCES, pooling)[:, 2])
    expected = ONE_PIVOT_LOSSES[variant](cls, pooled, 0.05)
    history = model.fit(SENTENCES, batch_size=8, shuffle=False, verbose=0)
    np.testing.assert_allclose(history.history["loss"][0], expected, rtol=1e-5)


def test_max_pooled_pivots_of_some_layers_without_the_head_equal_sg_berts():
    """Reference as above, with `obj="SG-OPT"`, `pooling2="max"`, `lmin=1`,
    `lmax=3` (the first two blocks) and the vectors not projected (the
    paper's "− projection head" row): `NTXentLoss` on [CLS] and the pooled
    states as they are."""
    model = make_sg_opt(pivot_pooling="max", pivot_layers=(1, 3), projection=False,
                        regularization=0.0)
    assert model.projection is None
    features = model.preprocessor(SENTENCES)
    cls = model.encoder.predict(SENTENCES, verbose=0)
    pooled = authors_pivots(model, SENTENCES, "max")[:, 1:3]
    np.testing.assert_allclose(
        np.asarray(model(features)), np.concatenate([cls[:, None], pooled], 1), atol=1e-5)
    expected = sg_bert_ntxent_loss(cls, pooled, 0.05)
    history = model.fit(SENTENCES, batch_size=8, shuffle=False, verbose=0)
    np.testing.assert_allclose(history.history["loss"][0], expected, rtol=1e-5)


def test_one_pivot_variants_draw_a_layer_uniformly_among_the_kept_ones():
    """The authors draw `torch.randint(lmin, lmax, (batch_size,))`: each
    sentence's layer uniform over the kept layers, anew each step. Layers
    1 and 2 of the tiny model's 0..2 kept, their pivots filled with the
    layer's number; 6,000 draws in three steps of 2,000 rows; each count
    within 5 sampling sigmas of 3,000, and never layer 0."""
    model = make_sg_opt(variant="opt1", pivot_layers=(1, 3), seed=3)
    rows = 2000
    pivots = keras.ops.convert_to_tensor(
        np.broadcast_to(np.array([1.0, 2.0], "float32")[None, :, None], (rows, 2, 2))
    )

    def draw(sampler_model):
        return np.asarray(sampler_model.one_layer_per_sentence(pivots))[:, 0, 0]

    drawn = np.concatenate([draw(model) for _ in range(3)])
    counts = {layer: int(np.sum(drawn == layer)) for layer in (1.0, 2.0)}
    assert sum(counts.values()) == 3 * rows, counts
    sigma = np.sqrt(3 * rows * 0.5 * 0.5)
    assert all(abs(count - 1.5 * rows) < 5 * sigma for count in counts.values()), counts
    assert not np.array_equal(drawn[:rows], drawn[rows:2 * rows])  # Anew each step.
    again = make_sg_opt(variant="opt1", pivot_layers=(1, 3), seed=3)
    np.testing.assert_array_equal(draw(again), drawn[:rows])  # The same seed.


def test_bad_options_are_refused_when_built():
    with pytest.raises(ValueError, match=r"pivot_layers must be \(first, stop\) with "
                                         r"0 <= first < stop <= 3"):
        make_sg_opt(pivot_layers=(2, 4))
    with pytest.raises(ValueError, match=r"got \(2, 2\)"):
        make_sg_opt(pivot_layers=(2, 2))
    with pytest.raises(ValueError, match="pivot_pooling must be one of mean, max"):
        make_sg_opt(pivot_pooling="cls")
    with pytest.raises(ValueError, match="variant must be one of"):
        make_sg_opt(variant="opt4")


def test_projection_head_init_matches_sg_bert():
    """galsang/SG-BERT loss.py initialises both head Linears with
    `weight.normal_(0, initializer_range)` (0.02 for BERT) and zero bias.

    With 8 × 2048 and 2048 × 2048 kernels the sample standard deviation is
    within 5e-4 and 3e-5 of 0.02 (> 4 sampling sigmas: 1.1e-4 and 6.9e-6),
    where Glorot's (kcse's former head) would be 0.031 and 0.022; an
    untruncated normal puts 4.55% of draws beyond 2σ, a truncated one
    none.
    """
    model = make_sg_opt(projection_dim=2048)
    kernels = [np.asarray(layer.kernel, "float64") for layer in model.projection.layers]
    assert [k.shape for k in kernels] == [(8, 2048), (2048, 2048)]
    for kernel, std_tolerance in zip(kernels, (5e-4, 3e-5)):
        n = kernel.size
        assert abs(kernel.mean()) < 4 * 0.02 / np.sqrt(n), kernel.mean()
        np.testing.assert_allclose(kernel.std(), 0.02, atol=std_tolerance)
        beyond = np.mean(np.abs(kernel) > 2 * 0.02)
        assert abs(beyond - 0.0455) < 4 * np.sqrt(0.0455 * 0.9545 / n), beyond
    for layer in model.projection.layers:
        np.testing.assert_array_equal(np.asarray(layer.bias), 0.0)


@pytest.mark.parametrize("options", [{}, {"variant": "base", "pivot_layers": (2, 3)}],
                         ids=["opt3", "base"])
def test_mirrored_step_with_moved_weights_equals_single_step(two_cpu_strategy, options):
    """One step under MirroredStrategy (2 replicas) equals one step on one
    device (≤ 1e-5, every weight: BERT_T, BERT_F and the head) from
    θ_T ≠ θ_F, where the regulariser's gradient 2λ(θ_T − θ_F) is not zero:
    every replica computes the regulariser in full, so without the division
    by the replica count its gradient would count twice. L^base gathers
    both the sentence vectors and the pivots of the other replica (one
    layer kept, so that no draw differs between the runs).

    The rate is lower than elsewhere: the tiny head's outputs are small
    (normal(0, 0.02) weights, width 16), so the cosine gradients move its
    last bias by units per step, and float32 rounding must stay well under
    1e-5 while the regulariser's share stays well above it.
    """
    import tensorflow as tf

    initial = make_sg_opt().encoder.get_weights()

    def make_moved():
        model = make_sg_opt(initial, learning_rate=0.01, **options)
        move_tuned_weights(model)
        return model

    single = make_moved()
    start = [np.asarray(w) for w in single.weights]
    trainable = single.encoder.backbone.trainable_weights
    with tf.GradientTape() as tape:
        regulariser = single.regularization * single.weight_distance()
    gradient_norm = float(tf.linalg.global_norm(tape.gradient(regulariser, trainable)))
    assert float(regulariser) > 0.1 and gradient_norm > 0.1, (
        float(regulariser), gradient_norm,
    )
    single_loss, _ = one_step(single, SENTENCES)
    with two_cpu_strategy.scope():
        mirrored = make_moved()
    for a, b in zip(mirrored.weights, start):
        np.testing.assert_array_equal(np.asarray(a), b)
    mirrored_loss, _ = one_step(mirrored, SENTENCES)
    np.testing.assert_allclose(mirrored_loss, single_loss, atol=1e-5)
    assert len(mirrored.weights) == len(single.weights)
    for a, b in zip(mirrored.weights, single.weights):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=1e-5, err_msg=a.path)
    moved = max(np.abs(np.asarray(w) - s).max() for w, s in zip(single.weights, start))
    assert moved > 1e-4


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
    options = dict(variant="base", pivot_pooling="max", pivot_layers=(1, 3),
                   projection=False, seed=5)
    restored = kcse.SGOpt.from_config(make_sg_opt(**options).get_config())
    assert {name: getattr(restored, name) for name in options if name != "projection"} == {
        name: value for name, value in options.items() if name != "projection"}
    assert restored.projection is None
