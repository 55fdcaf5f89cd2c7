"""In-memory training samples as a tf.data pipeline: every sample each
epoch, a new order each epoch, drawn from Python's seed only."""

import numpy as np

from kcse.objectives.training_data import training_dataset


def epochs_of(dataset, count):
    return [
        [batch.numpy().tolist() for batch in dataset] for _ in range(count)
    ]


def test_training_dataset_reshuffles_every_epoch_and_keeps_every_sample():
    samples = [f"sentence {i}".encode() for i in range(64)]
    epochs = epochs_of(training_dataset(samples, batch_size=8), 3)
    orders = [[s for batch in epoch for s in batch] for epoch in epochs]
    for order in orders:
        assert sorted(order) == sorted(samples)
        assert [len(batch) for batch in epochs[0]] == [8] * 8
    assert orders[0] != orders[1] != orders[2]
    assert orders[0] != samples


def test_training_dataset_without_shuffle_keeps_order_and_labels():
    x = np.arange(10)
    dataset = training_dataset(x, y=x * 2, batch_size=4, shuffle=False)
    batches = [(a.numpy().tolist(), b.numpy().tolist()) for a, b in dataset]
    assert batches[0] == ([0, 1, 2, 3], [0, 2, 4, 6])
    assert batches[-1] == ([8, 9], [16, 18])


def test_training_order_depends_on_the_python_seed_only():
    import random

    import tensorflow as tf

    samples = list(range(32))
    random.seed(3)
    first = epochs_of(training_dataset(samples, batch_size=32), 2)
    tf.random.set_seed(12345)  # TensorFlow's global seed plays no part.
    tf.random.uniform(())
    random.seed(3)
    again = epochs_of(training_dataset(samples, batch_size=32), 2)
    assert first == again and first[0] != first[1]
