"""All-but-the-top against a numpy transcription of the paper's Algorithm 1
(tests/all_but_the_top_reference.py: Mu & Viswanath, ICLR 2018)."""

import numpy as np
import pytest

from all_but_the_top_reference import paper_all_but_the_top
from kcse.layers.all_but_the_top import all_but_the_top
from kcse.layers.all_but_the_top import all_but_the_top_statistics
from kcse.layers.all_but_the_top import default_directions


def anisotropic(rows, dim, seed):
    """Vectors with a common mean and a few dominating directions, as the
    paper finds in word (and BERT) representations."""
    rng = np.random.default_rng(seed)
    scales = np.concatenate([[20.0, 10.0, 5.0], np.ones(dim - 3)])
    return rng.normal(size=(rows, dim)) * scales @ np.linalg.qr(
        rng.normal(size=(dim, dim)))[0] + rng.normal(size=dim) * 4


@pytest.mark.parametrize("directions", [1, 2, 3])
def test_all_but_the_top_equals_the_papers_algorithm_1(directions):
    fit, vectors = anisotropic(400, 16, 0), anisotropic(50, 16, 1)
    mean, top = all_but_the_top_statistics(fit, directions)
    assert top.shape == (directions, 16)
    expected = paper_all_but_the_top(fit, vectors, directions)
    np.testing.assert_allclose(all_but_the_top(vectors, mean, top), expected,
                               rtol=1e-9, atol=1e-9)
    # Fitted on the vectors it processes, as the paper's algorithm is.
    np.testing.assert_allclose(all_but_the_top(fit, mean, top),
                               paper_all_but_the_top(fit, fit, directions),
                               rtol=1e-9, atol=1e-9)


def test_the_default_is_the_papers_dim_over_100_at_least_one():
    assert [default_directions(dim) for dim in (8, 99, 150, 300, 384, 768, 1024)] == [
        1, 1, 2, 3, 4, 8, 10]
    fit = anisotropic(200, 8, 2)
    _, top = all_but_the_top_statistics(fit)
    assert top.shape == (1, 8)


@pytest.mark.parametrize("directions", [0, 9])
def test_a_number_of_directions_outside_1_to_dim_is_refused(directions):
    with pytest.raises(ValueError, match=f"1 to 8 directions.*got {directions}"):
        all_but_the_top_statistics(anisotropic(100, 8, 3), directions)
