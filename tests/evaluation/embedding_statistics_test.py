"""BERT-flow's table (norm and k-NN distance by frequency rank) against a
brute-force numpy transcription (tests/anisotropy_reference.py)."""

import json

import keras
import numpy as np
import pytest

import anisotropy_reference as reference
import kcse
from conftest import tiny_bert
from kcse.evaluation import embedding_statistics


def random_counts(size, seed=0):
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 6, size=size)  # many ties, some never seen
    return counts


@pytest.mark.parametrize("neighbors", ["vocabulary", "ranked"])
@pytest.mark.parametrize("k", [1, 3])
def test_embedding_statistics_equal_brute_force(neighbors, k, monkeypatch):
    table = np.random.default_rng(3).normal(size=(120, 6))
    table[7] = table[9]  # an identical row is a neighbour at distance 0
    counts = random_counts(120)
    counts[7] = counts[9] = 9
    bins = (0, 3, 10, 40, 1000, 2000)  # the last bin is empty
    expected = reference.embedding_statistics(table, counts, bins, k, neighbors)
    # Small blocks, so that queries and pool span several of them.
    monkeypatch.setattr(embedding_statistics, "QUERY_CHUNK", 7)
    monkeypatch.setattr(embedding_statistics, "POOL_CHUNK", 11)
    result = kcse.evaluation.embedding_statistics_by_frequency(
        table, counts, bins=bins, k=k, neighbors=neighbors
    )
    assert result["ranked_tokens"] == int((counts > 0).sum())
    assert result["pool_size"] == (120 if neighbors == "vocabulary" else int((counts > 0).sum()))
    for got, (tokens, norm, knn) in zip(result["bins"], expected):
        assert got["tokens"] == tokens
        if tokens == 0:
            assert got["mean_norm"] is None and got["mean_knn_distance"] is None
        else:
            np.testing.assert_allclose(got["mean_norm"], norm, rtol=1e-10)
            np.testing.assert_allclose(got["mean_knn_distance"], knn, rtol=1e-10)
    assert result["bins"][-1] == {
        "ranks": [1000, 2000], "tokens": 0, "mean_norm": None, "mean_knn_distance": None
    }
    json.dumps(result)


def test_embedding_statistics_read_a_backbone_table_like_the_array():
    backbone = tiny_bert(vocabulary_size=40)
    table = keras.ops.convert_to_numpy(backbone.token_embedding.embeddings)
    counts = random_counts(40, seed=1)
    from_backbone = kcse.evaluation.embedding_statistics_by_frequency(
        backbone, counts, bins=(0, 5, 100), k=2
    )
    expected = reference.embedding_statistics(table, counts, (0, 5, 100), 2)
    for got, (tokens, norm, knn) in zip(from_backbone["bins"], expected):
        assert got["tokens"] == tokens
        np.testing.assert_allclose(got["mean_norm"], norm, rtol=1e-5)
        np.testing.assert_allclose(got["mean_knn_distance"], knn, rtol=1e-5)


def test_embedding_statistics_k_against_the_pool_size():
    table = np.random.default_rng(0).normal(size=(6, 5))
    counts = {0: 3, 4: 2, 5: 1}  # a mapping works as well as an array
    result = kcse.evaluation.embedding_statistics_by_frequency(
        table, counts, bins=(0, 10), k=2, neighbors="ranked"
    )
    expected = reference.embedding_statistics(table, [3, 0, 0, 0, 2, 1], (0, 10), 2, "ranked")
    np.testing.assert_allclose(result["bins"][0]["mean_knn_distance"], expected[0][2], rtol=1e-10)
    with pytest.raises(ValueError, match="k=3 neighbours need at least 4 rows"):
        kcse.evaluation.embedding_statistics_by_frequency(
            table, counts, bins=(0, 10), k=3, neighbors="ranked"
        )
    with pytest.raises(ValueError, match="k=6 neighbours need at least 7 rows"):
        kcse.evaluation.embedding_statistics_by_frequency(table, counts, k=6)


def test_embedding_statistics_reject_bad_input():
    table = np.random.default_rng(0).normal(size=(6, 5))
    counts = np.ones(6)
    with pytest.raises(ValueError, match="non-finite"):
        kcse.evaluation.embedding_statistics_by_frequency(
            np.where(table > 1, np.nan, table), counts, k=1)
    with pytest.raises(ValueError, match="beyond the embedding table"):
        kcse.evaluation.embedding_statistics_by_frequency(table, np.ones(7), k=1)
    with pytest.raises(ValueError, match="non-negative"):
        kcse.evaluation.embedding_statistics_by_frequency(table, -counts, k=1)
    with pytest.raises(ValueError, match="increasing"):
        kcse.evaluation.embedding_statistics_by_frequency(table, counts, bins=(0, 5, 5), k=1)
    with pytest.raises(ValueError, match="neighbors"):
        kcse.evaluation.embedding_statistics_by_frequency(table, counts, neighbors="all")
    with pytest.raises(ValueError, match="2-D"):
        kcse.evaluation.embedding_statistics_by_frequency(table[0], counts, k=1)
