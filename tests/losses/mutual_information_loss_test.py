"""IS-BERT's loss and CNN against yanzhangnlp/IS-BERT's code, transcribed in
torch (tests/isbert_reference.py): `MutualInformationLoss.forward` (JSD,
local = each real token's CNN features, global = the mean-pooled vector)
and `CNN.forward`."""

import numpy as np
import pytest
import tensorflow as tf
import torch

import isbert_reference
import kcse
from kcse.layers.sentence_pooling import masked_mean

MASK = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0],
                 [1, 1, 1, 1, 1, 0], [1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0]], bool)


def batch(seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    local = (scale * rng.normal(size=(6, 6, 12))).astype("float32")
    vectors = (scale * rng.normal(size=(6, 12))).astype("float32")
    return {"local": local, "global": vectors, "mask": MASK}


@pytest.mark.parametrize("scale", [0.1, 1.0, 5.0])
def test_loss_equals_the_authors_on_given_features(scale):
    inputs = batch(scale=scale)
    ours = float(kcse.losses.MutualInformationLoss()(None, inputs))
    theirs = isbert_reference.isbert_loss(
        torch.from_numpy(inputs["local"].astype("float64")),
        torch.from_numpy(inputs["global"].astype("float64")), MASK)
    assert ours == pytest.approx(theirs, rel=1e-5, abs=1e-6)


def test_cnn_mean_and_loss_equal_the_authors_chain():
    """Token states through kcse's TokenConvolution and masked mean, then the
    loss, against CNN.forward, Pooling's mean and the loss on the same
    weights; padded positions go through the convolutions as theirs do."""
    rng = np.random.default_rng(1)
    states = rng.normal(size=(6, 6, 10)).astype("float32")
    layer = kcse.layers.TokenConvolution(filters=4)
    local = layer(states)
    assert local.shape == (6, 6, 12)
    convolutions = [isbert_reference.conv_weights(*c.get_weights()) for c in layer.convolutions]
    theirs_local = isbert_reference.isbert_cnn(states, convolutions)
    np.testing.assert_allclose(np.asarray(local), theirs_local.numpy(), atol=1e-5)
    vectors = masked_mean(local, MASK)
    np.testing.assert_allclose(np.asarray(vectors),
                               isbert_reference.isbert_mean(theirs_local, MASK).numpy(),
                               atol=1e-5)
    ours = float(kcse.losses.MutualInformationLoss()(
        None, {"local": local, "global": vectors, "mask": MASK}))
    theirs = isbert_reference.isbert_loss(theirs_local,
                                          isbert_reference.isbert_mean(theirs_local, MASK), MASK)
    assert ours == pytest.approx(theirs, rel=1e-5)


def test_convolutions_are_drawn_as_torch_draws_them():
    """`nn.Conv1d`'s default: weight and bias U(±1/√(in · k))."""
    layer = kcse.layers.TokenConvolution(filters=256)
    layer.build((None, None, 64))
    for convolution, size in zip(layer.convolutions, (1, 3, 5)):
        bound = 1 / np.sqrt(64 * size)
        for weights in convolution.get_weights():
            assert np.abs(weights).max() <= bound
            assert np.abs(weights).max() > 0.9 * bound
        kernel = convolution.get_weights()[0]
        assert kernel.shape == (size, 64, 256)
        assert abs(kernel.std() - bound / np.sqrt(3)) < 0.02 * bound


def test_two_replicas_give_the_global_batchs_loss(two_cpu_strategy):
    """The replicas' losses sum to the loss of the whole batch on one device
    (Keras scales each by 1/replicas and sums their gradients): negatives
    and the token count are the global batch's."""
    inputs = batch(seed=2)
    single = float(kcse.losses.MutualInformationLoss()(None, inputs))
    halves = [{key: value[rows] for key, value in inputs.items()}
              for rows in (slice(0, 4), slice(4, 6))]  # Unequal shares.
    values = two_cpu_strategy.experimental_distribute_values_from_function(
        lambda context: halves[context.replica_id_in_sync_group])

    @tf.function
    def replica_losses(values):
        return two_cpu_strategy.run(
            lambda part: kcse.losses.MutualInformationLoss()(None, part), args=(values,))

    per_replica = two_cpu_strategy.experimental_local_results(replica_losses(values))
    assert sum(float(value) for value in per_replica) == pytest.approx(single, rel=1e-5)
    local_only = [float(kcse.losses.MutualInformationLoss()(None, half)) for half in halves]
    assert abs(np.mean(local_only) - single) > 1e-3  # Each half alone would differ.


def test_config_and_bad_input():
    loss = kcse.losses.MutualInformationLoss.from_config(
        kcse.losses.MutualInformationLoss().get_config())
    assert isinstance(loss, kcse.losses.MutualInformationLoss)
    restored = kcse.layers.TokenConvolution.from_config(
        kcse.layers.TokenConvolution(filters=8, kernel_sizes=(1, 3)).get_config())
    assert (restored.filters, restored.kernel_sizes) == (8, (1, 3))
    with pytest.raises(ValueError, match="kernel_sizes must be odd positive ints"):
        kcse.layers.TokenConvolution(kernel_sizes=(2,))
