"""Tests for kcse.layers.adam_weight_decay against transcriptions of the
authors' optimizers: BERT-flow's (tests/bert_flow_reference.py, bohanli/
BERT-flow's optimization_bert_flow.py) and sentence-transformers' fit, which
ConSERT and SG-BERT train with (tests/sentence_transformers_reference.py)."""

import math

import keras
import numpy as np
import pytest

import bert_flow_reference
import sentence_transformers_reference as reference
from kcse.layers.adam_weight_decay import AdamWeightDecay
from kcse.layers.adam_weight_decay import WarmupLinear
from kcse.layers.adam_weight_decay import sentence_transformers_adamw


def test_optimizer_is_the_authors_adam_weight_decay():
    """Three steps equal optimization_bert_flow.py's (clip 1.0 of the
    authors' pair loss = clip 0.5 of kcse's mean, whose gradient is half)."""
    rng = np.random.default_rng(0)
    shapes = [(3, 4), (5,)]
    params = [rng.normal(size=s) for s in shapes]
    variables = [keras.Variable(p.astype("float32")) for p in params]
    optimizer = AdamWeightDecay()
    m = [np.zeros(s) for s in shapes]
    v = [np.zeros(s) for s in shapes]
    for scale in (3.0, 0.05, 1.0):  # the first clipped, the second not
        grads = [rng.normal(size=s) * scale for s in shapes]
        optimizer.apply_gradients(
            zip([g.astype("float32") for g in grads], variables)
        )
        params, m, v = bert_flow_reference.adam_weight_decay_step(
            params, [2 * g for g in grads], m, v, learning_rate=1e-3
        )
        for variable, param in zip(variables, params):
            np.testing.assert_allclose(np.asarray(variable), param, atol=1e-6)


# Keras' names of the variables whose Hugging Face names are these.
KERAS_NAMES = {"dense.weight": "kernel", "dense.bias": "bias",
               "LayerNorm.weight": "gamma", "LayerNorm.bias": "beta"}


@pytest.mark.parametrize(
    "script, beta_2, bias_correction, optimizer_params",
    [
        # yym6472/ConSERT main.py: optimizer_params={'lr': ..., 'eps': 1e-6,
        # 'correct_bias': False}.
        ("ConSERT", 0.999, False, {"eps": 1e-6, "correct_bias": False}),
        # galsang/SG-BERT training.py: {'lr': ..., 'correct_bias': True,
        # 'weight_decay': 0, 'betas': (0.9, 0.9)} (fit's groups set the decay).
        ("SG-BERT", 0.9, True, {"correct_bias": True, "betas": (0.9, 0.9)}),
    ],
)
def test_sentence_transformers_adamw_is_the_scripts_optimizer(
    script, beta_2, bias_correction, optimizer_params
):
    """Every step's learning rate and parameters equal those of
    sentence-transformers' fit with transformers' AdamW and WarmupLinear
    (tests/sentence_transformers_reference.py), with the scripts' warm-up
    ceil(samples * epochs / batch * 0.1) and a DataLoader's steps."""
    import torch

    samples, epochs, batch, learning_rate = 44, 2, 8, 1e-3
    loader_steps = len(torch.utils.data.DataLoader(range(samples), batch_size=batch))
    total = loader_steps * epochs  # 12
    warmup = math.ceil(samples * epochs / batch * 0.1)  # 2
    rng = np.random.default_rng(1)
    shapes = {"dense.weight": (3, 4), "dense.bias": (4,), "LayerNorm.weight": (4,),
              "LayerNorm.bias": (4,)}
    arrays = {name: rng.normal(size=shape) for name, shape in shapes.items()}
    gradients = [
        {name: rng.normal(size=shape) * scale for name, shape in shapes.items()}
        for scale in (3.0, 0.05, 1.0, 0.2) * (total // 4)  # some clipped, some not
    ]
    expected, expected_rates = reference.fit_steps(
        arrays, gradients, {"lr": learning_rate, **optimizer_params}, warmup, total)

    optimizer = sentence_transformers_adamw(
        learning_rate, samples, epochs, batch, beta_2=beta_2,
        bias_correction=bias_correction)
    variables = {name: keras.Variable(array.astype("float32"), name=KERAS_NAMES[name])
                 for name, array in arrays.items()}
    rates = []
    for step, after in zip(gradients, expected):
        rates.append(float(optimizer.learning_rate))
        optimizer.apply_gradients(
            [(step[name].astype("float32"), variables[name]) for name in shapes])
        for name, variable in variables.items():
            np.testing.assert_allclose(np.asarray(variable), after[name], atol=1e-5)
    np.testing.assert_allclose(rates, expected_rates, rtol=1e-5, atol=0)
    assert expected_rates[0] == 0 and max(expected_rates) == learning_rate


def test_warmup_linear_is_transformers_schedule():
    """WarmupLinear at every step, past the end too, equals
    transformers.get_linear_schedule_with_warmup's, and survives get_config."""
    import torch
    import transformers

    for warmup, total in ((0, 5), (3, 10), (1, 1), (4, 4)):
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2e-5)
        scheduler = transformers.get_linear_schedule_with_warmup(optimizer, warmup, total)
        expected = []
        for _ in range(total + 2):
            expected.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            scheduler.step()
        schedule = WarmupLinear.from_config(WarmupLinear(2e-5, warmup, total).get_config())
        computed = [float(schedule(step)) for step in range(total + 2)]
        np.testing.assert_allclose(computed, expected, rtol=1e-6, atol=1e-12)


def test_no_decay_names_are_sentence_transformers_on_bert():
    """The variables left undecayed in a Keras BERT are, by count and size,
    the ones sentence-transformers' no_decay names in Hugging Face's BERT of
    the same shape (every bias and LayerNorm weight)."""
    import transformers

    from conftest import tiny_bert

    backbone = tiny_bert()
    hugging_face = transformers.BertModel(transformers.BertConfig(
        vocab_size=40, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=16, max_position_embeddings=16))
    no_decay = ["bias", "LayerNorm.bias", "LayerNorm.weight"]

    def sizes(exempt):
        return sorted(p.numel() for n, p in hugging_face.named_parameters()
                      if any(nd in n for nd in no_decay) == exempt)

    optimizer = sentence_transformers_adamw(1e-5, samples=8, epochs=1, batch_size=8)
    optimizer.build(backbone.trainable_variables)
    for exempt in (True, False):
        keras_sizes = sorted(int(np.prod(v.shape)) for v in backbone.trainable_variables
                             if optimizer._use_weight_decay(v) != exempt)
        assert keras_sizes == sizes(exempt)
