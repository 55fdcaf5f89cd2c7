import json
import os
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import kcse
from authors_references import bojone_simcse_loss
from conftest import one_step
from conftest import tiny_preprocessor
from conftest import tiny_vocabulary
from princeton_simcse_reference import cl_forward_loss
from masked_lm_test import load_hf_head
from princeton_simcse_reference import bert_for_cl
from princeton_simcse_reference import cl_forward_mlm_loss
from princeton_simcse_reference import load_pretrained_lm_head
from princeton_simcse_reference import mlp_layer
from tiny_simcse import AUTHORS_LOSS
from tiny_simcse import SENTENCES
from tiny_simcse import eval_views
from tiny_simcse import make_simcse

pytestmark = pytest.mark.usefixtures("unoptimised_tensorflow_graphs")


def test_forward_gives_two_views_per_sentence():
    simcse = make_simcse()
    features = simcse.preprocessor(SENTENCES)
    views = simcse(features)
    assert views.shape == (8, 2, 8)
    # Without dropout both views are the encoder's output.
    expected = simcse.encoder(features)
    np.testing.assert_allclose(views[:, 0], expected, atol=1e-6)
    np.testing.assert_allclose(views[:, 1], expected, atol=1e-6)


def test_dropout_makes_views_differ_in_training_only():
    simcse = make_simcse(dropout=0.3)
    features = simcse.preprocessor(SENTENCES)
    train_views = np.asarray(simcse(features, training=True))
    assert np.abs(train_views[:, 0] - train_views[:, 1]).max() > 1e-3
    test_views = np.asarray(simcse(features, training=False))
    np.testing.assert_allclose(test_views[:, 0], test_views[:, 1], atol=1e-6)


def test_same_dropout_mask_gives_one_vector_for_both_views():
    """Gao et al. 2021, Table 3's "Fixed 0.1": dropout on, one mask for the
    pair, so the two views are one vector (and the loss that of identical
    views, bojone's formula, tests/authors_references.py), while a second
    pass with dropout differs."""
    simcse = make_simcse(dropout=0.3, same_dropout_mask=True)
    features = simcse.preprocessor(SENTENCES)
    views = np.asarray(simcse(features, training=True))
    np.testing.assert_array_equal(views[:, 0], views[:, 1])
    assert np.abs(views[:, 0] - np.asarray(simcse(features, training=True))[:, 0]).max() > 1e-3
    loss = float(simcse.objective(None, views, None))
    assert loss == pytest.approx(bojone_simcse_loss(views), rel=1e-5)
    assert kcse.SimCSE.from_config(simcse.get_config()).same_dropout_mask
    with pytest.raises(ValueError, match="takes no text views"):
        simcse({key: np.stack([value, value], 1) for key, value in features.items()},
               training=True)


@pytest.fixture(scope="module")
def initial_views():
    """`(weights, views)`: `make_simcse()`'s initial encoder weights and its
    `eval_views`, the vectors before any step of the tests that check one."""
    encoder = make_simcse().encoder
    return encoder.get_weights(), eval_views(encoder)


def views_of(initial_views, weights):
    """`eval_views` of an encoder with `weights`, which must be the initial ones."""
    initial, views = initial_views
    for a, b in zip(weights, initial, strict=True):
        np.testing.assert_array_equal(a, b)
    return views


def simcse_step(single_steps, negatives):
    """One SGD step of `make_simcse` on SENTENCES (`conftest.single_step`),
    taken once per module for each `negatives`."""
    return single_steps(
        negatives, lambda weights: make_simcse(weights, negatives), SENTENCES
    )


@pytest.mark.parametrize("negatives", ["both_views", "cross_view"])
def test_fit_loss_is_the_authors_loss_of_the_initial_model(negatives, single_steps,
                                                          initial_views):
    """Reference: the authors' losses transcribed to numpy in
    tests/authors_references.py: "both_views" bojone/SimCSE eval.py
    `simcse_loss` (2N × 2N cosines, diagonal masked), "cross_view"
    princeton-nlp/SimCSE simcse/models.py `cl_forward` (cos(z1, z2) / temp,
    CrossEntropyLoss with labels arange(N)). Independent: the authors' code,
    not kcse.losses.SimCSELoss; only the sentence vectors come from kcse."""
    before, loss, after = simcse_step(single_steps, negatives)
    expected = AUTHORS_LOSS[negatives](views_of(initial_views, before), 0.05)
    np.testing.assert_allclose(loss, expected, atol=1e-5)
    assert max(np.abs(a - b).max() for a, b in zip(after, before)) > 1e-3


