"""Every method on JAX where TensorFlow, tensorflow-text, jieba & co. cannot be imported.

One subprocess (`tests/tensorflow_free.run`, as on the GPU machine) runs
methods_without_tensorflow_worker.py: SimCSE, supervised SimCSE (with
princeton's MLP kept too; SimCSE with one dropout mask for both views), SBERT-NLI,
IS-BERT, CoSENT,
CLEAR's text views, ConSERT (every view, the adversarial one included; its
joint mode and its two stages with the NLI head), SG-OPT and Contrastive
Tension each fit a batch; P1-P4 and WK pooling, SG-OPT's layer × pooling
scores, IS-BERT's CNN and loss, whitening, BERT-flow and
the anisotropy diagnostics run; CLEAR's views of a Chinese sentence name
jieba's pip install. Its numbers are checked here against the
authors' formulas (tests/authors_references.py, sbert_wk_reference.py,
anisotropy_reference.py), and its adversarial view against the same model
on this process's backend (TensorFlow in the suite). Last, it takes
without_tensorflow_worker.py's three SimCSE steps, which equal those of that
script run on JAX with TensorFlow importable.
"""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import anisotropy_reference
import authors_references
import isbert_reference
import methods_without_tensorflow_worker as worker
import sbert_wk_reference
import tensorflow_free
from princeton_simcse_reference import mlp_output
from layer_pooling_reference import sentence_transformers_layer_scores
from sbert_reference import softmax_loss

WORKER = pathlib.Path(worker.__file__)
# Not imported here: it sets KERAS_BACKEND=jax for the process that imports it.
THREE_STEPS_WORKER = WORKER.parent / "without_tensorflow_worker.py"
METHODS = {
    "simcse", "supervised_simcse", "cosent", "clear", "consert_feature_span_cutoff",
    "consert_dropout_adversarial", "sg_opt", "contrastive_tension", "consert_stage_sup",
    "consert_stage_unsup_shuffle_token_cutoff", "supervised_simcse_keep_mlp", "sbert_nli",
    "is_bert", "simcse_same_dropout_mask",
}


@pytest.fixture(scope="module")
def jax_run():
    run = tensorflow_free.run([str(WORKER)])
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_every_method_trains_on_jax_without_tensorflow(jax_run):
    assert jax_run["backend"] == "jax" and not jax_run["tensorflow_imported"]
    assert set(jax_run["methods"]) == METHODS
    for name, result in jax_run["methods"].items():
        assert result["losses"] and np.all(np.isfinite(result["losses"])), name
        assert result["moved"] > 1e-5, name  # The step trained the encoder.


@pytest.mark.parametrize("name,reference", [
    # Dropout 0: SimCSE's two views of a sentence are the same vector.
    ("simcse", lambda v: authors_references.bojone_simcse_loss(np.stack([v[0], v[0]], 1))),
    ("clear", lambda v: authors_references.bojone_simcse_loss(np.stack(v, 1))),
    ("supervised_simcse", lambda v: authors_references.princeton_simcse_loss(np.stack(v, 1))),
    ("supervised_simcse_keep_mlp",
     lambda v: authors_references.princeton_simcse_loss(np.stack(v, 1))),
    ("cosent", lambda v: authors_references.bojone_cosent_loss(
        worker.SCORES[:4], np.stack(v, 1))),
])
def test_first_step_loss_equals_the_authors(jax_run, name, reference):
    """Reference: bojone/SimCSE, princeton-nlp/SimCSE and bojone/CoSENT
    (tests/authors_references.py) on the batch's vectors before the step."""
    result = jax_run["methods"][name]
    vectors = [np.asarray(column) for column in result["first_batch"]]
    assert result["losses"][0] == pytest.approx(reference(vectors), rel=1e-4)


def test_kept_mlp_is_princetons_on_cls(jax_run):
    """Reference: princeton-nlp/SimCSE `MLPLayer` (torch,
    tests/princeton_simcse_reference.py) of the [CLS] states, with the
    weights `keep_mlp` drew (normal(0, 0.02), zero bias): the vectors the
    first step trained on."""
    result = jax_run["methods"]["supervised_simcse_keep_mlp"]
    kernel, bias = (np.asarray(w) for w in result["mlp"])
    assert abs(kernel.std() - 0.02) < 0.006 and not bias.any()
    for cls, vectors in zip(result["cls"], result["first_batch"]):
        np.testing.assert_allclose(vectors, mlp_output(kernel, bias, cls), atol=1e-6)


