import numpy as np
import pytest

import kcse


def cosent_reference(labels, pairs, scale):
    """Su Jianlin's CoSENT, written out pair by pair in float64."""
    u = pairs[:, 0].astype("float64")
    v = pairs[:, 1].astype("float64")
    cosines = (u * v).sum(1) / np.linalg.norm(u, axis=1) / np.linalg.norm(v, axis=1)
    terms = [0.0]
    for i in range(len(labels)):
        for j in range(len(labels)):
            if labels[i] > labels[j]:
                terms.append(scale * (cosines[j] - cosines[i]))
    return np.log(np.sum(np.exp(terms)))


@pytest.mark.parametrize("scale", [1.0, 20.0])
def test_equals_reference(scale):
    rng = np.random.default_rng(0)
    pairs = rng.normal(size=(10, 2, 16)).astype("float32")
    labels = rng.integers(0, 6, size=10).astype("float32")
    loss = kcse.losses.CoSENT(scale)(labels, pairs)
    np.testing.assert_allclose(float(loss), cosent_reference(labels, pairs, scale), atol=1e-5)


def test_ranking_by_label_lowers_the_loss():
    base = np.random.default_rng(1).normal(size=(4, 8)).astype("float32")
    noise = np.random.default_rng(2).normal(size=(4, 8)).astype("float32")
    labels = np.array([3.0, 2.0, 1.0, 0.0])
    # Pair i: base and base + i·noise, so cosines fall as i grows.
    ordered = np.stack([base, base + np.arange(4)[:, None] * noise], axis=1)
    reversed_labels = labels[::-1].copy()
    loss = kcse.losses.CoSENT()
    assert float(loss(labels, ordered)) < float(loss(reversed_labels, ordered))
    # Equal labels give no ranking term: log(1 + 0) = 0.
    np.testing.assert_allclose(float(loss(np.ones(4), ordered)), 0.0, atol=1e-7)


def test_every_pair_reports_the_batch_loss():
    pairs = np.random.default_rng(3).normal(size=(5, 2, 8)).astype("float32")
    labels = np.arange(5, dtype="float32")
    per_pair = kcse.losses.CoSENT(reduction="none")(labels, pairs)
    np.testing.assert_allclose(
        np.asarray(per_pair), np.full(5, cosent_reference(labels, pairs, 20.0)), atol=1e-5
    )


def test_bad_arguments_and_config():
    with pytest.raises(ValueError, match="scale must be a finite number > 0"):
        kcse.losses.CoSENT(scale=0)
    with pytest.raises(ValueError, match=r"shape \(batch, 2, dim\)"):
        kcse.losses.CoSENT()(np.ones(4), np.ones((4, 3, 8), "float32"))
    restored = kcse.losses.CoSENT.from_config(kcse.losses.CoSENT(10.0).get_config())
    assert restored.scale == 10.0
