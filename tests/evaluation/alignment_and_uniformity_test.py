"""Alignment and uniformity against SsnL/align_uniform, transcribed in
tests/anisotropy_reference.py."""

import numpy as np
import pytest

import anisotropy_reference as reference
import kcse
from conftest import TINY_PAIRS as PAIRS
from conftest import tiny_bert
from conftest import tiny_preprocessor
from kcse.evaluation import alignment_and_uniformity


def random_vectors(rows, dim=5, seed=0):
    return np.random.default_rng(seed).normal(size=(rows, dim))


@pytest.mark.parametrize("alpha", [2, 1, 0.5])
def test_alignment_equals_align_loss(alpha):
    x, y = random_vectors(9), random_vectors(9, seed=1)
    np.testing.assert_allclose(
        kcse.evaluation.alignment(x, y, alpha=alpha),
        reference.align_loss(reference.normalize(x), reference.normalize(y), alpha),
        rtol=1e-10,
    )
    np.testing.assert_allclose(
        kcse.evaluation.alignment(x, y, alpha=alpha, normalize=False),
        reference.align_loss(x, y, alpha),
        rtol=1e-10,
    )


@pytest.mark.parametrize("t", [2, 0.5])
def test_uniformity_equals_uniform_loss_across_blocks(t, monkeypatch):
    x = random_vectors(31)
    expected = reference.uniform_loss(reference.normalize(x), t)
    np.testing.assert_allclose(kcse.evaluation.uniformity(x, t=t), expected, rtol=1e-10)
    monkeypatch.setattr(alignment_and_uniformity, "UNIFORMITY_CHUNK", 4)
    np.testing.assert_allclose(kcse.evaluation.uniformity(x, t=t), expected, rtol=1e-10)
    raw = 3 * x  # far apart: exp underflows without the running log-sum-exp
    np.testing.assert_allclose(
        kcse.evaluation.uniformity(raw, t=t, normalize=False),
        reference.uniform_loss(raw, t),
        rtol=1e-8,
    )


def test_uniformity_of_far_apart_raw_vectors_is_finite():
    x = np.array([[0.0, 0.0], [100.0, 0.0], [0.0, 100.0]])
    value = kcse.evaluation.uniformity(x, normalize=False)
    # log(mean(exp(-2 * [1e4, 1e4, 2e4]))) = -2e4 + log(2/3 + exp(-2e4)/3).
    np.testing.assert_allclose(value, -2e4 + np.log(2 / 3), rtol=1e-12)


def test_alignment_uniformity_uses_positives_above_the_threshold():
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="P3")
    result = kcse.evaluation.alignment_uniformity(encoder, PAIRS, threshold=3.5)
    first = encoder.encode(PAIRS[0])
    second = encoder.encode(PAIRS[1])
    positive = np.asarray(PAIRS[2]) > 3.5  # pairs 0 and 2
    assert result["positive_pairs"] == 2
    np.testing.assert_allclose(
        result["alignment"],
        reference.align_loss(
            reference.normalize(first[positive]), reference.normalize(second[positive])
        ),
        rtol=1e-5,
    )
    distinct = sorted(set(PAIRS[0] + PAIRS[1]))
    assert result["sentences"] == len(distinct)
    np.testing.assert_allclose(
        result["uniformity"],
        reference.uniform_loss(reference.normalize(encoder.encode(distinct))),
        rtol=1e-5,
    )
    from_vectors = kcse.evaluation.alignment_uniformity((first, second), PAIRS, threshold=3.5)
    assert from_vectors["alignment"] == pytest.approx(result["alignment"], rel=1e-5)
    assert from_vectors["sentences"] == 10
    none_positive = kcse.evaluation.alignment_uniformity((first, second), PAIRS, threshold=5)
    assert none_positive["alignment"] is None and none_positive["positive_pairs"] == 0


def test_alignment_and_uniformity_reject_bad_vectors():
    x = random_vectors(4)
    bad = x.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        kcse.evaluation.alignment(bad, x)
    with pytest.raises(ValueError, match="non-finite"):
        kcse.evaluation.uniformity(np.where(np.isnan(bad), np.inf, bad))
    with pytest.raises(ValueError, match="one shape"):
        kcse.evaluation.alignment(x, x[:3])
    with pytest.raises(ValueError, match="at least 2"):
        kcse.evaluation.uniformity(x[:1])
    with pytest.raises(ValueError, match="2-D"):
        kcse.evaluation.uniformity(x[0])
    with pytest.raises(ValueError, match="positive"):
        kcse.evaluation.uniformity(x, t=0)
    with pytest.raises(ValueError, match="one row per pair"):
        kcse.evaluation.alignment_uniformity((x, x), PAIRS)
