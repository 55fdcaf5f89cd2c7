import numpy as np
import pytest

import kcse
from authors_references import sg_bert_ntxent_loss
from authors_references import sg_bert_ntxent_loss_opt1
from authors_references import sg_bert_ntxent_loss_opt2
from authors_references import sg_bert_ntxent_loss_original


def opt3_reference(vectors, temperature):
    """L^opt3 of the SG-OPT paper, term by term in float64."""
    v = vectors.astype("float64")
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    c, h = v[:, 0], v[:, 1:]
    b, layers = h.shape[:2]

    def phi(x, y):
        return np.exp(x @ y / temperature)

    total = 0.0
    for i in range(b):
        negatives = sum(phi(c[i], h[m, n]) for m in range(b) if m != i for n in range(layers))
        for k in range(layers):
            positive = phi(c[i], h[i, k])
            total += -np.log(positive / (positive + negatives))
    return total / (b * layers)


@pytest.mark.parametrize("temperature", [0.05, 0.5])
def test_equals_the_paper_formula(temperature):
    vectors = np.random.default_rng(0).normal(size=(5, 1 + 4, 12)).astype("float32")
    loss = kcse.losses.SelfGuidedLoss(temperature)(None, vectors)
    np.testing.assert_allclose(float(loss), opt3_reference(vectors, temperature), rtol=1e-5)


@pytest.mark.parametrize("temperature", [0.01, 0.05, 0.5])
def test_equals_sg_bert_ntxent_loss(temperature):
    """Reference: galsang/SG-BERT loss.py `NTXentLoss.forward(cls, cont)`,
    the authors' SG-OPT loss, transcribed to numpy in
    tests/authors_references.py (and checked against that torch code when
    written): independent of kcse and of the paper's formula above."""
    vectors = np.random.default_rng(2).normal(size=(6, 1 + 5, 16)).astype("float32")
    loss = kcse.losses.SelfGuidedLoss(temperature)(None, vectors)
    expected = sg_bert_ntxent_loss(vectors[:, 0], vectors[:, 1:], temperature)
    np.testing.assert_allclose(float(loss), expected, rtol=1e-5)


@pytest.mark.parametrize("temperature", [0.01, 0.05, 0.5])
def test_ablation_variants_equal_sg_berts_losses(temperature):
    """Reference: galsang/SG-BERT loss.py, `NTXentLossOpt1`, `NTXentLossOpt2`
    and `NTXentLossOriginal`, transcribed to numpy in tests/authors_references.py
    (checked against those torch classes when written). Two departures of the
    authors' code from the paper's formulas are the paper's here, each named
    in its reference: Opt2's slice, which leaves out one negative, and the
    labels and 1/b of Original (which raises as released)."""
    vectors = np.random.default_rng(3).normal(size=(6, 2, 16)).astype("float32")
    cls, pooled = vectors[:, 0], vectors[:, 1]

    def loss(variant):
        return float(kcse.losses.SelfGuidedLoss(temperature, variant)(None, vectors))

    np.testing.assert_allclose(
        loss("opt1"), sg_bert_ntxent_loss_opt1(cls, pooled, temperature), rtol=1e-5)
    every_pivot = sg_bert_ntxent_loss_opt2(cls, pooled, temperature, first_negative=5)
    np.testing.assert_allclose(loss("opt2"), every_pivot, rtol=1e-5)
    assert abs(every_pivot - sg_bert_ntxent_loss_opt2(cls, pooled, temperature)) > 1e-4
    np.testing.assert_allclose(
        loss("base"), sg_bert_ntxent_loss_original(cls, pooled, temperature), rtol=1e-5)
    # One pivot layer: L^opt3 is L^opt2 (the paper's k runs over one layer).
    np.testing.assert_allclose(loss("opt3"), loss("opt2"), rtol=1e-6)


def test_one_pivot_variants_refuse_several_layers():
    vectors = np.ones((4, 1 + 3, 8), "float32")
    for variant in ("opt2", "opt1", "base"):
        with pytest.raises(ValueError, match=f"variant='{variant}'.*one pivot"):
            kcse.losses.SelfGuidedLoss(variant=variant)(None, vectors)
    with pytest.raises(ValueError, match="variant must be one of opt3, opt2, opt1, base"):
        kcse.losses.SelfGuidedLoss(variant="opt4")


def test_temperature_001_stays_finite_and_matches():
    # τ = 0.01 puts logits near 100: the reference is computed in log space.
    vectors = np.random.default_rng(1).normal(size=(4, 1 + 3, 8)).astype("float32")
    v = vectors.astype("float64") / np.linalg.norm(vectors, axis=-1, keepdims=True)
    logits = np.einsum("id,mnd->imn", v[:, 0], v[:, 1:]) / 0.01
    expected = []
    for i in range(4):
        others = np.delete(logits[i], i, axis=0).reshape(-1)
        for k in range(3):
            both = np.append(others, logits[i, i, k])
            top = both.max()
            expected.append(top + np.log(np.exp(both - top).sum()) - logits[i, i, k])
    loss = kcse.losses.SelfGuidedLoss(0.01)(None, vectors)
    np.testing.assert_allclose(float(loss), np.mean(expected), rtol=1e-5)


def test_bad_input_and_config():
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        kcse.losses.SelfGuidedLoss(0)
    with pytest.raises(ValueError, match="1 \\+ layers"):
        kcse.losses.SelfGuidedLoss()(None, np.ones((4, 1, 8), "float32"))
    restored = kcse.losses.SelfGuidedLoss.from_config(
        kcse.losses.SelfGuidedLoss(0.02, "opt1").get_config()
    )
    assert (restored.temperature, restored.variant) == (0.02, "opt1")
