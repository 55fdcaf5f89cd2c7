"""The anisotropy report: each part equal to the diagnostic it runs, JSON throughout."""

import json

import pytest

import kcse
from conftest import TINY_PAIRS as PAIRS
from conftest import tiny_bert
from conftest import tiny_preprocessor


def test_anisotropy_report_matches_the_functions_and_is_json():
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    ks = (0, 1, 4)
    report = kcse.evaluation.anisotropy_report(encoder, PAIRS, ks=ks, bins=(0, 4, 100), k=2)
    assert json.loads(json.dumps(report)) == report
    sentences = PAIRS[0] + PAIRS[1]
    counts = kcse.evaluation.token_frequencies(encoder.preprocessor, sentences)
    curve = kcse.evaluation.top_k_removal_curve(encoder, *PAIRS, counts, ks=ks)
    for got, expected in zip(report["top_k_removal"], curve):
        assert got["removed_token_ids"] == expected["removed_token_ids"]
        assert got["emptied_sentences"] == expected["emptied_sentences"]
        assert got["spearman"] == pytest.approx(expected["spearman"], abs=1e-5)
    words = kcse.evaluation.token_frequencies(
        encoder.preprocessor, sentences, special_tokens=False
    )
    statistics = kcse.evaluation.embedding_statistics_by_frequency(
        encoder.backbone, words, bins=(0, 4, 100), k=2, neighbors="ranked"
    )
    assert report["token_embeddings"] == statistics
    geometry = kcse.evaluation.alignment_uniformity(encoder, PAIRS)
    for key, value in geometry.items():
        assert report["alignment_uniformity"][key] == pytest.approx(value, rel=1e-5)
    assert report["frequency_corpus"] == {
        "sentences": 10,
        "tokens": int(counts.sum()),
        "distinct_tokens": int((counts > 0).sum()),
    }
