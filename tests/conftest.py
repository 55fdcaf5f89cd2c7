"""Shared fixtures: tiny random backbones and the shared real data."""

import itertools
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

SHARED_DATA = pathlib.Path(
    os.environ.get(
        "KCSE_SHARED_DATA",
        pathlib.Path(__file__).resolve().parents[2] / "shared" / "data",
    )
)


def pytest_configure(config):
    # Two logical CPU devices for the tf.distribute tests; this must happen
    # before TensorFlow initialises its devices.
    if keras.config.backend() == "tensorflow":
        import tensorflow as tf

        cpus = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2
        )


_COLLECTIVE_KEY_BASES = itertools.count(start=1000, step=1000)


@pytest.fixture
def two_cpu_strategy():
    """A `MirroredStrategy` over the two logical CPU devices.

    TensorFlow gives every `MirroredStrategy` the same collective group and
    instance keys, and the runtime remembers the shapes gathered under a key,
    so a second strategy in the process gathering other shapes aborts
    ("Shape mismatch in the collective instance"). Each strategy made here
    gets its own keys, as TensorFlow's own tests do.
    """
    import tensorflow as tf

    tf.distribute.MirroredStrategy._collective_key_base = next(
        _COLLECTIVE_KEY_BASES
    )
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    assert strategy.num_replicas_in_sync == 2
    return strategy


@pytest.fixture
def shared_data():
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


def tiny_bert(seed=0, dropout=0.0, vocabulary_size=40, num_layers=2):
    keras.utils.set_random_seed(seed)
    return keras_hub.models.BertBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=num_layers,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
        dropout=dropout,
    )


# Sentences and scored pairs in the tiny vocabulary.
TINY_SENTENCES = [
    "the cat sat on the mat",
    "a dog ran fast",
    "the red dog was slow",
    "blue mat",
    "the cat is red",
    "a slow cat ran",
    "the dog sat",
    "red blue red",
]
TINY_PAIRS = (
    ["the cat sat", "a dog ran", "the mat is red", "blue", "the dog was fast"],
    ["the cat sat on the mat", "a dog", "red mat", "the blue cat", "a slow dog"],
    [5.0, 3.0, 4.0, 0.5, 1.0],
)


def tiny_vocabulary():
    words = "the a cat dog sat on mat ran fast slow red blue is was".split()
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words


def tiny_preprocessor(sequence_length=12):
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=tiny_vocabulary())
    return keras_hub.models.BertTextEmbedderPreprocessor(
        tokenizer, sequence_length=sequence_length
    )


def token_batch(lengths, sequence_length=6, vocabulary_size=40, seed=0):
    """Random token dict with the given real lengths (rest is padding)."""
    rng = np.random.default_rng(seed)
    mask = np.arange(sequence_length)[None, :] < np.array(lengths)[:, None]
    ids = rng.integers(5, vocabulary_size, size=mask.shape) * mask
    return {
        "token_ids": ids.astype("int32"),
        "segment_ids": np.zeros(mask.shape, "int32"),
        "padding_mask": mask,
    }