def test_sbert_nli_first_loss_is_sentence_transformers_softmax_loss(jax_run):
    """Reference: sentence-transformers' `SoftmaxLoss` (tests/sbert_reference.py)
    on the first batch's vectors and the head's weights before the step."""
    result = jax_run["methods"]["sbert_nli"]
    kernel, bias = (np.asarray(w) for w in result["head"])
    u, v = (np.asarray(column) for column in result["first_batch"])
    expected = softmax_loss(u, v, worker.NLI_LABELS[:4], kernel, bias)
    assert result["losses"][0] == pytest.approx(expected, rel=1e-4)


def test_fixed_dropout_is_one_mask_for_both_views(jax_run):
    """Gao et al. 2021, Table 3's "Fixed 0.1": in training both views are one
    vector, a second pass's differ, and the loss is bojone's formula of
    those views (tests/authors_references.py)."""
    result = jax_run["methods"]["simcse_same_dropout_mask"]
    views, again = np.asarray(result["views"]), np.asarray(result["again"])
    np.testing.assert_array_equal(views[:, 0], views[:, 1])
    assert np.abs(views[:, 0] - again[:, 0]).max() > 1e-3
    assert result["view_loss"] == pytest.approx(authors_references.bojone_simcse_loss(views),
                                                rel=1e-5)


def test_is_bert_first_loss_is_the_authors(jax_run):
    """Reference: yanzhangnlp/IS-BERT's CNN.forward (each sentence alone),
    Pooling's mean and MutualInformationLoss.forward (tests/isbert_reference.py)
    on the first batch's last-layer states and the CNN the registry drew."""
    result = jax_run["methods"]["is_bert"]
    convolutions = [isbert_reference.conv_weights(*weights) for weights in result["cnn"]]
    assert [weight.shape[-1] for weight, _ in convolutions] == [1, 3, 5]
    local = isbert_reference.isbert_features_alone(result["states"], result["mask"],
                                                    convolutions)
    expected = isbert_reference.isbert_loss(
        local, isbert_reference.isbert_mean(local, result["mask"]), result["mask"])
    assert result["losses"][0] == pytest.approx(expected, rel=1e-4)


def test_layer_pooling_scores_equal_sentence_transformers_pooling(jax_run):
    """Reference: sentence-transformers' Pooling and scipy's Spearman
    (tests/layer_pooling_reference.py) on the worker's hidden states."""
    expected = sentence_transformers_layer_scores(
        jax_run["pair_states"], jax_run["pair_mask"], worker.SCORES)
    for mode, values in expected.items():
        ours = jax_run["layer_scores"][mode]
        assert len(ours) == len(values) == 7
        for mine, theirs in zip(ours, values):
            assert (mine is None) == (theirs is None)
            assert mine is None or mine == pytest.approx(theirs, abs=1e-4)


def test_isbert_cnn_and_loss_equal_the_authors(jax_run):
    """Reference: yanzhangnlp/IS-BERT's CNN.forward, Pooling's mean and
    MutualInformationLoss.forward (tests/isbert_reference.py) on the
    worker's last hidden states and convolution weights."""
    result = jax_run["isbert"]
    mask = np.asarray(jax_run["padding_mask"]).astype(bool)
    convolutions = [isbert_reference.conv_weights(*weights) for weights in result["weights"]]
    local = isbert_reference.isbert_cnn(jax_run["hidden_states"][-1], convolutions)
    np.testing.assert_allclose(result["local"], local.numpy(), atol=1e-5)
    expected = isbert_reference.isbert_loss(local, isbert_reference.isbert_mean(local, mask), mask)
    assert result["loss"] == pytest.approx(expected, rel=1e-5)


def test_poolings_equal_their_definitions(jax_run):
    """Reference: the SBERT-WK authors' `dissecting` (tests/sbert_wk_reference.py);
    P1, P3 and P4 as Su Jianlin's: the last layer's [CLS], its mean over real
    tokens, and the mean of that and of block 1's."""
    states = [np.asarray(s, "float64") for s in jax_run["hidden_states"]]
    mask = np.asarray(jax_run["padding_mask"])
    weights = mask[..., None] / mask.sum(axis=1)[:, None, None]
    expected = {
        "P1": states[-1][:, 0],
        "P3": (states[-1] * weights).sum(axis=1),
        "P4": ((states[1] + states[-1]) * weights).sum(axis=1) / 2,
        "wk": sbert_wk_reference.dissecting(np.stack(states, axis=1), mask),
    }
    for pooling, vectors in expected.items():
        np.testing.assert_allclose(jax_run[pooling], vectors, rtol=1e-4, atol=1e-5,
                                   err_msg=pooling)
    pooler = np.asarray(jax_run["P2"])
    assert pooler.shape == (8, 8) and np.all(np.abs(pooler) <= 1)  # tanh


