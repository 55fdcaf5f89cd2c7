"""SupervisedSimCSE (triplets) and PairObjective (labelled pairs, CoSENT)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kcse
from authors_references import bojone_cosent_loss
from authors_references import princeton_simcse_loss
from conftest import TINY_SENTENCES as SENTENCES
from conftest import assert_mirrored_step_equals_single_step
from conftest import one_step
from conftest import tiny_bert
from conftest import tiny_preprocessor
from princeton_simcse_reference import mlp_output

pytestmark = pytest.mark.usefixtures("unoptimised_tensorflow_graphs")

# Triplets and scored pairs in the tiny vocabulary (8 samples each).
ANCHORS = SENTENCES
POSITIVES = [s + " red" for s in SENTENCES]
NEGATIVES = list(reversed(SENTENCES))
TRIPLETS = (ANCHORS, POSITIVES, NEGATIVES)
SCORES = np.array([5.0, 4.0, 0.5, 3.0, 1.0, 2.0, 4.5, 0.0], "float32")


def make_encoder(weights=None, backbone=None, dropout=0.0):
    encoder = kcse.SentenceEncoder(
        backbone or tiny_bert(dropout=dropout), tiny_preprocessor(), pooling="P3"
    )
    if weights is not None:
        encoder.set_weights(weights)
    return encoder


def make_supervised(weights=None, hard_negative_weight=0.5):
    model = kcse.SupervisedSimCSE(
        make_encoder(weights), hard_negative_weight=hard_negative_weight
    )
    model.compile(optimizer=keras.optimizers.SGD(0.05))
    return model


def make_pairs(weights=None):
    model = kcse.PairObjective(make_encoder(weights))
    model.compile(optimizer=keras.optimizers.SGD(0.05))
    return model


def test_supervised_simcse_forward_and_fit_loss(single_steps):
    """Reference: princeton-nlp/SimCSE simcse/models.py `cl_forward` with a
    hard negative (cos(z1, z2) / temp | cos(z1, z3) / temp +
    hard_negative_weight on z1_i's own z3_i, CrossEntropyLoss with labels
    arange(N)), transcribed to numpy in tests/authors_references.py.
    Independent: the authors' code, not kcse.losses.SimCSELoss; only the
    sentence vectors come from kcse."""
    initial, loss, _ = single_steps("triplets", make_supervised, TRIPLETS)
    encoder = make_encoder(initial)
    columns = [encoder.predict(column, verbose=0) for column in TRIPLETS]
    expected = princeton_simcse_loss(
        np.stack(columns, axis=1), 0.05, hard_negative_weight=0.5
    )
    np.testing.assert_allclose(loss, expected, atol=1e-5)


def pooler_encoder():
    """A tiny BERT with its pooler, tanh (P2), kernels and embeddings drawn
    wide: a random tiny BERT's [CLS] hardly differs from sentence to
    sentence (mean cosine 0.67 here)."""
    backbone = tiny_bert()
    rng = np.random.default_rng(0)
    for variable in backbone.trainable_weights:
        if variable.path.endswith(("kernel", "embeddings")):
            variable.assign(rng.normal(0.0, 0.6, variable.shape).astype("float32"))
    return kcse.SentenceEncoder(backbone, tiny_preprocessor(), pooling="pooler",
                                pooler_activation="tanh")


def test_keep_mlp_trains_and_keeps_princetons_mlp_as_the_pooler():
    """Reference: princeton-nlp/SimCSE simcse/models.py. With `pooler_type
    "cls"`, `cl_forward` passes [CLS] through `MLPLayer` (transcribed in
    torch, tests/princeton_simcse_reference.py) before the loss (with the
    hard negative, tests/authors_references.py), and `sentemb_forward`
    keeps it at test time without `--mlp_only_train`; `cl_init` draws it as
    BERT's `_init_weights` (normal(0, 0.02), zero bias). kcse gives only
    the [CLS] states and the MLP's weights."""
    encoder = pooler_encoder()
    pooler = encoder.backbone.get_layer("pooled_dense")
    pretrained = pooler.get_weights()[0]
    model = kcse.SupervisedSimCSE(encoder, hard_negative_weight=0.5, keep_mlp=True)
    kernel, bias = pooler.get_weights()
    assert np.abs(kernel - pretrained).max() > 0.1 and not bias.any()
    assert abs(kernel.std() - 0.02) < 0.006 and abs(kernel.mean()) < 0.006
    cls = kcse.SentenceEncoder(encoder.backbone, encoder.preprocessor, pooling="cls")
    states = np.stack([cls.predict(column, verbose=0) for column in TRIPLETS], axis=1)
    views = mlp_output(kernel, bias, states)
    model.compile(optimizer=keras.optimizers.SGD(0.05))
    loss, _ = one_step(model, TRIPLETS)
    expected = princeton_simcse_loss(views, 0.05, hard_negative_weight=0.5)
    np.testing.assert_allclose(loss, expected, atol=1e-5)
    assert abs(princeton_simcse_loss(states, 0.05, hard_negative_weight=0.5) - expected) > 1e-3

    trained_kernel, trained_bias = pooler.get_weights()
    assert np.abs(trained_kernel - kernel).max() > 0  # The MLP trains with the encoder.
    vectors = encoder.predict(SENTENCES, verbose=0)
    np.testing.assert_allclose(
        vectors, mlp_output(trained_kernel, trained_bias, cls.predict(SENTENCES, verbose=0)),
        atol=1e-5)


