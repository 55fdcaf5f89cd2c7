"""Training only the used token-embedding rows equals training the whole table.

The reference is Keras' own training of the whole table (the same
objective and optimizer with `separable_optimizer` answering no), step by
step: same losses, same weights, mid-fit and after.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import kcse
from conftest import TINY_PAIRS
from conftest import TINY_SENTENCES
from conftest import tiny_bert
from conftest import tiny_preprocessor
from kcse.foundation import compat
from kcse.objectives import encoder_objective

pytestmark = pytest.mark.usefixtures("unoptimised_tensorflow_graphs")

# The second fit's text holds tokens the first one's does not ("fast",
# "blue", "is"...): the trained rows are extended.
FIRST = TINY_SENTENCES[:4]
SECOND = TINY_SENTENCES[4:] + ["blue is fast", "a mat was slow"]


def table_of(encoder):
    return compat.embedding_table(encoder.backbone.token_embedding)


def simcse(encoder):
    return kcse.SimCSE(encoder)


def pairs(encoder):
    return kcse.objectives.PairObjective(encoder)


def consert(encoder):
    return kcse.ConSERT(encoder)


OBJECTIVES = {
    "simcse": (simcse, lambda texts: (texts, None)),
    "pairs": (pairs, lambda texts: ((texts, texts[::-1]), np.arange(len(texts)) % 3)),
    "consert": (consert, lambda texts: (texts, None)),
}
OPTIMIZERS = {
    "adam": lambda: keras.optimizers.Adam(1e-2),
    "sgd_momentum": lambda: keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
    "rmsprop": lambda: keras.optimizers.RMSprop(1e-2, momentum=0.5),
}


def train(objective_name, optimizer_name, whole_table, monkeypatch, record=None):
    """Two fits (the second with new tokens); returns losses, weights, objective."""
    make, samples = OBJECTIVES[objective_name]
    with monkeypatch.context() as patch:
        if whole_table:
            patch.setattr(encoder_objective, "separable_optimizer", lambda o: False)
        encoder = kcse.SentenceEncoder(
            tiny_bert(dropout=0.1), tiny_preprocessor(), pooling="last_avg"
        )
        objective = make(encoder)
        objective.compile(optimizer=OPTIMIZERS[optimizer_name]())
        keras.utils.set_random_seed(7)
        losses = []
        callbacks = [record(encoder)] if record else []
        for texts in (FIRST, SECOND):
            x, y = samples(texts)
            history = objective.fit(x, y, batch_size=2, epochs=1, verbose=0,
                                    callbacks=callbacks)
            losses += history.history["loss"]
    return np.array(losses), encoder.get_weights(), objective


@pytest.mark.parametrize(
    "objective_name, optimizer_name",
    [("simcse", "adam"), ("pairs", "rmsprop"), ("consert", "adam")],
)
def test_used_rows_training_equals_whole_table_training(
    objective_name, optimizer_name, monkeypatch
):
    rows_losses, rows_weights, objective = train(
        objective_name, optimizer_name, False, monkeypatch)
    losses, weights, _ = train(objective_name, optimizer_name, True, monkeypatch)
    np.testing.assert_allclose(rows_losses, losses, rtol=1e-6, atol=1e-7)
    for a, b in zip(rows_weights, weights):
        np.testing.assert_allclose(a, b, atol=1e-6)
    # The rows were trained apart: the used tokens only, extended by the
    # second fit, and the optimizer holds no state of the table's shape.
    table = table_of(objective.encoder)
    used = np.unique(tiny_preprocessor()(FIRST + SECOND)["token_ids"])
    np.testing.assert_array_equal(objective._embedding_rows.ids, used)
    assert tuple(objective.embedding_rows.shape) == (len(used), table.shape[1])
    assert all(tuple(v.shape) != tuple(table.shape) for v in objective.optimizer.variables)
    # The table trains as a whole again outside fit; the encoder's own
    # weights (what it saves) never include the copy.
    assert table.trainable
    assert not any("embedding_rows" in v.path for v in objective.encoder.weights)


def test_callbacks_see_the_current_table_after_every_step(monkeypatch):
    def record(seen):
        def recorder(encoder):
            return keras.callbacks.LambdaCallback(on_train_batch_end=lambda batch, logs: (
                seen.append(keras.ops.convert_to_numpy(table_of(encoder)).copy())))
        return recorder

    rows_seen, seen = [], []
    rows_losses, rows_weights, _ = train(
        "simcse", "sgd_momentum", False, monkeypatch, record(rows_seen))
    losses, weights, _ = train("simcse", "sgd_momentum", True, monkeypatch, record(seen))
    assert len(rows_seen) == len(seen) == 5  # 2 + 3 steps
    for a, b in zip(rows_seen + rows_weights, seen + weights):
        np.testing.assert_allclose(a, b, atol=1e-6)
    np.testing.assert_allclose(rows_losses, losses, rtol=1e-6, atol=1e-7)
    assert not np.allclose(seen[0], seen[-1])  # The table did train.


def test_an_evaluator_restoring_its_best_weights_keeps_them():
    encoder = kcse.SentenceEncoder(tiny_bert(dropout=0.1), tiny_preprocessor(),
                                   pooling="cls")
    objective = kcse.SimCSE(encoder)
    objective.compile(optimizer=keras.optimizers.Adam(1e-2))
    evaluator = kcse.evaluation.STSEvaluator(
        encoder, TINY_PAIRS, every_n_steps=1, restore_best_weights=True)
    objective.fit(TINY_SENTENCES, batch_size=4, epochs=2, verbose=0,
                  callbacks=[evaluator])
    for a, b in zip(encoder.get_weights(), evaluator.best_weights.arrays()):
        np.testing.assert_array_equal(a, b)


def test_separable_optimizers():
    from kcse.objectives.embedding_rows import separable_optimizer

    optimizers = keras.optimizers
    for optimizer in (optimizers.SGD(0.1, momentum=0.9), optimizers.Adam(), optimizers.Nadam(),
                      optimizers.Adamax(), optimizers.RMSprop(), optimizers.Adagrad(),
                      optimizers.Adadelta(), optimizers.Lion(), optimizers.AdamW(weight_decay=0)):
        assert separable_optimizer(optimizer), optimizer
    for optimizer in (optimizers.AdamW(), optimizers.Adam(weight_decay=0.01),
                      optimizers.Adam(use_ema=True), optimizers.Ftrl(),
                      optimizers.LossScaleOptimizer(optimizers.Adam())):
        assert not separable_optimizer(optimizer), optimizer


def test_weight_decay_trains_the_whole_table():
    # AdamW moves rows that get no gradient: only the whole table is exact.
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="cls")
    before = keras.ops.convert_to_numpy(table_of(encoder)).copy()
    objective = kcse.SimCSE(encoder)
    objective.compile(optimizer=keras.optimizers.AdamW(1e-2, weight_decay=0.5))
    objective.fit(FIRST, batch_size=2, epochs=1, verbose=0)
    assert objective._embedding_rows is None
    unused = np.setdiff1d(np.arange(before.shape[0]),
                          np.unique(tiny_preprocessor()(FIRST)["token_ids"]))
    after = keras.ops.convert_to_numpy(table_of(encoder))
    assert not np.allclose(after[unused], before[unused])


def test_a_dataset_after_text_extends_the_rows_to_the_whole_table(monkeypatch):
    def run(whole_table):
        with monkeypatch.context() as patch:
            if whole_table:
                patch.setattr(encoder_objective, "separable_optimizer", lambda o: False)
            encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(),
                                           pooling="last_avg")
            objective = kcse.SimCSE(encoder)
            objective.compile(optimizer=keras.optimizers.Adam(1e-2))
            objective.fit(FIRST, batch_size=2, epochs=1, verbose=0, shuffle=False)
            objective.fit(tf.data.Dataset.from_tensor_slices(SECOND).batch(3),
                          epochs=1, verbose=0)
            return encoder.get_weights(), objective

    rows_weights, objective = run(False)
    weights, _ = run(True)
    for a, b in zip(rows_weights, weights):
        np.testing.assert_allclose(a, b, atol=1e-6)
    assert len(objective._embedding_rows.ids) == table_of(objective.encoder).shape[0]


def test_mirrored_strategy_trains_the_used_rows_exactly(two_cpu_strategy, monkeypatch):
    def run(whole_table):
        with monkeypatch.context() as patch:
            if whole_table:
                patch.setattr(encoder_objective, "separable_optimizer", lambda o: False)
            with two_cpu_strategy.scope():
                encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(),
                                               pooling="last_avg")
                objective = kcse.SimCSE(encoder)
                objective.compile(optimizer=keras.optimizers.Adam(1e-2))
            for texts in (FIRST, SECOND):
                objective.fit(texts, batch_size=4, epochs=1, verbose=0, shuffle=False)
            return encoder.get_weights(), objective

    rows_weights, objective = run(False)
    weights, _ = run(True)
    assert objective._embedding_rows is not None
    for a, b in zip(rows_weights, weights):
        np.testing.assert_allclose(a, b, atol=1e-5)
