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


def test_scores_every_n_steps_or_once_per_epoch_logs_and_restores_the_best_weights():
    """Two evaluators on one fit: every 2 steps (restoring the best
    weights at the end), and once per epoch (no every_n_steps)."""
    simcse = make_simcse()
    evaluator = kcse.evaluation.STSEvaluator(
        simcse.encoder, DEV, every_n_steps=2, restore_best_weights=True
    )
    per_epoch = kcse.evaluation.STSEvaluator(simcse.encoder, DEV, name="dev")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        history = simcse.fit(
            SENTENCES * 2, batch_size=2, epochs=2, callbacks=[evaluator, per_epoch],
            verbose=1,
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
    # Once per epoch: before training and at each epoch's end, the same
    # weights the every-2-steps evaluator scored there.
    assert [step for _, step, _ in per_epoch.history] == [0, 6, 12]
    assert len(history.history["dev_spearman"]) == 2
    np.testing.assert_allclose([score for _, _, score in per_epoch.history],
                               [scores[0], scores[3], scores[6]], atol=1e-6)
