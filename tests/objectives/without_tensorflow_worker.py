"""kcse on JAX, three SimCSE steps on token ids (methods_without_tensorflow_test.py).

`three_simcse_steps()` runs in methods_without_tensorflow_worker.py, in
`tests/tensorflow_free.environment()`: there `import tensorflow` (and
tensorflow_text, jieba & co.) raises ModuleNotFoundError and
`importlib.util.find_spec` finds none of them, as on a machine where
TensorFlow is not installed. Run as a script (the test runs it on JAX with
TensorFlow importable: the reference), it prints its result as one JSON line.
"""

import importlib
import json
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402

import kcse  # noqa: E402

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat", "ran", "the"]


def token_ids(rng, rows, length=12):
    lengths = rng.integers(3, length + 1, (rows, 1))
    mask = np.arange(length) < lengths
    ids = np.where(mask, rng.integers(5, len(VOCABULARY), (rows, length)), 0)
    ids[:, 0] = 2
    return {"token_ids": ids.astype("int32"), "padding_mask": mask,
            "segment_ids": np.zeros((rows, length), "int32")}


def weights(model):
    return [keras.ops.convert_to_numpy(v).copy() for v in model.trainable_weights]


def three_simcse_steps():
    """Three SimCSE steps of a tiny BERT on token ids, then STS and text vectors:
    what the test compares (a dict, JSON-ready)."""
    try:
        importlib.import_module("tensorflow")
        tensorflow_importable = True
    except ImportError:
        tensorflow_importable = False

    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(VOCABULARY), num_layers=2, num_heads=2, hidden_dim=16,
        intermediate_dim=32, max_sequence_length=16,
    )
    encoder = kcse.SentenceEncoder(backbone, pooling="last_avg", hidden_dropout=0.1)
    rng = np.random.default_rng(0)
    tokens = token_ids(rng, 12)
    vectors = encoder.predict(tokens, verbose=0)
    before = weights(encoder)
    simcse = kcse.SimCSE(encoder)
    simcse.compile(optimizer=keras.optimizers.Adam(1e-3))
    steps = []
    # In order: with TensorFlow the batches come from tf.data, whose first
    # batch Keras reads once more before training (it draws another shuffle).
    simcse.fit(
        tokens, batch_size=4, epochs=1, shuffle=False, verbose=0,
        callbacks=[keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda batch, logs: steps.append(float(logs["loss"])))],
    )
    after = weights(encoder)
    pairs = token_ids(rng, 8), token_ids(rng, 8), np.arange(8) % 5
    score = kcse.evaluation.evaluate_sts(encoder, pairs)
    # Text, through keras-hub's tokenizer (which runs without TensorFlow).
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=VOCABULARY), sequence_length=16
    )
    text_encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="last_avg")
    text_vectors = text_encoder.encode(["the cat sat", "a dog ran"])
    text_tokens = {k: keras.ops.convert_to_numpy(v) for k, v in preprocessor(["the cat sat", "a dog ran"]).items()}
    return {
        "tensorflow_importable": tensorflow_importable,
        "tensorflow_imported": "tensorflow" in sys.modules,
        "vectors_dtype": str(vectors.dtype),
        "vectors_shape": list(vectors.shape),
        "step_losses": steps,
        "weights_after": [w.ravel().tolist() for w in after],
        "weight_change": max(float(np.abs(a - b).max()) for a, b in zip(after, before)),
        "spearman": score["spearman"],
        "text_vectors_equal_token_vectors": float(np.abs(
            text_vectors - text_encoder.predict(text_tokens, verbose=0)).max()),
    }


if __name__ == "__main__":
    print(json.dumps(three_simcse_steps()))
