"""All-but-the-top (Mu & Viswanath, ICLR 2018): a post-processing that
removes the mean and the dominating directions of a set of vectors.

Algorithm 1 of "All-but-the-Top: Simple and Effective Postprocessing for
Word Representations": μ the mean of the vectors, u_1..u_D the top D
principal directions of the centred vectors, and each vector v becomes
`ṽ − Σ_i (u_iᵀ v) u_i` with `ṽ = v − μ` (the projections are of v itself,
as the paper writes them). D ≈ dim / 100 (`default_directions`). In
float64 with numpy, as BERT-whitening's statistics (`whitening.py`),
which give the mean and covariance.
"""

import numpy as np

from kcse.layers.whitening import whitening_statistics


def default_directions(dim):
    """The paper's D for `dim`-dimensional vectors: dim / 100, rounded, at least 1."""
    return max(1, round(dim / 100))


def all_but_the_top_statistics(vectors, directions=None):
    """`(mean, top)` of `vectors` (n, dim): their mean and their top
    `directions` principal directions as rows of `top` (directions, dim),
    the eigenvectors of their covariance of largest eigenvalue.
    `directions` defaults to `default_directions(dim)`.

    Raises:
        ValueError: `directions` is not between 1 and dim (and
            `whitening_statistics`' errors for vectors that are not finite).

    Example:
    ```python
    import numpy as np
    from kcse.layers.all_but_the_top import all_but_the_top
    from kcse.layers.all_but_the_top import all_but_the_top_statistics

    vectors = np.random.default_rng(0).normal(size=(500, 8)) + 3.0
    mean, top = all_but_the_top_statistics(vectors, directions=2)
    processed = all_but_the_top(vectors, mean, top)
    assert top.shape == (2, 8) and processed.shape == (500, 8)
    # The processed vectors have no component along the top directions
    # left but the mean's: (v - mean - (v @ top.T) @ top) @ top.T = -mean @ top.T.
    assert np.allclose(processed @ top.T, -mean @ top.T)
    ```
    """
    mean, covariance, _, _ = whitening_statistics(vectors)
    dim = len(mean)
    directions = default_directions(dim) if directions is None else directions
    if not 1 <= directions <= dim:
        raise ValueError(f"all-but-the-top removes 1 to {dim} directions of "
                         f"{dim}-dimensional vectors; got {directions}.")
    _, eigenvectors = np.linalg.eigh(covariance)  # Ascending eigenvalues.
    return mean, eigenvectors[:, ::-1][:, :directions].T


def all_but_the_top(vectors, mean, top):
    """`vectors` post-processed with `all_but_the_top_statistics`' `(mean,
    top)`: `v − mean − Σ_i (u_iᵀ v) u_i` in float64."""
    vectors = np.asarray(vectors, "float64")
    return vectors - mean - (vectors @ top.T) @ top