def test_keep_mlp_needs_the_pooler_with_tanh():
    with pytest.raises(ValueError, match="pooling='pooler', pooler_activation='tanh'"):
        kcse.SupervisedSimCSE(make_encoder(), keep_mlp=True)


PAIRS = (SENTENCES, POSITIVES)


def test_pair_objective_fit_loss_is_cosent_of_the_initial_model(single_steps):
    """Reference: bojone/CoSENT cosent.py `cosent_loss` (rows [u1, v1, u2,
    v2, ...], 20 · cos, logsumexp over [0] and the mis-ranked differences),
    transcribed to numpy in tests/authors_references.py. Independent: the
    author's code, not kcse.losses.CoSENT; only the sentence vectors come
    from kcse. The step (one batch of 8, in order) is the one the mirrored
    test compares with."""
    initial, loss, _ = single_steps("pairs", make_pairs, PAIRS, SCORES)
    encoder = make_encoder(initial)
    vectors = np.stack([encoder.predict(c, verbose=0) for c in PAIRS], axis=1)
    expected = bojone_cosent_loss(SCORES, vectors)
    np.testing.assert_allclose(loss, expected, atol=1e-5)


def test_tf_data_of_triplets_and_labelled_pairs():
    triplets = tf.data.Dataset.from_tensor_slices(
        ((ANCHORS, POSITIVES, NEGATIVES),)
    ).batch(4)
    history = make_supervised().fit(triplets, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    pairs = tf.data.Dataset.from_tensor_slices(
        ((SENTENCES, POSITIVES), SCORES)
    ).batch(4)
    history = make_pairs().fit(pairs, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_wrong_number_of_columns_is_a_clear_error():
    with pytest.raises(ValueError, match="triplets"):
        make_supervised().fit((ANCHORS, POSITIVES), batch_size=8, verbose=0)
    with pytest.raises(ValueError, match="pairs"):
        make_pairs().fit((ANCHORS, POSITIVES, NEGATIVES), SCORES, verbose=0)


def test_supervised_simcse_mirrored_step_equals_single_step(two_cpu_strategy, single_steps):
    assert_mirrored_step_equals_single_step(
        make_supervised, two_cpu_strategy, TRIPLETS,
        single=single_steps("triplets", make_supervised, TRIPLETS),
    )


def test_pair_objective_mirrored_step_equals_single_step(two_cpu_strategy, single_steps):
    loss = assert_mirrored_step_equals_single_step(
        make_pairs, two_cpu_strategy, PAIRS, SCORES,
        single=single_steps("pairs", make_pairs, PAIRS, SCORES),
    )
    # Ranking within each replica's half only would give another loss
    # (bojone/CoSENT's loss of each half, tests/authors_references.py).
    vectors = np.stack(
        [make_pairs().encoder.predict(c, verbose=0) for c in PAIRS],
        axis=1,
    )
    halves = [bojone_cosent_loss(SCORES[s], vectors[s]) for s in (slice(0, 4), slice(4, 8))]
    assert abs(np.mean(halves) - loss) > 1e-3


@pytest.mark.parametrize(
    "backbone_class",
    [kcse.models.NezhaBackbone, kcse.models.RoFormerBackbone],
)
def test_relative_position_backbones_train(backbone_class):
    keras.utils.set_random_seed(0)
    backbone = backbone_class(
        vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, dropout=0.1,
    )
    for model, y in (
        (kcse.SupervisedSimCSE(make_encoder(backbone=backbone)), None),
        (kcse.PairObjective(make_encoder(backbone=backbone)), SCORES),
    ):
        model.compile(optimizer=keras.optimizers.Adam(1e-3))
        x = (ANCHORS, POSITIVES, NEGATIVES) if y is None else (SENTENCES, POSITIVES)
        history = model.fit(x, y, batch_size=4, epochs=2, verbose=0)
        assert all(np.isfinite(history.history["loss"]))


def test_config_round_trips():
    model = make_supervised(hard_negative_weight=0.3)
    restored = kcse.SupervisedSimCSE.from_config(model.get_config())
    assert restored.hard_negative_weight == 0.3 and not restored.keep_mlp
    kept = kcse.SupervisedSimCSE(pooler_encoder(), keep_mlp=True)
    assert kcse.SupervisedSimCSE.from_config(kept.get_config()).keep_mlp
    pairs = kcse.PairObjective(make_encoder(), kcse.losses.CoSENT(scale=10.0))
    restored = kcse.PairObjective.from_config(pairs.get_config())
    assert restored.objective_loss.scale == 10.0
