import numpy as np
import pytest
import scipy.stats

import kcse
from conftest import TINY_PAIRS as PAIRS
from conftest import tiny_bert
from conftest import tiny_preprocessor



def reference_spearman(gold, predicted):
    gold_ranks = scipy.stats.rankdata(gold)
    predicted_ranks = scipy.stats.rankdata(predicted)
    return 100 * np.corrcoef(gold_ranks, predicted_ranks)[0, 1]


def test_evaluate_sts_equals_an_independent_computation():
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="P3")
    result = kcse.evaluation.evaluate_sts(encoder, PAIRS, batch_size=2)
    a = encoder.predict(PAIRS[0], verbose=0).astype("float64")
    b = encoder.predict(PAIRS[1], verbose=0).astype("float64")
    cosine = np.diag(a @ b.T) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert result["n"] == 5
    np.testing.assert_allclose(
        result["spearman"], reference_spearman(PAIRS[2], cosine), atol=1e-6
    )
    np.testing.assert_allclose(
        result["pearson"], 100 * np.corrcoef(PAIRS[2], cosine)[0, 1], atol=1e-4
    )


def test_evaluate_sts_reads_a_path(tmp_path):
    path = tmp_path / "pairs.data"
    path.write_text(
        "\n".join(f"{a}\t{b}\t{s}" for a, b, s in zip(*PAIRS)), encoding="utf-8"
    )
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="P3")
    from_path = kcse.evaluation.evaluate_sts(encoder, path)
    from_tuple = kcse.evaluation.evaluate_sts(encoder, PAIRS)
    assert from_path == pytest.approx(from_tuple)


def test_bad_pairs():
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor())
    with pytest.raises(ValueError, match="differ in length"):
        kcse.evaluation.evaluate_sts(encoder, (["a"], ["b", "c"], [1.0]))
    with pytest.raises(ValueError, match="at least 2 pairs"):
        kcse.evaluation.evaluate_sts(encoder, (["a"], ["b"], [1.0]))
