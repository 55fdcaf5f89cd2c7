import numpy as np
import pytest

import kcse
# The references, transcribed from the authors' code (bojone/SimCSE eval.py
# simcse_loss; princeton-nlp/SimCSE simcse/models.py cl_forward), are shared
# with the objectives' tests.
from authors_references import bojone_simcse_loss
from authors_references import cross_entropy
from authors_references import princeton_simcse_loss

# float32 loss against a float64 reference: its logits cos / T reach 1/T = 20,
# where one float32 rounding is ~eps / T = 2.4e-6 (1.7e-6 measured).
FLOAT32_LOSS_ATOL = 1e-5


def seed_003_supervised_loss(triplets, temperature):
    """The seed's torch code: rows [a1, p1, n1, a2, ...], anchors vs the rest."""
    rows = triplets.reshape(-1, triplets.shape[-1]).astype("float64")
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    similarities = rows @ rows.T
    anchors = np.arange(0, len(rows), 3)
    others = np.array([i for i in range(len(rows)) if i % 3 != 0])
    logits = similarities[anchors][:, others] / temperature
    return cross_entropy(logits, np.arange(0, len(others), 2)).mean()


@pytest.mark.parametrize("temperature", [0.05, 1.0])
@pytest.mark.parametrize("hard_negative_weight", [0.0, 0.7])
def test_hard_negatives_equal_princeton_reference(temperature, hard_negative_weight):
    triplets = np.random.default_rng(4).normal(size=(12, 3, 16)).astype("float32")
    loss = kcse.losses.SimCSELoss(
        temperature, "cross_view", hard_negative_weight=hard_negative_weight
    )(None, triplets)
    expected = princeton_simcse_loss(triplets, temperature, hard_negative_weight)
    np.testing.assert_allclose(float(loss), expected, atol=FLOAT32_LOSS_ATOL)
    if hard_negative_weight == 0.0:  # The seed's arrangement orders columns
        # differently; the softmax does not care.
        np.testing.assert_allclose(
            expected, seed_003_supervised_loss(triplets, temperature), atol=1e-9
        )


@pytest.mark.parametrize("temperature", [0.05, 0.1, 1.0])
def test_both_views_equals_su_reference(temperature):
    views = np.random.default_rng(1).normal(size=(16, 2, 32)).astype("float32")
    loss = kcse.losses.SimCSELoss(temperature, "both_views")(None, views)
    np.testing.assert_allclose(
        float(loss), bojone_simcse_loss(views, temperature), atol=FLOAT32_LOSS_ATOL
    )


@pytest.mark.parametrize("temperature", [0.05, 0.1, 1.0])
def test_cross_view_equals_princeton_reference(temperature):
    views = np.random.default_rng(2).normal(size=(16, 2, 32)).astype("float32")
    loss = kcse.losses.SimCSELoss(temperature, "cross_view")(None, views)
    np.testing.assert_allclose(
        float(loss), princeton_simcse_loss(views, temperature), atol=FLOAT32_LOSS_ATOL
    )


@pytest.mark.parametrize("batch", [2, 8, 64])
def test_indistinguishable_vectors_give_log_of_candidate_count(batch):
    views = np.ones((batch, 2, 4), "float32")
    both = kcse.losses.SimCSELoss(negatives="both_views")(None, views)
    cross = kcse.losses.SimCSELoss(negatives="cross_view")(None, views)
    np.testing.assert_allclose(float(both), np.log(2 * batch - 1), atol=1e-5)
    np.testing.assert_allclose(float(cross), np.log(batch), atol=1e-5)
    triplets = np.ones((batch, 3, 4), "float32")
    hard = kcse.losses.SimCSELoss(negatives="cross_view")(None, triplets)
    np.testing.assert_allclose(float(hard), np.log(2 * batch), atol=1e-5)


def test_sample_weight_and_per_sentence_reduction():
    views = np.random.default_rng(3).normal(size=(6, 2, 8)).astype("float32")
    per_sentence = kcse.losses.SimCSELoss(reduction="none")(None, views)
    assert per_sentence.shape == (6,)
    np.testing.assert_allclose(
        float(np.mean(per_sentence)), bojone_simcse_loss(views, 0.05), atol=FLOAT32_LOSS_ATOL
    )
    weights = np.array([1, 0, 1, 0, 1, 0], "float32")
    weighted = kcse.losses.SimCSELoss()(None, views, sample_weight=weights)
    np.testing.assert_allclose(
        float(weighted), float(np.sum(np.asarray(per_sentence) * weights) / 6),
        atol=1e-6,
    )


def test_bad_arguments():
    with pytest.raises(ValueError, match="negatives must be one of"):
        kcse.losses.SimCSELoss(negatives="all")
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        kcse.losses.SimCSELoss(temperature=0)
    with pytest.raises(ValueError, match=r"shape \(batch, 2, dim\)"):
        kcse.losses.SimCSELoss()(None, np.ones((4, 4, 8), "float32"))
    with pytest.raises(ValueError, match="need negatives='cross_view'"):
        kcse.losses.SimCSELoss()(None, np.ones((4, 3, 8), "float32"))


def test_config_round_trip():
    loss = kcse.losses.SimCSELoss(0.1, "cross_view", hard_negative_weight=0.5)
    restored = kcse.losses.SimCSELoss.from_config(loss.get_config())
    assert (restored.temperature, restored.negatives) == (0.1, "cross_view")
    assert restored.hard_negative_weight == 0.5
