import numpy as np

from kcse.objective import training_dataset
from kcse.objective import trim_padding


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


def test_trim_padding_cuts_to_the_longest_sequence_rounded_up():
    mask = np.zeros((2, 32), bool)
    mask[0, :5], mask[1, :11] = True, True
    features = {
        "token_ids": np.where(mask, 7, 0).astype("int32"),
        "padding_mask": mask,
    }
    trimmed = trim_padding(features)
    assert trimmed["token_ids"].shape == (2, 16)
    assert trimmed["padding_mask"].dtype == "int32"
    np.testing.assert_array_equal(trimmed["padding_mask"], mask[:, :16])
    full = trim_padding({"padding_mask": np.ones((1, 12), bool)})
    assert full["padding_mask"].shape == (1, 12)
