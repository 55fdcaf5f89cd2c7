"""Tiny-config checks shared by layer and backbone tests.

In the manner of keras-hub's `TestCase.run_layer_test` / `run_backbone_test`:
one call checks shapes (eager and symbolic), the `get_config` → `from_config`
round trip with copied weights, and a `.keras` save and load.

`run_layer_test`'s `input_data` is an array (the one positional argument),
a tuple (positional arguments) or a dict (keyword arguments of `call`), whose
leaves may sit in lists (`SentencePooling`'s hidden states).
"""

import json
import os
import tempfile

import keras
import numpy as np
from keras import tree


def _is_shape(x):
    return isinstance(x, (tuple, list)) and all(d is None or isinstance(d, int) for d in x)


def _flat_shapes(expected):
    """Shapes of a (possibly nested) structure of shapes, in `tree.flatten` order."""
    if _is_shape(expected):
        return [tuple(expected)]
    if isinstance(expected, dict):
        return [s for key in sorted(expected) for s in _flat_shapes(expected[key])]
    return [s for item in expected for s in _flat_shapes(item)]


def _assert_shapes(output, expected, symbolic=False):
    if isinstance(expected, dict):
        assert isinstance(output, dict) and set(output) == set(expected), output
    actual = [tuple(x.shape) for x in tree.flatten(output)]
    wanted = _flat_shapes(expected)
    if symbolic:  # keras.Input leaves the batch dimension unknown.
        wanted = [(None,) + s[1:] if s else s for s in wanted]
    assert actual == wanted, f"output shapes {actual} != expected {wanted}"


def assert_outputs_close(first, second, atol=1e-6):
    first, second = tree.flatten(first), tree.flatten(second)
    assert len(first) == len(second)
    for a, b in zip(first, second):
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b), atol=atol
        )


def assert_configs_equal(first, second):
    dump = lambda c: json.dumps(c, sort_keys=True, default=str)  # noqa: E731
    assert dump(first.get_config()) == dump(second.get_config())


def _call(layer, data, call_kwargs):
    if isinstance(data, dict):
        return layer(**data, **call_kwargs)
    if isinstance(data, tuple):
        return layer(*data, **call_kwargs)
    return layer(data, **call_kwargs)


def _save_and_load(model):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.keras")
        model.save(path)
        return keras.saving.load_model(path)


def run_layer_test(
    layer_class,
    init_kwargs,
    input_data,
    expected_output_shape,
    call_kwargs=None,
    training=False,
    setup=None,
    deterministic=None,
):
    """Builds, calls and round-trips `layer_class(**init_kwargs)`; returns it.

    `setup(layer)`, if given, runs after the first (building) call, e.g. to
    `adapt` the layer; the checked output is computed after it. Outputs are
    compared (atol 1e-6) only when the call is `deterministic`, by default
    when `training` is False (random layers are then deterministic).
    """
    if deterministic is None:
        deterministic = not training
    call_kwargs = dict(call_kwargs or {}, training=training)
    layer = layer_class(**init_kwargs)
    _call(layer, input_data, call_kwargs)
    if setup is not None:
        setup(layer)
    assert layer.built
    output = _call(layer, input_data, call_kwargs)
    _assert_shapes(output, expected_output_shape)

    # get_config → from_config, then the same weights give the same output.
    revived = layer_class.from_config(layer.get_config())
    assert_configs_equal(layer, revived)
    _call(revived, input_data, call_kwargs)
    revived.set_weights(layer.get_weights())
    revived_output = _call(revived, input_data, call_kwargs)
    _assert_shapes(revived_output, expected_output_shape)
    if deterministic:
        assert_outputs_close(output, revived_output)

    # The layer inside a functional model: symbolic shapes, then `.keras`.
    leaves = tree.flatten(input_data)
    inputs = [keras.Input(shape=x.shape[1:], dtype=np.asarray(x).dtype.name) for x in leaves]
    outputs = _call(layer, tree.pack_sequence_as(input_data, inputs), call_kwargs)
    _assert_shapes(outputs, expected_output_shape, symbolic=True)
    model = keras.Model(inputs, outputs)
    loaded = _save_and_load(model)
    (loaded_layer,) = [x for x in loaded.layers if not isinstance(x, keras.layers.InputLayer)]
    assert type(loaded_layer) is layer_class
    assert_configs_equal(layer, loaded_layer)
    loaded_output = loaded(leaves)
    _assert_shapes(loaded_output, expected_output_shape)
    if deterministic:
        assert_outputs_close(model(leaves), output)
        assert_outputs_close(loaded_output, output)
    return layer


def run_backbone_test(backbone_class, init_kwargs, input_data, expected_output_shape):
    """Checks a keras-hub `Backbone` subclass on dict inputs; returns it."""
    backbone = backbone_class(**init_kwargs)
    output = backbone(input_data)
    _assert_shapes(output, expected_output_shape)

    # Token embeddings on their own; float32 weights (not counting the int64
    # states of the dropouts' seed generators).
    assert isinstance(backbone.token_embedding, keras.layers.Embedding)
    embedded = backbone.token_embedding(np.zeros((2, 3), "int32"))
    assert tuple(embedded.shape) == (2, 3, init_kwargs["hidden_dim"])
    assert backbone.dtype_policy.variable_dtype == "float32"
    assert backbone.weights and {v.dtype for v in backbone.weights} == {"float32"}

    # Shorter sequences and the compiled predict function.
    for length in (2, 3):
        short = backbone({k: v[:, :length] for k, v in input_data.items()})
        batch = input_data["token_ids"].shape[0]
        assert tuple(short["sequence_output"].shape[:2]) == (batch, length)
    assert_outputs_close(backbone.predict(input_data, verbose=0), output, atol=1e-5)

    # get_config → from_config with the same weights, then `.keras`.
    revived = backbone_class.from_config(backbone.get_config())
    assert_configs_equal(backbone, revived)
    revived.set_weights(backbone.get_weights())
    assert_outputs_close(revived(input_data), output)
    loaded = _save_and_load(backbone)
    assert type(loaded) is backbone_class
    assert_configs_equal(backbone, loaded)
    assert_outputs_close(loaded(input_data), output)
    return backbone
