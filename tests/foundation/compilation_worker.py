"""Counts the train steps JAX compiles for SimCSE cells (run by compilation_test.py).

Usage: python compilation_worker.py CACHE_FOLDER. Prints one JSON line: for
each cell, the token shapes its train step was traced (compiled) for and
the persistent-cache hits and misses while it trained.
"""

import collections
import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"

import jax  # noqa: E402
import keras  # noqa: E402
import keras_hub  # noqa: E402

import kcse  # noqa: E402
from kcse.foundation.compilation import use_compilation_cache  # noqa: E402
from kcse.objectives.encoder_objective import EncoderObjective  # noqa: E402

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat", "ran", "the"]
WORDS = VOCABULARY[5:]
LENGTH = 32
# 22 sentences of 1 to 22 words: batches of 4 hold many different longest
# lengths, and the last batch has 2 sentences.
SENTENCES = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(i + 1)) for i in range(22)]

events = collections.Counter()
jax.monitoring.register_event_listener(lambda name, **kwargs: events.update([name]))
traced_shapes = []
train_step = EncoderObjective.train_step


def counted_train_step(self, *args, **kwargs):
    # Under JAX, Keras calls train_step(state, data) once per compiled shape.
    x, _, _ = keras.utils.unpack_x_y_sample_weight(args[-1])
    traced_shapes.append(tuple(x["token_ids"].shape))
    return train_step(self, *args, **kwargs)


EncoderObjective.train_step = counted_train_step


def cell():
    """One SimCSE training of a new tiny BERT; what it compiled."""
    keras.utils.set_random_seed(0)
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=VOCABULARY), sequence_length=LENGTH
    )
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCABULARY), num_layers=2, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=LENGTH,
    )
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="cls", hidden_dropout=0.1)
    simcse = kcse.SimCSE(encoder)
    simcse.compile(optimizer=keras.optimizers.Adam(1e-3))
    first, before = len(traced_shapes), dict(events)
    history = simcse.fit(SENTENCES, batch_size=4, epochs=2, verbose=0)
    return {
        "traced_shapes": traced_shapes[first:],
        "cache_hits": events["/jax/compilation_cache/cache_hits"]
        - before.get("/jax/compilation_cache/cache_hits", 0),
        "cache_misses": events["/jax/compilation_cache/cache_misses"]
        - before.get("/jax/compilation_cache/cache_misses", 0),
        "loss": history.history["loss"],
    }


if __name__ == "__main__":
    use_compilation_cache(sys.argv[1])
    print(json.dumps({
        "first_cell": cell(),
        "same_shape_cell": cell(),
    }))
