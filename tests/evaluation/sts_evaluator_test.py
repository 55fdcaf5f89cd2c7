import contextlib
import io

import keras
import numpy as np

import kcse
from conftest import tiny_bert
from conftest import tiny_preprocessor

SENTENCES = [
    "the cat sat on the mat",
    "a dog ran fast",
    "the red dog was slow",
    "blue mat",
    "the cat is red",
    "a slow cat ran",
]
DEV = (
    ["the cat sat", "a dog ran", "the mat is red", "blue", "the dog was fast"],
    ["the cat sat on the mat", "a dog", "red mat", "the blue cat", "a slow dog"],
    [5.0, 3.0, 4.0, 0.5, 1.0],
)


def make_simcse():
    encoder = kcse.SentenceEncoder(
        tiny_bert(dropout=0.1), tiny_preprocessor(), pooling="P3"
    )
    simcse = kcse.SimCSE(encoder)
    simcse.compile(optimizer=keras.optimizers.Adam(0.05))
    return simcse


def test_scores_every_n_steps_logs_and_restores_the_best_weights():
    simcse = make_simcse()
    evaluator = kcse.evaluation.STSEvaluator(
        simcse.encoder, DEV, every_n_steps=2, restore_best_weights=True
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        history = simcse.fit(
            SENTENCES * 2, batch_size=2, epochs=2, callbacks=[evaluator], verbose=1
        )
    # 6 steps per epoch: scored at steps 2, 4, 6 (= epoch end), 8, 10, 12.
    assert [step for _, step, _ in evaluator.history] == [2, 4, 6, 8, 10, 12]
    assert [epoch for epoch, _, _ in evaluator.history] == [0, 0, 0, 1, 1, 1]
    scores = [score for _, _, score in evaluator.history]
    assert history.history["val_spearman"] == [scores[2], scores[5]]
    assert "val_spearman" in out.getvalue()
    assert evaluator.best_spearman == max(scores)
    restored = kcse.evaluation.evaluate_sts(simcse.encoder, DEV)["spearman"]
    np.testing.assert_allclose(restored, max(scores), atol=1e-6)
    assert len(set(np.round(scores, 6))) > 1  # Training changed the scores.


def test_scores_once_per_epoch_without_every_n_steps():
    simcse = make_simcse()
    evaluator = kcse.evaluation.STSEvaluator(simcse.encoder, DEV, name="dev")
    history = simcse.fit(
        SENTENCES, batch_size=3, epochs=2, callbacks=[evaluator], verbose=0
    )
    assert [step for _, step, _ in evaluator.history] == [2, 4]
    assert len(history.history["dev_spearman"]) == 2
