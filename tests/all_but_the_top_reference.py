"""A numpy transcription of Algorithm 1 of Mu & Viswanath (ICLR 2018),
"All-but-the-Top: Simple and Effective Postprocessing for Word
Representations", written here from the paper, not from kcse's code:

    Input: representations {v(w)}, a threshold D.
    1: μ ← mean of the v(w); ṽ(w) ← v(w) − μ
    2: u_1, ..., u_d ← PCA({ṽ(w)})
    3: v'(w) ← ṽ(w) − Σ_{i=1}^{D} (u_iᵀ v(w)) u_i

PCA by the singular value decomposition of the centred matrix (its right
singular vectors, by decreasing singular value). `fit` gives μ and the u_i;
the algorithm is applied to `vectors` (in the paper, the same set).
"""

import numpy as np


def paper_all_but_the_top(fit, vectors, D):
    fit = np.asarray(fit, "float64")
    mu = fit.mean(axis=0)
    _, _, components = np.linalg.svd(fit - mu, full_matrices=False)
    processed = []
    for v in np.asarray(vectors, "float64"):
        v_prime = v - mu
        for i in range(D):
            u = components[i]
            v_prime = v_prime - (u @ v) * u
        processed.append(v_prime)
    return np.array(processed)
