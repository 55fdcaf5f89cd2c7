"""SimCSE's MLM head against the head princeton-nlp/SimCSE runs.

Reference: their `BertForCL` (`simcse/models.py`, transcribed in
tests/princeton_simcse_reference.py) built by transformers' `from_pretrained`
from a BERT checkpoint, its `lm_head` (HF's own `BertLMPredictionHead`) then
loaded as their `train.py` loads it; nothing of kcse's weights goes into
it. Weights go the other way, from HF's head into kcse's.
"""

import keras
import numpy as np
import torch
from torch import nn

from kcse.objectives.masked_lm import masked_lm_head
from kcse.objectives.masked_lm import masked_lm_loss
from princeton_simcse_reference import bert_for_cl
from princeton_simcse_reference import load_pretrained_lm_head
from princeton_simcse_reference import prediction_scores


def load_hf_head(head, lm_head):
    """Sets kcse's `head` to the weights of transformers' `lm_head` (torch's
    Linear weight is the Keras kernel transposed)."""

    def array(parameter):
        return parameter.detach().numpy()

    transform = lm_head.transform
    head._intermediate_dense.set_weights(
        [array(transform.dense.weight).T, array(transform.dense.bias)])
    head._intermediate_layer_norm.set_weights(
        [array(transform.LayerNorm.weight), array(transform.LayerNorm.bias)])
    head._kernel.assign(array(lm_head.decoder.weight).T)
    head._bias.assign(array(lm_head.bias))


def embedding_layer(vocabulary_size, width):
    """A built `keras.layers.Embedding` with a normal(0, 1) table."""
    embedding = keras.layers.Embedding(vocabulary_size, width)
    embedding.build()
    embedding.embeddings.assign(
        np.random.default_rng(1).normal(size=(vocabulary_size, width)))
    return embedding


def test_train_py_runs_the_pretrained_head_untied(tmp_path):
    """The reference's premise, as transformers runs their code:
    `from_pretrained` fills the encoder but draws `lm_head` anew (the
    checkpoint names it `cls.predictions.*`); `train.py` then loads the
    pretrained head into it, its decoder a copy of the token embedding
    that is not the embedding."""
    model, info, checkpoint = bert_for_cl(tmp_path, vocabulary_size=40, hidden_size=8)
    assert "lm_head.transform.dense.weight" in info["missing_keys"]
    assert "cls.predictions.transform.dense.weight" in info["unexpected_keys"]
    embedding = model.bert.embeddings.word_embeddings.weight
    assert torch.equal(embedding, checkpoint.bert.embeddings.word_embeddings.weight)
    pretrained = checkpoint.cls.predictions
    lm_head = model.lm_head
    assert not torch.equal(lm_head.transform.dense.weight, pretrained.transform.dense.weight)
    load_pretrained_lm_head(model, tmp_path)
    assert torch.equal(lm_head.transform.dense.weight, pretrained.transform.dense.weight)
    assert torch.equal(lm_head.bias, pretrained.bias) and lm_head.bias.abs().max() > 0.1
    assert torch.equal(lm_head.decoder.weight, embedding)
    with torch.no_grad():
        lm_head.decoder.weight.add_(1.0)
    assert torch.equal(embedding, checkpoint.bert.embeddings.word_embeddings.weight)


def test_head_is_hf_bert_lm_prediction_head(tmp_path):
    """With the weights of the head `train.py` runs, kcse's head gives its
    `prediction_scores` (within 1e-5) and `masked_lm_loss` gives
    `cl_forward`'s `CrossEntropyLoss()` over the labels with -100 at the
    unchosen positions."""
    model, _, _ = bert_for_cl(tmp_path, vocabulary_size=40, hidden_size=8)
    load_pretrained_lm_head(model, tmp_path)
    head = masked_lm_head(embedding_layer(40, 8))
    load_hf_head(head, model.lm_head)
    rng = np.random.default_rng(0)
    states = rng.normal(size=(3, 6, 8)).astype("float32")
    expected = prediction_scores(model.lm_head, states).numpy()
    logits = np.asarray(head(states, mask_positions=np.tile(np.arange(6), (3, 1))))
    np.testing.assert_allclose(logits, expected, atol=1e-5)

    token_ids = rng.integers(0, 40, size=(3, 6))
    chosen = rng.random((3, 6)) < 0.4
    assert 2 < chosen.sum() < 18
    labels = torch.from_numpy(np.where(chosen, token_ids, -100))
    expected_loss = nn.CrossEntropyLoss()(
        torch.from_numpy(expected).view(-1, 40), labels.view(-1))
    loss = masked_lm_loss(head, states, token_ids, chosen)
    np.testing.assert_allclose(float(loss), float(expected_loss), atol=1e-5)


def test_head_starts_untied_with_a_new_transform(tmp_path):
    """kcse's new head: the decoder a copy of the token embedding, as
    `train.py`'s (a variable of its own: writing it leaves the table); the
    transform and biases, which `train.py` loads from the checkpoint and
    kcse's backbones do not carry, drawn as transformers draws `BertForCL`'s
    `lm_head` (`_init_weights`): the kernel normal(0, `initializer_range`
    0.02), untruncated; biases zero; LayerNorm at one and zero. Standard
    deviations within 4.5 standard errors, kcse's and transformers' alike."""
    vocabulary, hidden = 2000, 64
    keras.utils.set_random_seed(0)
    embedding = embedding_layer(vocabulary, hidden)
    table = np.array(embedding.embeddings)
    head = masked_lm_head(embedding)
    np.testing.assert_array_equal(np.array(head._kernel), table.T)
    head._kernel.assign(np.zeros((hidden, vocabulary)))
    np.testing.assert_array_equal(np.array(embedding.embeddings), table)

    model, _, _ = bert_for_cl(tmp_path, vocabulary_size=vocabulary, hidden_size=hidden)
    lm_head = model.lm_head  # As `from_pretrained` draws it.
    dense_kernel, dense_bias = (np.asarray(w) for w in head._intermediate_dense.weights)
    gamma, beta = (np.asarray(w) for w in head._intermediate_layer_norm.weights)

    def drawn_as_bert(kernel):
        kernel = np.asarray(kernel, "float64").ravel()
        error = 0.02 / np.sqrt(2 * kernel.size)
        tails = np.mean(np.abs(kernel) > 0.04)  # 4.55% beyond 2σ untruncated.
        tails_error = np.sqrt(0.0455 * 0.9545 / kernel.size)
        return (abs(kernel.std() - 0.02) < 4.5 * error
                and abs(kernel.mean()) < 4.5 * 0.02 / np.sqrt(kernel.size)
                and abs(tails - 0.0455) < 4.5 * tails_error)

    theirs = lm_head.transform.dense.weight.detach().numpy()
    assert dense_kernel.shape == theirs.T.shape
    assert drawn_as_bert(dense_kernel) and drawn_as_bert(theirs)
    for ours, theirs in [(dense_bias, lm_head.transform.dense.bias),
                         (gamma, lm_head.transform.LayerNorm.weight),
                         (beta, lm_head.transform.LayerNorm.bias),
                         (head._bias, lm_head.bias)]:
        np.testing.assert_array_equal(ours, theirs.detach().numpy())
    assert (dense_bias == 0).all() and (gamma == 1).all() and (np.asarray(head._bias) == 0).all()