@pytest.mark.parametrize("negatives", ["both_views", "cross_view"])
def test_two_text_views_are_the_positives(negatives):
    """`fit((views_a, views_b))`: each column is encoded once and the two
    views of a sentence are the positives. Reference: the authors' losses
    (tests/authors_references.py, as above) of the encoder's own vectors of
    the two columns; only the vectors come from kcse."""
    views_b = SENTENCES[1:] + SENTENCES[:1]
    simcse = make_simcse(negatives=negatives)
    first = simcse.encoder.predict(SENTENCES, verbose=0)
    second = simcse.encoder.predict(views_b, verbose=0)
    expected = AUTHORS_LOSS[negatives](np.stack([first, second], axis=1), 0.05)
    views = simcse(simcse.preprocess_samples((SENTENCES, views_b)))
    np.testing.assert_allclose(views[:, 0], first, atol=1e-5)
    np.testing.assert_allclose(views[:, 1], second, atol=1e-5)
    loss, _ = one_step(simcse, (SENTENCES, views_b))
    np.testing.assert_allclose(loss, expected, atol=1e-5)


def test_more_than_two_views_is_an_error():
    simcse = make_simcse()
    with pytest.raises(ValueError, match="two text views"):
        simcse.fit((SENTENCES, SENTENCES, SENTENCES), batch_size=4, verbose=0)


@pytest.mark.parametrize(
    "negatives,candidates", [("both_views", 2 * 8 - 1), ("cross_view", 8)]
)
def test_initial_loss_is_log_candidates_with_identical_views(
    negatives, candidates
):
    """Reference: ln(candidates), the value of the authors' losses when
    every vector is the same (bojone: 2N − 1 candidates per row, princeton:
    N): an analytic value, not kcse's loss class. A randomly initialised
    BERT maps every sentence's [CLS] to nearly the same vector, and without
    dropout both views are identical; the loss checked is the one `fit`
    reports."""
    simcse = make_simcse(negatives=negatives, pooling="cls")
    loss, _ = one_step(simcse, SENTENCES)
    np.testing.assert_allclose(loss, np.log(candidates), atol=0.01)


