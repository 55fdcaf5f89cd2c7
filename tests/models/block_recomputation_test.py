"""Recomputing transformer blocks in the backward pass changes no number.

The reference is the same training without recomputation (Keras keeping
every activation): same losses, same weights, dropout on.
"""

import contextlib
import functools
import re
import textwrap

import keras
import keras_hub
import numpy as np
import pytest

import kcse
from conftest import TINY_SENTENCES
from conftest import tiny_bert
from conftest import tiny_preprocessor
from kcse.models.block_recomputation import recomputed_blocks

pytestmark = pytest.mark.usefixtures("unoptimised_tensorflow_graphs")


def tiny_backbone(kind):
    keras.utils.set_random_seed(0)
    if kind == "bert":
        return tiny_bert(dropout=0.3)
    return kcse.models.NezhaBackbone(
        vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, dropout=0.3)


def trained(kind, rematerialize, pooling="first_last_avg", strategy=None):
    with strategy.scope() if strategy else contextlib.nullcontext():
        encoder = kcse.SentenceEncoder(tiny_backbone(kind), tiny_preprocessor(),
                                       pooling=pooling)
        simcse = kcse.SimCSE(encoder, rematerialize=rematerialize)
        simcse.compile(optimizer=keras.optimizers.Adam(1e-2))
    keras.utils.set_random_seed(3)
    history = simcse.fit(TINY_SENTENCES, batch_size=4, epochs=2, verbose=0)
    return history.history["loss"], encoder.get_weights()


@pytest.mark.parametrize("kind", ["bert", "nezha"])
def test_recomputed_training_equals_plain_training(kind):
    losses, weights = trained(kind, False)
    recomputed_losses, recomputed_weights = trained(kind, True)
    # NEZHA's recomputed backward sums in another order (BERT's is the same
    # here): ulps of the gradients, which Adam (lr 1e-2, epsilon 1e-7) turns
    # into differences as large as the key biases (5e-7), whose exact
    # gradient is 0; the bound of the mirrored test below.
    np.testing.assert_allclose(recomputed_losses, losses, rtol=1e-5)
    for a, b in zip(recomputed_weights, weights):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_recomputed_training_under_mirrored_strategy(two_cpu_strategy):
    # Each replica draws its own dropout masks: plain training under the
    # same strategy is the reference.
    losses, weights = trained("bert", False, "last_avg", two_cpu_strategy)
    mirrored_losses, mirrored_weights = trained("bert", True, "last_avg", two_cpu_strategy)
    np.testing.assert_allclose(mirrored_losses, losses, rtol=1e-5)
    for a, b in zip(mirrored_weights, weights):
        np.testing.assert_allclose(a, b, atol=1e-5)


def test_blocks_run_again_in_the_backward_pass_only_when_training(monkeypatch):
    calls = []
    block_class = keras_hub.layers.TransformerEncoder
    original = block_class.call

    @functools.wraps(original)  # Keras reads its `training` argument.
    def counted(self, inputs, *args, **kwargs):
        calls.append(bool(kwargs.get("training")))
        return original(self, inputs, *args, **kwargs)

    monkeypatch.setattr(block_class, "call", counted)
    encoder = kcse.SentenceEncoder(tiny_bert(dropout=0.3), tiny_preprocessor(),
                                   pooling="cls")
    simcse = kcse.SimCSE(encoder, rematerialize=True)
    simcse.compile(optimizer=keras.optimizers.Adam(1e-2), run_eagerly=True)
    simcse.fit(TINY_SENTENCES[:4], batch_size=4, epochs=1, verbose=0)
    # One eager step: 2 blocks, each run forward and again for the gradient.
    assert calls.count(True) == 4
    calls.clear()
    encoder.encode(TINY_SENTENCES[:2])  # Inference is untouched, after fit too.
    assert calls and not any(calls)
    assert "call" not in encoder.backbone.transformer_layers[0].__dict__


def test_rematerialize_needs_tensorflow(monkeypatch):
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="cls")
    assert kcse.SimCSE(encoder).rematerialize is False  # The API's default.
    assert kcse.SimCSE.from_config(
        kcse.SimCSE(encoder, rematerialize=True).get_config()).rematerialize
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    with pytest.raises(ValueError, match="rematerialize=True needs the TensorFlow"):
        kcse.SimCSE(encoder, rematerialize=True)
    with pytest.raises(ValueError, match="needs the TensorFlow backend; this is jax"):
        with recomputed_blocks(encoder.backbone):
            pass


def test_docstring_example_runs():
    code = re.search(r"```python\n(.*?)```", recomputed_blocks.__doc__, re.S).group(1)
    exec(textwrap.dedent(code), {})


def test_commands_recompute_with_tensorflow_unless_told_not_to(monkeypatch):
    import argparse

    from kcse.experiments import command_line
    from kcse.experiments import methods

    parser = argparse.ArgumentParser()
    command_line.add_training_arguments(parser)
    command_line.add_method_arguments(parser, ["simcse"])
    for flags, expected in (([], True), (["--no-rematerialize"], False),
                            (["--rematerialize"], True)):
        method = methods.method_from_args("simcse", parser.parse_args(flags))
        assert method.rematerialize is expected, flags
    monkeypatch.setattr(keras.backend, "backend", lambda: "jax")
    assert not methods.method_from_args("simcse", parser.parse_args([])).rematerialize
    with pytest.raises(ValueError, match="--rematerialize needs the TensorFlow backend"):
        methods.method_from_args("simcse", parser.parse_args(["--rematerialize"]))
