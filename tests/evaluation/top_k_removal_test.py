"""ConSERT's top-k removal curve against a numpy transcription of its
analysis script (tests/anisotropy_reference.py)."""

import keras
import numpy as np
import pytest

import anisotropy_reference as reference
import kcse
from conftest import TINY_PAIRS as PAIRS
from conftest import tiny_bert
from conftest import tiny_preprocessor
from kcse.evaluation import top_k_removal


def last_states(encoder, sentences, layers=1):
    """Per sentence: (pooled layer at full length, token ids, mask), numpy."""
    features = {
        key: keras.ops.convert_to_numpy(value)
        for key, value in encoder.preprocessor(sentences).items()
    }
    states = encoder.hidden_states(features)["hidden_states"]
    pooled = keras.ops.convert_to_numpy(states[-1]).astype("float64")
    if layers == 2:
        pooled = (pooled + keras.ops.convert_to_numpy(states[-2])) / 2
    return pooled, features["token_ids"], features["padding_mask"].astype(bool)


@pytest.mark.parametrize("pooling", ["last_avg", "last2avg"])
def test_top_k_removal_curve_equals_brute_force(pooling, monkeypatch):
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="cls")
    sentences1, sentences2, gold = PAIRS
    counts = kcse.evaluation.token_frequencies(encoder.preprocessor, sentences1 + sentences2)
    ks = (0, 1, 2, 3, 5, 8, 100)
    monkeypatch.setattr(top_k_removal, "PAIR_CHUNK", 2)  # pairs in 3 chunks
    curve = kcse.evaluation.top_k_removal_curve(
        encoder, sentences1, sentences2, gold, counts, ks=ks, pooling=pooling, batch_size=3
    )
    states, ids, mask = last_states(
        encoder, sentences1 + sentences2, layers=2 if pooling == "last2avg" else 1
    )
    expected = reference.removal_curve(states, ids, mask, gold, counts, ks, len(gold))
    ranking = reference.frequency_ranking(counts)
    assert [point["k"] for point in curve] == list(ks)
    for point, value in zip(curve, expected):
        assert point["removed_token_ids"] == ranking[: point["k"]]
        if value is None:
            assert point["spearman"] is None
        else:
            np.testing.assert_allclose(point["spearman"], value, atol=1e-5)
    # [CLS] and [SEP] (one each per sentence) are among the 3 most frequent.
    assert set(curve[3]["removed_token_ids"]) >= {2, 3}
    # k beyond the vocabulary: every token removed, zero vectors, no correlation.
    assert curve[-1]["spearman"] is None
    assert curve[-1]["emptied_sentences"] == 2 * len(gold)
    assert curve[0]["emptied_sentences"] == 0


def test_top_k_removal_curve_at_zero_is_last_layer_average_pooling():
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    counts = np.ones(40)
    [point] = kcse.evaluation.top_k_removal_curve(encoder, *PAIRS, counts, ks=0)
    assert point["spearman"] == pytest.approx(
        kcse.evaluation.evaluate_sts(encoder, PAIRS)["spearman"], abs=1e-5
    )


def test_top_k_removal_curve_rejects_bad_input():
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    counts = np.ones(40)
    with pytest.raises(ValueError, match="differ in length"):
        kcse.evaluation.top_k_removal_curve(encoder, ["a", "b"], ["c"], [1, 2], counts)
    with pytest.raises(ValueError, match="all equal"):
        kcse.evaluation.top_k_removal_curve(encoder, ["a", "b"], ["c", "d"], [1, 1], counts)
    with pytest.raises(ValueError, match="ks"):
        kcse.evaluation.top_k_removal_curve(encoder, *PAIRS, counts, ks=(0, -1))
    with pytest.raises(ValueError, match="pooling"):
        kcse.evaluation.top_k_removal_curve(encoder, *PAIRS, counts, pooling="max")
    with pytest.raises(ValueError, match="non-negative"):
        kcse.evaluation.top_k_removal_curve(encoder, *PAIRS, np.full(40, np.nan))
    with pytest.raises(TypeError, match="SentenceEncoder"):
        kcse.evaluation.top_k_removal_curve(object(), *PAIRS, counts)
    bare = kcse.SentenceEncoder(tiny_bert(), None, pooling="last_avg")
    with pytest.raises(ValueError, match="no preprocessor"):
        kcse.evaluation.top_k_removal_curve(bare, *PAIRS, counts)