def test_fit_on_a_tf_data_dataset_of_strings_lowers_the_loss(initial_views):
    simcse = make_simcse(dropout=0.1)
    simcse.compile(optimizer=keras.optimizers.Adam(1e-3))
    dataset = tf.data.Dataset.from_tensor_slices(SENTENCES).batch(4)
    history = simcse.fit(dataset.repeat(10), epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    # Measured with bojone/SimCSE's loss (tests/authors_references.py).
    loss = bojone_simcse_loss(eval_views(simcse.encoder))
    initial = bojone_simcse_loss(initial_views[1])
    assert loss < initial


@pytest.mark.parametrize("negatives", ["both_views", "cross_view"])
def test_mirrored_strategy_step_equals_single_device_step(
    negatives, two_cpu_strategy, single_steps, initial_views
):
    weights, single_loss, single_weights = simcse_step(single_steps, negatives)
    with two_cpu_strategy.scope():
        mirrored = make_simcse(weights, negatives)
    mirrored_loss, mirrored_weights = one_step(mirrored, SENTENCES)
    np.testing.assert_allclose(mirrored_loss, single_loss, atol=1e-5)
    for a, b in zip(mirrored_weights, single_weights):
        np.testing.assert_allclose(a, b, atol=1e-5)

    # Negatives drawn per replica would give another loss: the test can fail.
    # (The authors' loss of each replica's half, tests/authors_references.py.)
    views = views_of(initial_views, weights)
    loss = AUTHORS_LOSS[negatives]
    local = (loss(views[:4], 0.05) + loss(views[4:], 0.05)) / 2
    assert abs(local - single_loss) > 1e-3


def test_mirrored_strategy_with_a_partial_last_batch(two_cpu_strategy):
    # Batches of 8 then 7: the last one splits 4 + 3 over the replicas. The
    # update equals the single-device one; the logged loss of that step is
    # Keras' replica-weighted average, so only the weights are compared.
    weights = make_simcse().encoder.get_weights()
    sentences = SENTENCES + SENTENCES[:7]
    _, single_weights = one_step(make_simcse(weights), sentences, batch_size=8)
    with two_cpu_strategy.scope():
        mirrored = make_simcse(weights)
    _, mirrored_weights = one_step(mirrored, sentences, batch_size=8)
    for a, b in zip(mirrored_weights, single_weights):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_mlp_only_train_loss_is_princeton_cl_forward_with_the_mlp():
    """Reference: princeton-nlp/SimCSE `simcse/models.py` `cl_forward` with
    its `MLPLayer`, transcribed in torch (tests/princeton_simcse_reference.py),
    on the encoder's vectors and the objective's MLP weights before the
    step. P3 rather than the paper's P1: a random tiny BERT gives every
    sentence nearly the same [CLS], which would leave the loss ln N with or
    without the MLP; `cl_forward` applies the MLP to whatever is pooled.

    The trained encoder, the one a cell scores and `kcse train` saves, has
    the weights of an encoder built without the option and encodes without
    the MLP (princeton's "cls_before_pooler"): the objective's views are
    the MLP, Dense + tanh, of its vectors."""
    simcse = make_simcse(negatives="cross_view", mlp_only_train=True)
    kernel, bias = simcse.mlp.get_weights()
    views = eval_views(simcse.encoder)
    loss, _ = one_step(simcse, SENTENCES)
    expected = cl_forward_loss(views, 0.05, mlp_layer(kernel, bias))
    np.testing.assert_allclose(loss, expected, atol=1e-5)
    assert abs(cl_forward_loss(views, 0.05) - expected) > 1e-3  # The MLP counts.

    trained_kernel, trained_bias = simcse.mlp.get_weights()
    assert np.abs(trained_kernel - kernel).max() > 0  # The MLP trains too.
    plain = make_simcse().encoder
    assert [w.shape for w in simcse.encoder.weights] == [w.shape for w in plain.weights]
    vectors = simcse.encoder.predict(SENTENCES, verbose=0)
    assert np.abs(vectors - eval_views(plain)[:, 0]).max() > 1e-4  # Trained.
    trained_views = simcse(simcse.preprocessor(SENTENCES))
    np.testing.assert_allclose(
        trained_views[:, 0], np.tanh(vectors @ trained_kernel + trained_bias), atol=1e-5
    )


def fixed_masks(token_ids, padding_mask):
    """Masks chosen by position, not at random, in Keras ops (inside the
    train step) and numpy alike: every third real token that is not
    [CLS]/[SEP]/[UNK], [MASK] on even rows and the next id on odd ones."""
    from keras import ops

    shape = ops.shape(token_ids)
    rows = ops.expand_dims(ops.arange(shape[0]), 1)
    columns = ops.expand_dims(ops.arange(shape[1]), 0)
    chosen = ops.logical_and(ops.equal((rows + columns) % 3, 0), ops.cast(padding_mask, "bool"))
    chosen = ops.logical_and(chosen, ops.greater(token_ids, 4))  # Not [PAD]..[MASK].
    masked = ops.where(ops.equal(rows % 2, 0), 4, (token_ids + 1) % 40)
    return ops.where(chosen, masked, token_ids), chosen


def test_mlm_loss_is_princeton_cl_forward_with_its_mlm_branch(tmp_path):
    """The fit loss with `mlm_weight=0.1` on masks set by the test: the
    contrastive loss plus 0.1 × the MLM cross-entropy. Reference:
    princeton-nlp/SimCSE `cl_forward` (tests/princeton_simcse_reference.py)
    with the `lm_head` their `train.py` runs (transformers'
    `BertLMPredictionHead` of `BertForCL.from_pretrained`, loaded with a
    checkpoint's pretrained head; its weights loaded into the objective's
    head), on the encoder's states of the masked rows (both copies of each
    sentence, masked independently).

    The head is untied: its decoder starts as a copy of the token embedding
    and trains apart from it (in the step the columns of tokens the batch
    never uses change, their embedding rows do not)."""
    simcse = make_simcse(negatives="cross_view", mlm_weight=0.1)
    embedding = simcse.encoder.backbone.token_embedding.embeddings
    np.testing.assert_array_equal(np.array(simcse.mlm_head._kernel), np.array(embedding).T)
    simcse.mask_tokens = fixed_masks
    reference, _, _ = bert_for_cl(tmp_path, vocabulary_size=40, hidden_size=8)
    load_pretrained_lm_head(reference, tmp_path)
    load_hf_head(simcse.mlm_head, reference.lm_head)
    features = {k: np.asarray(v) for k, v in simcse.preprocessor(SENTENCES).items()}
    rows = {k: np.concatenate([v, v]) for k, v in features.items()}
    masked_ids, chosen = (np.asarray(a) for a in fixed_masks(rows["token_ids"], rows["padding_mask"]))
    assert 10 < chosen.sum() and (masked_ids != rows["token_ids"]).sum() == chosen.sum()
    states = simcse.encoder.backbone(dict(rows, token_ids=masked_ids))["sequence_output"]
    labels = np.where(chosen, rows["token_ids"], -100)
    mlm = cl_forward_mlm_loss(states, labels, reference.lm_head)
    contrastive = cl_forward_loss(eval_views(simcse.encoder), 0.05)
    table, decoder = np.array(embedding), np.array(simcse.mlm_head._kernel)
    loss, _ = one_step(simcse, SENTENCES)
    np.testing.assert_allclose(loss, contrastive + 0.1 * mlm, atol=1e-5)
    assert 0.1 * mlm > 1e-2  # The MLM term counts.
    unused = sorted(set(range(40)) - set(rows["token_ids"].flat) - set(masked_ids.flat))
    assert unused and np.abs(np.array(simcse.mlm_head._kernel) - decoder)[:, unused].min() > 0
    np.testing.assert_array_equal(np.array(embedding)[unused], table[unused])


def test_mlm_head_weights_round_trip(tmp_path):
    """The head's weights, the decoder among them, save with the objective's
    (`save_weights` of a built objective, e.g. after `fit`) and load into a
    new objective of the same settings. (`SimCSE.from_config` cannot rebuild
    MLM: the encoder's config leaves out its preprocessor,
    `test_config_round_trip`.)"""
    trained, restored = (make_simcse(mlm_weight=0.1, seed=1) for _ in range(2))
    for simcse in (trained, restored):
        simcse(simcse.preprocessor(SENTENCES[:2]))  # Built.
    trained.mlm_head._kernel.assign(np.random.default_rng(0).normal(size=(8, 40)))
    path = tmp_path / "simcse.weights.h5"
    trained.save_weights(path)
    kernels = [np.array(simcse.mlm_head._kernel) for simcse in (restored, trained)]
    assert np.abs(kernels[0] - kernels[1]).max() > 0.1
    restored.load_weights(path)
    for a, b in zip(restored.mlm_head.weights, trained.mlm_head.weights):
        np.testing.assert_array_equal(np.array(a), np.array(b))


def test_mlm_masks_follow_princetons_collator():
    """Reference: princeton-nlp/SimCSE `train.py` `mask_tokens`: tokens of
    transformers' `get_special_tokens_mask(..., already_has_special_tokens=
    True)` ([CLS], [SEP], [PAD], [UNK], [MASK], by HF's BertTokenizer of
    the same vocabulary) and padding are never chosen; the others with
    probability 0.15; of those 80% become [MASK], 10% a uniform draw
    from the vocabulary, 10% stay. Bounds: 4.5 standard deviations."""
    import transformers

    simcse = make_simcse(mlm_weight=0.1, seed=3)
    features = simcse.preprocessor((SENTENCES + ["the [UNK] cat"]) * 300)
    ids = np.array(features["token_ids"])
    ids[::7, 1] = 4  # A [MASK] in the text.
    vocabulary_file = pathlib.Path(__file__).parent / "_tiny_vocab.txt"
    try:
        vocabulary_file.write_text("\n".join(tiny_vocabulary()) + "\n")
        tokenizer = transformers.BertTokenizer(str(vocabulary_file))
    finally:
        vocabulary_file.unlink()
    special = np.array([tokenizer.get_special_tokens_mask(list(row), already_has_special_tokens=True)
                        for row in ids], bool)
    assert special[:, 0].all() and (ids == 1).any() and (ids == 4).any()
    masked, chosen = (np.asarray(a) for a in simcse.mask_tokens(ids, features["padding_mask"]))
    assert not (chosen & special).any()
    assert (masked[~chosen] == ids[~chosen]).all()
    candidates = int((~special).sum())

    def near(count, trials, rate):
        return abs(count - trials * rate) <= 4.5 * np.sqrt(trials * rate * (1 - rate))

    assert near(chosen.sum(), candidates, 0.15)
    n = int(chosen.sum())
    to_mask = (masked[chosen] == 4).sum()
    kept = (masked[chosen] == ids[chosen]).sum()
    assert near(to_mask, n, 0.8 + 0.1 / 40) and near(kept, n, 0.1 + 0.1 / 40)
    others = masked[chosen][(masked[chosen] != 4) & (masked[chosen] != ids[chosen])]
    assert near(len(others), n, 0.1 * 38 / 40) and others.min() >= 0 and others.max() < 40
    assert len(np.unique(others)) > 30  # From the whole vocabulary, special tokens too.
    assert (others < 5).any()


def test_config_round_trip():
    simcse = make_simcse(negatives="cross_view", mlp_only_train=True)
    restored = kcse.SimCSE.from_config(simcse.get_config())
    assert restored.negatives == "cross_view"
    assert restored.temperature == 0.05
    assert restored.mlp_only_train and restored.mlp is not None
    config = make_simcse(mlm_weight=0.1, seed=2).get_config()
    assert (config["mlm_weight"], config["mlm_probability"], config["seed"]) == (0.1, 0.15, 2)
    # An encoder's config leaves its preprocessor out, and MLM needs its [MASK].
    with pytest.raises(ValueError, match=r"preprocessor with a \[MASK\] token; it has none"):
        kcse.SimCSE.from_config(config)
    assert isinstance(restored.encoder, kcse.SentenceEncoder)


JAX_SCRIPT = pathlib.Path(__file__).parent / "simcse_jax_data_parallel.py"


def test_jax_data_parallel_step_equals_single_device_step():
    pytest.importorskip("jax")
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        XLA_FLAGS=f"{os.environ['XLA_FLAGS']} --xla_force_host_platform_device_count=2",
        PYTHONPATH=os.pathsep.join(
            [str(JAX_SCRIPT.parent), str(JAX_SCRIPT.parents[1])]
        ),
    )
    run = subprocess.run(
        [sys.executable, str(JAX_SCRIPT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["devices"] == 2
    assert result["loss_difference"] <= 1e-5
    assert result["weight_difference"] <= 1e-5
    assert result["weight_change"] > 1e-3


@pytest.mark.parametrize(
    "backbone_class",
    [kcse.models.NezhaBackbone, kcse.models.RoFormerBackbone],
)
def test_simcse_trains_relative_position_backbones_unchanged(backbone_class):
    keras.utils.set_random_seed(0)
    backbone = backbone_class(
        vocabulary_size=40,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        dropout=0.1,
    )
    encoder = kcse.SentenceEncoder(backbone, tiny_preprocessor(), pooling="P4")
    simcse = kcse.SimCSE(encoder)
    simcse.compile(optimizer=keras.optimizers.Adam(1e-3))
    before = encoder.get_weights()
    history = simcse.fit(SENTENCES, batch_size=4, epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))
    changed = [np.abs(a - b).max() > 0 for a, b in zip(encoder.get_weights(), before)]
    assert sum(changed) >= len(changed) - 2  # All but the unused pooler.