def test_whitening_equals_bojone(jax_run):
    """Reference: bojone/BERT-whitening's `compute_kernel_bias` and cosines."""
    fit = np.asarray(jax_run["whitening_fit"])
    whitened = np.asarray(jax_run["whitened"], "float64")
    cosines, _ = authors_references.bojone_whitened_cosines(fit, fit[:8], fit[8:])
    a, b = whitened[:8], whitened[8:]
    got = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    np.testing.assert_allclose(got, cosines, atol=1e-4)


def test_bert_flow_fits_and_inverts(jax_run):
    before, after = jax_run["flow_nats_before_after"]
    assert np.isfinite(jax_run["flow_loss"]) and after < before
    assert jax_run["flow_round_trip"] < 1e-3


def test_anisotropy_diagnostics_equal_wang_and_isola(jax_run):
    """Reference: Wang & Isola's `align_loss` / `uniform_loss` on normalised
    vectors (tests/anisotropy_reference.py)."""
    fit = anisotropy_reference.normalize(jax_run["whitening_fit"])
    x, y = fit[:8], fit[8:]
    assert jax_run["alignment"] == pytest.approx(anisotropy_reference.align_loss(x, y), rel=1e-5)
    assert jax_run["uniformity"] == pytest.approx(anisotropy_reference.uniform_loss(x), rel=1e-5)


def test_adversarial_view_on_jax_equals_this_backend(jax_run):
    """The same ConSERT (fixed weights, no dropout) and batch here: the NLI
    loss's gradient w.r.t. the embedding output, the perturbed view and the
    joint loss equal JAX's (`jax.grad` there, `tf.GradientTape` on TensorFlow)."""
    here = worker.adversarial_step(worker.adversarial_consert())
    jax = jax_run["adversarial_step"]
    gradient = np.asarray(here["gradient"])
    assert np.abs(gradient).max() > 1e-4  # A gradient worth comparing.
    np.testing.assert_allclose(jax["gradient"], gradient, rtol=1e-3, atol=1e-4 * np.abs(gradient).max())
    np.testing.assert_allclose(jax["view"], here["view"], rtol=1e-4, atol=1e-5)
    assert jax["loss"] == pytest.approx(here["loss"], rel=1e-5)


def test_chinese_text_views_without_jieba_name_its_install(jax_run):
    assert jax_run["chinese_views_without_jieba"] == (
        "Segmenting Chinese sentences for CLEAR's text views needs jieba, which is not "
        "installed: pip install jieba")


@pytest.mark.large
def test_three_simcse_steps_without_tensorflow_equal_those_with_it(jax_run):
    """The three steps of without_tensorflow_worker.py: in the run above,
    and (the reference) in a JAX process where TensorFlow can be imported."""
    without = jax_run["three_simcse_steps"]
    run = subprocess.run([sys.executable, str(THREE_STEPS_WORKER)],
                         env=tensorflow_free.environment(KCSE_HIDDEN_PACKAGES=""),
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    normal = json.loads(run.stdout.strip().splitlines()[-1])
    assert not without["tensorflow_importable"] and not without["tensorflow_imported"]
    assert normal["tensorflow_importable"]
    assert without["vectors_dtype"] == "float32" and without["vectors_shape"] == [12, 16]
    assert len(without["step_losses"]) == 3 and np.all(np.isfinite(without["step_losses"]))
    assert without["weight_change"] > 1e-4  # The steps trained the encoder.
    # The same three steps in the environment with TensorFlow (Keras imports
    # it there): same batches, dropout and updates, up to float32 rounding.
    np.testing.assert_allclose(without["step_losses"], normal["step_losses"], atol=1e-5)
    for a, b in zip(without["weights_after"], normal["weights_after"]):
        np.testing.assert_allclose(a, b, atol=1e-5)
    assert without["spearman"] == pytest.approx(normal["spearman"], abs=1e-6)
    assert without["text_vectors_equal_token_vectors"] <= 1e-6
