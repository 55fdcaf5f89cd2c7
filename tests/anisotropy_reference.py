"""The anisotropy diagnostics transcribed to numpy: independent references.

kcse's anisotropy diagnostics (`kcse/evaluation/`: `token_counts`,
`embedding_statistics`, `top_k_removal`, `alignment_and_uniformity` and
the report, `anisotropy`) are checked against these, not against themselves.
Each function computes in float64, brute force (no blocking, no candidate
search), and uses nothing of kcse:

- SsnL/align_uniform, `align_uniform/__init__.py`: `align_loss`,
  `uniform_loss` (torch → numpy, line by line);
- BERT-flow (Li et al., 2020, Section 2.2 and its table "mean l2-norm, as
  well as their distance to their k-nearest neighbors (among all the word
  embeddings) ... segmented by ranges of word frequency rank"): no code was
  released for it, so this follows the paper's text;
- yym6472/ConSERT, `analysis_rep_space.py` (`compute_token_features`, the
  `sorted(..., reverse=True)` ranking, `filter_freq_rank_leq_than`) and
  `sentence_transformers/models/Pooling.py` (the masked mean with the
  token count clamped at 1e-9): the top-k removal curve, per k and per
  sentence, with scipy's Spearman.
"""

import numpy as np
import scipy.stats


def align_loss(x, y, alpha=2):
    """`(x - y).norm(p=2, dim=1).pow(alpha).mean()`."""
    x = np.asarray(x, "float64")
    y = np.asarray(y, "float64")
    return float(np.mean(np.power(np.sqrt(((x - y) ** 2).sum(axis=1)), alpha)))


def pdist(x):
    """`torch.pdist(x, p=2)`: distances of the pairs i < j, row-major order."""
    x = np.asarray(x, "float64")
    out = []
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            out.append(np.sqrt(((x[i] - x[j]) ** 2).sum()))
    return np.array(out)


def uniform_loss(x, t=2):
    """`torch.pdist(x, p=2).pow(2).mul(-t).exp().mean().log()`."""
    return float(np.log(np.exp(-t * pdist(x) ** 2).mean()))


def normalize(x):
    """`torch.nn.functional.normalize(x, dim=1)` (eps 1e-12), float64."""
    x = np.asarray(x, "float64")
    return x / np.maximum(np.sqrt((x * x).sum(axis=1, keepdims=True)), 1e-12)


def frequency_ranking(counts):
    """ConSERT's ranking: ids sorted by count, most frequent first.

    `sorted(token2feature_tuple, key=lambda item: item[1], reverse=True)`
    keeps the dict's order among equal counts; here ties go to the smaller
    id (the order kcse documents). Only ids with a count are ranked.
    """
    items = [(i, c) for i, c in enumerate(counts) if c > 0]
    items.sort(key=lambda item: (-item[1], item[0]))
    return [i for i, _ in items]


def embedding_statistics(table, counts, bins, k, neighbors="vocabulary"):
    """BERT-flow's table, brute force: per rank bin, mean norm and k-NN distance.

    For each ranked token in a bin: its L2 norm, and the mean of the `k`
    smallest L2 distances from it to the other rows (every row of the
    table for "vocabulary", the ranked tokens for "ranked"; itself excluded
    by id). Returns a list of `(tokens, mean_norm or None, mean_knn or None)`.
    """
    table = np.asarray(table, "float64")
    ranking = frequency_ranking(counts)
    pool = list(range(len(table))) if neighbors == "vocabulary" else ranking
    result = []
    for low, high in zip(bins[:-1], bins[1:]):
        ids = ranking[low:high]
        if not ids:
            result.append((0, None, None))
            continue
        norms, knn = [], []
        for i in ids:
            norms.append(np.sqrt((table[i] ** 2).sum()))
            distances = sorted(
                np.sqrt(((table[i] - table[j]) ** 2).sum()) for j in pool if j != i
            )
            knn.append(np.mean(distances[:k]))
        result.append((len(ids), float(np.mean(norms)), float(np.mean(knn))))
    return result


def removal_curve(last_states, token_ids, padding_mask, gold, counts, ks, half):
    """ConSERT's Table 1, brute force, on states already computed.

    `last_states[s]` is sentence s's `(length, dim)` pooled layer,
    `token_ids[s]` and `padding_mask[s]` its ids and mask; sentences
    `0..half-1` are the first sides, `half..` the second. Per k: the kept
    positions are real tokens whose rank is not below k (`token_valid` of
    `filter_freq_rank_leq_than`, with k = num + 1, and id 0 = padding read
    from the mask); the vector is their sum over max(count, 1e-9) (a zero
    vector when none is kept); the cosine is sklearn's (a zero vector's
    cosine is 0); Spearman by `scipy.stats.spearmanr`, ×100, None when
    the cosines are constant.
    """
    ranking = frequency_ranking(counts)
    rank = {token: r for r, token in enumerate(ranking)}
    curve = []
    for k in ks:
        vectors = []
        for states, ids, mask in zip(last_states, token_ids, padding_mask):
            total = np.zeros(states.shape[1])
            kept = 0
            for position in range(len(ids)):
                if not mask[position]:
                    continue
                token = int(ids[position])
                if token in rank and rank[token] < k:
                    continue
                total += states[position]
                kept += 1
            vectors.append(total / max(kept, 1e-9))
        vectors = np.array(vectors)
        a, b = normalize(vectors[:half]), normalize(vectors[half:])
        cosines = (a * b).sum(axis=1)
        if np.all(cosines == cosines[0]):
            curve.append(None)
        else:
            curve.append(100.0 * scipy.stats.spearmanr(gold, cosines)[0])
    return curve
