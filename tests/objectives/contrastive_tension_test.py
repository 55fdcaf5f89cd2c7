import json
import os
import pathlib
import random
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import kcse
from kcse.foundation import compat
from contrastive_tension_reference import contrastive_tension_loss
from contrastive_tension_reference import fit_batches
from contrastive_tension_reference import generate_single_embedding
from contrastive_tension_reference import generate_training_samples
from conftest import TINY_SENTENCES as SENTENCES
from conftest import tiny_bert
from conftest import tiny_preprocessor
from kcse.objectives.contrastive_tension import contrastive_tension_pairs
from kcse.objectives.token_batches import DrawnPairBatches

pytestmark = pytest.mark.usefixtures("unoptimised_tensorflow_graphs")

NEGATIVES = 3  # K; a group is 1 positive + 3 negative pairs.
BATCH = 8  # Two groups per batch.


def make_ct(dropout_rate=0.1, learning_rate=0.05, **kwargs):
    """CT on a tiny BERT whose dropout layers have `dropout_rate`."""
    encoder = kcse.SentenceEncoder(
        tiny_bert(dropout=dropout_rate), tiny_preprocessor(), pooling="last_avg"
    )
    model = kcse.objectives.ContrastiveTension(encoder, negatives=NEGATIVES, **kwargs)
    model.compile(optimizer=keras.optimizers.SGD(learning_rate))
    return model


def authors_seed(seed):
    """The RandomState seed `pair_dataset` draws after `random.seed(seed)`."""
    return random.Random(seed).randrange(2**32)


def last_hidden_mean(backbone, preprocessor, sentences):
    """The authors' `generateSingleEmbedding` on `backbone`'s last layer."""
    features = preprocessor(sentences)
    states = backbone(features, training=False)["sequence_output"]
    return generate_single_embedding(np.asarray(states), np.asarray(features["padding_mask"]))


@pytest.mark.parametrize("groups,negatives,count", [(5, 7, 50), (3, 1, 2), (4, 3, 1000)])
def test_pairs_equal_the_authors_sampler(groups, negatives, count):
    """Reference: Training.py `generateTrainingSamples` + `_orderBatchSamples`
    (tests/contrastive_tension_reference.py) on the same RandomState."""
    first, second, labels = contrastive_tension_pairs(
        count, groups, negatives, np.random.RandomState(11)
    )
    inds_1, inds_2, expected_labels = generate_training_samples(
        np.random.RandomState(11), count, groups, negatives
    )
    np.testing.assert_array_equal(first, inds_1)
    np.testing.assert_array_equal(second, inds_2)
    np.testing.assert_array_equal(labels, expected_labels)
    positives = labels == 1
    np.testing.assert_array_equal(first[positives], second[positives])


