import contextlib
import io

import keras
import numpy as np

import kcse
from conftest import TINY_PAIRS as DEV
from conftest import TINY_SENTENCES
from conftest import tiny_bert
from conftest import tiny_preprocessor

SENTENCES = TINY_SENTENCES[:6]


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
    # 6 steps per epoch: scored before training, at steps 2, 4, 6 (= epoch
    # end), 8, 10, 12.
    assert [step for _, step, _ in evaluator.history] == [0, 2, 4, 6, 8, 10, 12]
    assert [epoch for epoch, _, _ in evaluator.history] == [0, 0, 0, 0, 1, 1, 1]
    scores = [score for _, _, score in evaluator.history]
    assert history.history["val_spearman"] == [scores[3], scores[6]]
    assert "val_spearman" in out.getvalue()
    assert evaluator.best_spearman == max(scores)
    # The first step that scored best (ties keep the earlier one).
    assert evaluator.best_step == evaluator.history[scores.index(max(scores))][1]
    restored = kcse.evaluation.evaluate_sts(simcse.encoder, DEV)["spearman"]
    np.testing.assert_allclose(restored, max(scores), atol=1e-6)
    assert len(set(np.round(scores, 6))) > 1  # Training changed the scores.


def test_scores_once_per_epoch_without_every_n_steps():
    simcse = make_simcse()
    evaluator = kcse.evaluation.STSEvaluator(simcse.encoder, DEV, name="dev")
    history = simcse.fit(
        SENTENCES, batch_size=3, epochs=2, callbacks=[evaluator], verbose=0
    )
    assert [step for _, step, _ in evaluator.history] == [0, 2, 4]
    assert len(history.history["dev_spearman"]) == 2
