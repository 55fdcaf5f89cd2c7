"""BERT-flow's table: token embeddings' norm and k-NN distance by frequency rank.

Li et al. (2020), Section 2.2; Table 1 of arXiv 2011.05864v1 (ConSERT's
slides repeat it): high frequency tokens lie near the origin and close
together, rare ones far and sparse. bohanli/BERT-flow releases no code for
its table: the definition here is the paper's.
"""

import numbers

import keras
import numpy as np
from keras import ops

from kcse.evaluation.token_counts import as_counts
from kcse.evaluation.token_counts import ranked_ids
from kcse.foundation.validation import check_count

# BERT-flow's rank bins: [0, 100), [100, 500), [500, 5K), [5K, 1000K).
BERT_FLOW_BINS = (0, 100, 500, 5000, 1_000_000)
NEIGHBOR_POOLS = ("vocabulary", "ranked")
# Query tokens and pool rows per block of the k-NN search: a block of
# distances is QUERY_CHUNK x POOL_CHUNK float32 (16 MB).
QUERY_CHUNK = 256
POOL_CHUNK = 16384
# Nearest candidates per token kept from the float32 search beyond k; their
# distances are then recomputed exactly, in float64.
CANDIDATE_MARGIN = 8


def embedding_statistics_by_frequency(
    embedding_matrix,
    frequencies,
    bins=BERT_FLOW_BINS,
    k=3,
    neighbors="vocabulary",
):
    """Mean norm and k-NN distance of token embeddings, by frequency rank.

    BERT-flow's table (Li et al., 2020, Section 2.2; Table 1 of arXiv
    2011.05864v1; ConSERT's slides repeat it): tokens are ranked by
    frequency (rank 0 the most frequent), the ranks cut into bins
    `[bins[i], bins[i+1])` (BERT-flow's: 0-100, 100-500, 500-5K, 5K-1000K,
    `BERT_FLOW_BINS`), and per bin are given the mean L2 norm of the
    tokens' embeddings and the mean, over the bin's tokens, of the mean L2
    distance from a token's embedding to its `k` nearest neighbours (the
    token itself excluded, by id: a different token with an identical row
    is a neighbour at distance 0). BERT-flow ranks by Wikipedia frequency
    and searches neighbours "among all the word embeddings"; it released no
    code for the table, so these definitions are the paper's.

    Here only tokens that occur (`frequencies > 0`) are ranked, most
    frequent first, ties by smaller id; tokens ranked at or beyond
    `bins[-1]` are in no bin. `neighbors="vocabulary"` (BERT-flow's
    definition) searches every row of the table; `"ranked"` only the
    ranked tokens (cheaper for a 250k-row table, but a different quantity:
    distances grow when neighbours are fewer). The search is blocked
    (`QUERY_CHUNK` tokens x `POOL_CHUNK` rows at a time, in float32), and
    the `k + CANDIDATE_MARGIN` nearest candidates of each token are then
    measured exactly in float64; memory stays a few tens of MB whatever
    the vocabulary. Cost: (ranked tokens) x (pool rows) x dim multiply-adds
    (BERT's 30k table: seconds; multilingual-e5-small's 250k rows with
    "vocabulary": tens of seconds on 2 CPU cores).

    Args:
        embedding_matrix: the token-embedding table, a `(vocabulary, dim)`
            array; or a backbone or `keras.layers.Embedding`, whose rows are
            then read a block at a time through the embedding layer
            (dequantized where it is quantized), never the whole table.
        frequencies: counts per token id (an array, as `token_frequencies`
            gives, or a mapping `{id: count}`); ids beyond the table must
            count 0.
        bins: increasing non-negative ints, the rank bin edges (at least 2).
        k: int >= 1. Neighbours per token.
        neighbors: `"vocabulary"` or `"ranked"` (above).

    Returns:
        A dict: `"k"`, `"neighbors"`, `"pool_size"` (rows searched),
        `"ranked_tokens"` (tokens with a count), and `"bins"`, a list of
        `{"ranks": [low, high], "tokens": n, "mean_norm": float,
        "mean_knn_distance": float}`, the two means None for a bin with no
        token.

    Raises:
        ValueError: the table is not 2-D or has a non-finite value; a
            frequency is negative, non-finite, or counts an id beyond the
            table; bad `bins` or `neighbors`; `k` is not below the number of
            rows searched (a token needs `k` others).
        TypeError: `k` is not an int.

    Example:
    ```python
    import numpy as np
    import kcse

    table = np.random.default_rng(0).normal(size=(50, 8))
    counts = np.arange(50)[::-1]  # token 0 the most frequent, 49 never seen
    statistics = kcse.evaluation.embedding_statistics_by_frequency(
        table, counts, bins=(0, 10, 20, 100), k=3)
    [b["tokens"] for b in statistics["bins"]]  # [10, 10, 29]
    round(statistics["bins"][0]["mean_norm"], 2)  # e.g. 2.8
    ```
    """
    k = check_count(k, "k")
    if neighbors not in NEIGHBOR_POOLS:
        raise ValueError(f"neighbors must be one of {NEIGHBOR_POOLS}; got {neighbors!r}.")
    bins = _check_bins(bins)
    rows, vocabulary, dim = _row_reader(embedding_matrix)
    counts = as_counts(frequencies, "frequencies")
    if len(counts) > vocabulary and np.any(counts[vocabulary:] > 0):
        raise ValueError(
            f"frequencies count token ids up to {np.flatnonzero(counts > 0).max()}, "
            f"beyond the embedding table's {vocabulary} rows."
        )
    counts = counts[:vocabulary]
    ranked = ranked_ids(counts)
    in_bins = ranked[bins[0] : bins[-1]]
    pool_ids = np.arange(vocabulary) if neighbors == "vocabulary" else ranked
    if len(in_bins) and k >= len(pool_ids):
        raise ValueError(
            f"k={k} neighbours need at least {k + 1} rows to search; the "
            f"{neighbors!r} pool has {len(pool_ids)}."
        )
    norms, distances = _norms_and_knn_distances(rows, in_bins, pool_ids, k, dim)
    statistics = []
    for low, high in zip(bins[:-1], bins[1:]):
        selected = slice(
            min(low - bins[0], len(in_bins)), min(high - bins[0], len(in_bins))
        )
        count = selected.stop - selected.start
        statistics.append(
            {
                "ranks": [int(low), int(high)],
                "tokens": int(count),
                "mean_norm": float(norms[selected].mean()) if count else None,
                "mean_knn_distance": float(distances[selected].mean()) if count else None,
            }
        )
    return {
        "k": k,
        "neighbors": neighbors,
        "pool_size": int(len(pool_ids)),
        "ranked_tokens": int(len(ranked)),
        "bins": statistics,
    }