def test_batches_of_two_epochs_equal_the_authors():
    """`fit`'s batches: each epoch's draws from the RandomState seeded by
    Python's `random`, cut into batches as ContrastivTensionModel.fit does."""
    model = make_ct()
    random.seed(5)
    dataset = model.pair_dataset(SENTENCES, batch_size=BATCH, steps_per_epoch=3)
    rng = np.random.RandomState(authors_seed(5))
    for _ in range(2):  # A new draw every epoch, from the same generator.
        expected = fit_batches(
            *generate_training_samples(rng, len(SENTENCES), 3 * BATCH // 4, NEGATIVES),
            batch_size=BATCH,
        )
        got = list(dataset)
        assert len(got) == len(expected) == 3
        for ((first, second), labels), (inds_1, inds_2, ref_labels) in zip(got, expected):
            assert [s.decode() for s in first.numpy()] == [SENTENCES[i] for i in inds_1]
            assert [s.decode() for s in second.numpy()] == [SENTENCES[i] for i in inds_2]
            np.testing.assert_array_equal(labels.numpy(), ref_labels)
    random.seed(5)  # The same seed: the same batches.
    again = model.pair_dataset(SENTENCES, batch_size=BATCH, steps_per_epoch=3)
    random.seed(5)
    same = model.pair_dataset(SENTENCES, batch_size=BATCH, steps_per_epoch=3)
    assert [b[0][0].numpy().tolist() for b in again] == [
        b[0][0].numpy().tolist() for b in same
    ]


def test_token_pair_batches_are_the_datasets_pairs_tokenised():
    """Without TensorFlow `fit` gathers the same draws (`pair_draws`) from
    token arrays (`DrawnPairBatches`): each batch is the tokens of the
    `tf.data` batch's strings, cut to the same padded length, a new draw
    every epoch, as the authors' (tests/contrastive_tension_reference.py)."""
    model = make_ct()
    random.seed(5)
    dataset = model.pair_dataset(SENTENCES, batch_size=BATCH, steps_per_epoch=3)
    random.seed(5)
    draw, rows = model.pair_draws(SENTENCES, batch_size=BATCH, steps_per_epoch=3)
    tokens = {key: np.asarray(value) for key, value in model.preprocessor(SENTENCES).items()}
    batches = DrawnPairBatches(tokens, draw, BATCH)
    assert rows == 3 * BATCH and len(batches) == 3
    rng = np.random.RandomState(authors_seed(5))
    for _ in range(2):
        expected = fit_batches(
            *generate_training_samples(rng, len(SENTENCES), 3 * BATCH // 4, NEGATIVES),
            batch_size=BATCH,
        )
        for index, ((first, second), labels) in enumerate(dataset):
            x, got_labels = batches[index]
            np.testing.assert_array_equal(got_labels, expected[index][2])
            np.testing.assert_array_equal(got_labels, labels.numpy())
            for column, texts in enumerate((first, second)):
                packed = model.preprocessor(texts)
                length = x["token_ids"].shape[-1]
                assert length % 8 == 0 and np.asarray(packed["padding_mask"])[:, length:].sum() == 0
                np.testing.assert_array_equal(
                    x["token_ids"][:, column], np.asarray(packed["token_ids"])[:, :length])
        batches.on_epoch_end()


@pytest.fixture(scope="module")
def first_step():
    """`make_ct()` and one step of its `fit` on the batch the authors draw
    after `random.seed(3)`: the model, `(initial encoder weights, vectors
    of both models before the step, the batch's labels)` and the step's
    loss, encoder and twin weights."""
    model = make_ct(dropout_rate=0.1)
    rng = np.random.RandomState(authors_seed(3))
    inds_1, inds_2, labels = fit_batches(
        *generate_training_samples(rng, len(SENTENCES), 2, NEGATIVES), batch_size=BATCH
    )[0]
    emb1 = last_hidden_mean(
        model.twin_encoder.backbone, model.preprocessor, [SENTENCES[i] for i in inds_1]
    )
    emb2 = last_hidden_mean(
        model.encoder.backbone, model.preprocessor, [SENTENCES[i] for i in inds_2]
    )
    before = (model.encoder.get_weights(), emb1, emb2, labels)
    random.seed(3)
    history = model.fit(SENTENCES, batch_size=BATCH, steps_per_epoch=1, verbose=0)
    after = (history.history["loss"][0], model.encoder.get_weights(),
             model.twin_encoder.get_weights())
    return model, before, after


def test_one_step_loss_equals_the_authors_on_both_models_vectors(first_step):
    """Reference: ContrastiveTensionModel.py (`generateSingleEmbedding`,
    `compareSents`, BinaryCrossentropy(from_logits=True)) and Training.py's
    batch, transcribed to float64 numpy. Model 1 (the twin) reads the first
    sentence of each pair, model 2 (the encoder) the second. The backbone
    has dropout 0.1, which CT turns off as the authors (`training=False`)."""
    model, (_, emb1, emb2, labels), (loss, _, _) = first_step
    expected = contrastive_tension_loss(emb1, emb2, labels)
    np.testing.assert_allclose(loss, expected, atol=1e-5)
    # The dropout rates are back once fit returns.
    rates = [
        layer.rate for layer in compat.sublayers(model.encoder.backbone)
        if isinstance(layer, keras.layers.Dropout)
    ]
    assert rates and all(rate == 0.1 for rate in rates)


def test_both_models_train_apart_from_one_start():
    model = make_ct(learning_rate=0.1)
    encoder_start = [np.array(w) for w in model.encoder.backbone.get_weights()]
    twin_start = [np.array(w) for w in model.twin_encoder.backbone.get_weights()]
    for a, b in zip(encoder_start, twin_start):
        np.testing.assert_array_equal(a, b)  # The same initial weights...
    # ...in other variables.
    assert not any(
        a is b for a in model.encoder.backbone.weights for b in model.twin_encoder.backbone.weights
    )
    random.seed(0)
    history = model.fit(SENTENCES, batch_size=BATCH, epochs=2, steps_per_epoch=2, verbose=0)
    assert len(history.history["loss"]) == 2
    encoder_end = model.encoder.backbone.get_weights()
    twin_end = model.twin_encoder.backbone.get_weights()
    moved = lambda end, start: max(np.abs(e - s).max() for e, s in zip(end, start))  # noqa: E731
    assert moved(encoder_end, encoder_start) > 1e-4
    assert moved(twin_end, twin_start) > 1e-4
    assert moved(encoder_end, twin_end) > 1e-4  # They differ after training.

    # Only the rows of the sentences' tokens (and [CLS], [SEP]) moved, in
    # both tables: the encoder's through kcse's trained rows, the twin's
    # as a whole table.
    used = sorted({
        int(i) for i in np.unique(np.asarray(model.preprocessor(SENTENCES)["token_ids"]))
    } - {0})
    unused = sorted(set(range(40)) - set(used))
    assert model._embedding_rows is not None
    for name, end, start in (
        ("encoder", encoder_end, encoder_start), ("twin", twin_end, twin_start)
    ):
        table_end, table_start = end[0], start[0]
        assert table_end.shape == (40, 8), name
        np.testing.assert_array_equal(table_end[unused], table_start[unused], err_msg=name)
        assert np.abs(table_end[used] - table_start[used]).max(axis=1).min() > 0, name


def test_rematerialize_gives_the_same_step(first_step):
    """The first step again with `rematerialize=True`, from the same weights."""
    _, (weights, _, _, _), (loss_a, enc_a, twin_a) = first_step
    model = make_ct(rematerialize=True)
    model.encoder.set_weights(weights)
    model.twin_encoder.set_weights(weights)
    random.seed(3)
    loss_b = model.fit(SENTENCES, batch_size=BATCH, steps_per_epoch=1,
                       verbose=0).history["loss"][0]
    enc_b, twin_b = model.encoder.get_weights(), model.twin_encoder.get_weights()
    np.testing.assert_allclose(loss_a, loss_b, atol=1e-6)
    for a, b in zip(enc_a + twin_a, enc_b + twin_b):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_nan_loss_stops_training():
    model = make_ct(learning_rate=1e30)
    random.seed(0)
    with pytest.raises(kcse.objectives.NonFiniteLossError):
        model.fit(SENTENCES, batch_size=BATCH, steps_per_epoch=4, epochs=2, verbose=0)


FREED = r"""
import gc, json, random, weakref
import keras
import tensorflow as tf
import kcse
from conftest import TINY_SENTENCES, tiny_bert, tiny_preprocessor

# As the unoptimised_tensorflow_graphs fixture: no Grappler for one step.
tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})

def train(encoder):
    model = kcse.objectives.ContrastiveTension(encoder, negatives=3)
    model.compile(optimizer=keras.optimizers.SGD(0.05))
    random.seed(0)
    model.fit(TINY_SENTENCES, batch_size=8, steps_per_epoch=1, verbose=0)
    return weakref.ref(model), weakref.ref(model.twin_encoder.backbone)

encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
objective, twin = train(encoder)
gc.collect()
print(json.dumps({"objective": objective() is None, "twin": twin() is None,
                  "encoded": encoder.encode(["the cat sat"]).shape[1]}))
"""


def run_script(script, backend):
    tests = pathlib.Path(__file__).resolve().parents[1]
    env = dict(
        os.environ,
        KERAS_BACKEND=backend,
        TF_CPP_MIN_LOG_LEVEL="3",
        PYTHONPATH=os.pathsep.join([str(tests), str(tests.parent)]),
    )
    run = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_the_twin_is_freed_with_the_objective():
    """Once the objective is dropped, the twin's weights go with it (the
    encoder lives on). In a fresh process: under pytest, a fit's traced
    step stays referenced for the test's duration (SimCSE's too)."""
    result = run_script(FREED, "tensorflow")
    assert result == {"objective": True, "twin": True, "encoded": 8}


def test_config_round_trip():
    model = make_ct(dropout=True)
    config = model.get_config()
    assert config["negatives"] == NEGATIVES and config["dropout"] is True
    restored = kcse.objectives.ContrastiveTension.from_config(config)
    assert restored.negatives == NEGATIVES and restored.dropout
    assert restored.twin_encoder.pooling == "last_avg"


def test_bad_input_raises():
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    with pytest.raises(ValueError, match="negatives"):
        kcse.objectives.ContrastiveTension(encoder, negatives=0)
    with pytest.raises(TypeError, match="negatives"):
        kcse.objectives.ContrastiveTension(encoder, negatives=2.0)
    model = make_ct()
    with pytest.raises(ValueError, match="multiple of 4"):
        model.fit(SENTENCES, batch_size=3, verbose=0)  # Smaller than a group.
    with pytest.raises(ValueError, match="multiple of 4"):
        model.fit(SENTENCES, batch_size=6, verbose=0)  # Not whole groups.
    with pytest.raises(ValueError, match="2 distinct sentences"):
        model.fit(["the cat sat"], batch_size=BATCH, verbose=0)
    with pytest.raises(ValueError, match="2 distinct sentences"):
        model.fit(["the cat sat"] * 5, batch_size=BATCH, verbose=0)
    with pytest.raises(ValueError, match="unlabelled"):
        model.fit(SENTENCES, np.ones(len(SENTENCES)), batch_size=BATCH, verbose=0)
    with pytest.raises(TypeError, match="in-memory list"):
        model.fit(tf.data.Dataset.from_tensor_slices(SENTENCES), verbose=0)
    with pytest.raises(TypeError, match=r"x\[1\]"):
        model.fit(["the cat", 3], batch_size=BATCH, verbose=0)
    with pytest.raises(ValueError, match="steps_per_epoch"):
        model.fit(SENTENCES, batch_size=BATCH, steps_per_epoch=0, verbose=0)
    whitening = kcse.layers.Whitening()
    whitening.adapt(np.random.default_rng(0).normal(size=(64, 8)).astype("float32"))
    whitened = kcse.SentenceEncoder(
        tiny_bert(), tiny_preprocessor(), pooling="last_avg", whitening=whitening
    )
    with pytest.raises(ValueError, match="whitening"):
        kcse.objectives.ContrastiveTension(whitened)


JAX_STEP = r"""
import json, random
import keras, numpy as np
import kcse
from conftest import TINY_SENTENCES, tiny_bert, tiny_preprocessor
assert keras.config.backend() == "jax"
encoder = kcse.SentenceEncoder(tiny_bert(dropout=0.1), tiny_preprocessor(), pooling="last_avg")
model = kcse.objectives.ContrastiveTension(encoder, negatives=3)
model.compile(optimizer=keras.optimizers.SGD(0.1))
before = [np.array(w) for w in encoder.get_weights()]
twin_before = [np.array(w) for w in model.twin_encoder.get_weights()]
random.seed(0)
history = model.fit(TINY_SENTENCES, batch_size=8, steps_per_epoch=1, verbose=0)
change = lambda a, b: float(max(np.abs(x - y).max() for x, y in zip(a, b)))
print(json.dumps({
    "loss": history.history["loss"][0],
    "encoder_change": change(encoder.get_weights(), before),
    "twin_change": change(model.twin_encoder.get_weights(), twin_before),
}))
"""


def test_jax_backend_runs_a_step():
    pytest.importorskip("jax")
    result = run_script(JAX_STEP, "jax")
    assert np.isfinite(result["loss"]) and result["loss"] > 0
    assert result["encoder_change"] > 1e-5 and result["twin_change"] > 1e-5