def _check_bins(bins):
    edges = list(bins)
    if len(edges) < 2 or any(
        isinstance(edge, bool) or not isinstance(edge, numbers.Integral) for edge in edges
    ):
        raise ValueError(f"bins must be at least 2 ints (rank edges); got {bins!r}.")
    edges = [int(edge) for edge in edges]
    if edges[0] < 0 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"bins must be non-negative and increasing; got {bins!r}.")
    return edges


def token_embedding_layer(backbone):
    from kcse.models.embedding_lookup import token_embedding

    layer = token_embedding(backbone)
    if layer is None:
        raise ValueError(f"{type(backbone).__name__} has no token-embedding layer.")
    return layer


def _row_reader(embeddings):
    """`(rows, vocabulary, dim)`: a function of ids -> float64 rows."""
    if isinstance(embeddings, keras.Model):
        embeddings = token_embedding_layer(embeddings)
    if isinstance(embeddings, keras.layers.Embedding):
        layer = embeddings

        def rows(ids):
            ids = np.asarray(ids, "int32")
            found = ops.convert_to_numpy(layer(ids)).astype("float64")
            if not np.all(np.isfinite(found)):
                raise ValueError("The embedding table has non-finite values.")
            return found

        return rows, int(layer.input_dim), int(layer.output_dim)
    table = np.asarray(embeddings)
    if table.ndim != 2:
        raise ValueError(f"embedding_matrix must be 2-D; got shape {table.shape}.")
    if not np.all(np.isfinite(table)):
        raise ValueError("embedding_matrix has non-finite values (NaN or infinite).")

    def rows(ids):
        return table[np.asarray(ids, "int64")].astype("float64")

    return rows, table.shape[0], table.shape[1]


def _norms_and_knn_distances(rows, query_ids, pool_ids, k, dim):
    """Each query row's L2 norm and mean L2 distance to its k nearest pool rows.

    The query's own id is excluded. The pool is read once, `POOL_CHUNK`
    rows at a time; against each block, `QUERY_CHUNK` queries at a time,
    float32 squared distances update the `k + CANDIDATE_MARGIN` best
    candidates of every query, which are then measured exactly in float64.
    """
    count = len(query_ids)
    norms = np.zeros(count)
    if count == 0:
        return norms, np.zeros(0)
    queries = np.zeros((count, dim), "float32")
    for start in range(0, count, QUERY_CHUNK):
        found = rows(query_ids[start : start + QUERY_CHUNK])
        norms[start : start + len(found)] = np.linalg.norm(found, axis=1)
        queries[start : start + len(found)] = found
    query_squares = (queries.astype("float64") ** 2).sum(axis=1).astype("float32")
    width = min(k + CANDIDATE_MARGIN, len(pool_ids) - 1)
    best_distance = np.full((count, width), np.inf, "float32")
    best_index = np.full((count, width), -1, "int64")
    for pool_start in range(0, len(pool_ids), POOL_CHUNK):
        block_ids = pool_ids[pool_start : pool_start + POOL_CHUNK]
        block = rows(block_ids).astype("float32")
        squares = (block.astype("float64") ** 2).sum(axis=1).astype("float32")
        for start in range(0, count, QUERY_CHUNK):
            chunk = slice(start, min(start + QUERY_CHUNK, count))
            distances = query_squares[chunk, None] + squares[None, :] - 2.0 * (
                queries[chunk] @ block.T
            )
            distances[block_ids[None, :] == query_ids[chunk, None]] = np.inf
            distances = np.concatenate([best_distance[chunk], distances], axis=1)
            indices = np.concatenate(
                [
                    best_index[chunk],
                    np.broadcast_to(block_ids, (distances.shape[0], len(block_ids))),
                ],
                axis=1,
            )
            keep = np.argpartition(distances, width - 1, axis=1)[:, :width]
            best_distance[chunk] = np.take_along_axis(distances, keep, axis=1)
            best_index[chunk] = np.take_along_axis(indices, keep, axis=1)
    mean_distances = np.zeros(count)
    for start in range(0, count, QUERY_CHUNK):
        chunk = slice(start, min(start + QUERY_CHUNK, count))
        indices = best_index[chunk]
        candidates = rows(np.maximum(indices, 0).reshape(-1)).reshape(indices.shape + (dim,))
        # From the float64 rows (the float32 copies would round).
        exact = np.linalg.norm(
            candidates - rows(query_ids[chunk])[:, None, :], axis=2
        )
        exact[(indices < 0) | (indices == query_ids[chunk, None])] = np.inf
        mean_distances[chunk] = np.sort(exact, axis=1)[:, :k].mean(axis=1)
    return norms, mean_distances
