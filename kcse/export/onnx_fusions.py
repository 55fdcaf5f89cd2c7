"""The ONNX export's graph in the operators ONNX Runtime runs fused.

tf2onnx converts Keras' layer norm to a dozen elementwise operators and
TensorFlow's exact GELU to six, which ONNX Runtime neither fuses nor
recognises. kcse's export (`kcse.export.onnx.write_onnx_model`) rewrites
both on tf2onnx's graph, before ONNX Runtime optimises it: each layer norm
as ONNX's `LayerNormalization` (opset 17), each GELU in the order of
operations ONNX Runtime's `GeluFusion` turns into one `Gelu` when a session
loads the model. The same values, within float rounding; all-MiniLM-L6-v2
ran 7% faster in ONNX Runtime (2026-11-28).
"""

import contextlib
import math

import keras

from kcse.foundation import compat


@contextlib.contextmanager
def gelu_as_onnx_runtime_fuses(encoder):
    """Inside the block, `encoder`'s exact GELU activations compute
    `x (1 + erf(x / √2)) / 2`, the form ONNX Runtime fuses into one `Gelu`
    operator (`fusable_gelu` puts it in the order ONNX Runtime matches).

    TensorFlow's exact GELU is `0.5 x erfc(-x / √2)`, which tf2onnx leaves
    as six elementwise operators (`erfc_as_one_minus_erf`) over the
    feed-forward width; fused, all-MiniLM-L6-v2's batches ran 3.6% faster in
    ONNX Runtime (2026-11-28). The two forms differ by float rounding only.
    """
    from kcse.models.gelu import gelu

    exact = (gelu, keras.activations.gelu)
    layers = [layer for layer in [encoder, *compat.sublayers(encoder)]
              if getattr(layer, "activation", None) in exact]
    activations = [layer.activation for layer in layers]
    try:
        for layer in layers:
            layer.activation = erf_gelu
        yield
    finally:
        for layer, activation in zip(layers, activations):
            layer.activation = activation


def fusable_gelu(graph):
    """Rewrites each GELU of `erf_gelu` in `graph` (an ONNX `GraphProto`) in
    the order of operations ONNX Runtime's `GeluFusion` matches:
    `Div(x, √2) → Erf → Add(1) → Mul(x) → Mul(0.5)`.

    TensorFlow's grappler, run by tf2onnx, turns the division into a
    multiplication by 1/√2 and moves the 0.5 before the `x`; the values are
    the same but ONNX Runtime fuses only its own order. Returns the number
    of GELUs rewritten.
    """
    from onnx import helper

    scalars, producer, consumers = graph_index(graph)

    def split(node, value):
        """`node`'s other input when one is the scalar `value`, else None."""
        constant = [name for name in node.input if math.isclose(
            scalars.get(name, math.nan), value, rel_tol=1e-6)]
        others = [name for name in node.input if name not in constant]
        return others[0] if len(node.input) == 2 and constant and len(others) == 1 else None

    def only_consumer(node, op_type):
        found = consumers.get(node.output[0], [])
        return found[0] if len(found) == 1 and found[0].op_type == op_type else None

    root_two = "kcse_gelu_sqrt2"
    rewritten = 0
    for erf in [node for node in graph.node if node.op_type == "Erf"]:
        scale = producer.get(erf.input[0])
        x = split(scale, 1 / math.sqrt(2)) if scale is not None and scale.op_type == "Mul" \
            else None
        add = only_consumer(erf, "Add")
        first = add and only_consumer(add, "Mul")
        second = first and only_consumer(first, "Mul")
        if None in (x, add, first, second) or split(add, 1.0) != erf.output[0] \
                or split(first, 0.5) != add.output[0] \
                or sorted(second.input) != sorted([first.output[0], x]):
            continue
        half = [name for name in first.input if name != add.output[0]][0]
        scale.op_type = "Div"
        scale.input[:] = [x, root_two]
        first.input[:] = [x, add.output[0]]
        second.input[:] = [first.output[0], half]
        rewritten += 1
    if rewritten:
        graph.initializer.append(helper.make_tensor(
            root_two, helper.TensorProto.FLOAT, [], [math.sqrt(2)]))
    return rewritten


def layer_normalizations(graph):
    """Replaces each layer normalisation tf2onnx left as a dozen elementwise
    operators in `graph` by ONNX's `LayerNormalization` (opset 17), which
    ONNX Runtime runs as one kernel. Returns how many.

    Keras' layer norm over the last axis of `x`, as tf2onnx converts it
    (`GlobalAveragePool` averages a rank-3 tensor over its last axis):
    `mean = GlobalAveragePool(x)`, `d = x - mean`,
    `s = γ / sqrt(GlobalAveragePool(d · d) + ε)`, output
    `x · s + (β - mean · s)`. A match needs that whole structure, the
    intermediate results used nowhere else, and γ, β, ε given; the nodes
    it made are removed.
    """
    from onnx import helper

    scalars, producer, consumers = graph_index(graph)

    def made(name, op_type):
        node = producer.get(name)
        return node if node is not None and node.op_type == op_type else None

    def inputs_by_producer(node, op_type):
        """`(input made by an op_type node, that node, the other input)`."""
        for index in (0, 1):
            source = made(node.input[index], op_type)
            if source is not None:
                return node.input[index], source, node.input[1 - index]
        return None, None, None

    removed, added = set(), []
    for mean in [node for node in graph.node if node.op_type == "GlobalAveragePool"]:
        x = mean.input[0]
        try:
            (center,) = [node for node in consumers[mean.output[0]] if node.op_type == "Sub"]
            assert list(center.input) == [x, mean.output[0]]
            (square,) = consumers[center.output[0]]
            assert square.op_type == "Mul" and list(square.input) == [center.output[0]] * 2
            (variance,) = consumers[square.output[0]]
            assert variance.op_type == "GlobalAveragePool"
            (shifted,) = consumers[variance.output[0]]
            _, _, epsilon = inputs_by_producer(shifted, "GlobalAveragePool")
            assert shifted.op_type == "Add" and epsilon in scalars
            (root,) = consumers[shifted.output[0]]
            (reciprocal,) = consumers[root.output[0]]
            assert (root.op_type, reciprocal.op_type) == ("Sqrt", "Reciprocal")
            (scale,) = consumers[reciprocal.output[0]]
            _, _, gamma = inputs_by_producer(scale, "Reciprocal")
            uses = consumers[scale.output[0]]
            (scaled_x,) = [node for node in uses if x in node.input]
            (scaled_mean,) = [node for node in uses if node is not scaled_x]
            _, negation, _ = inputs_by_producer(scaled_mean, "Neg")
            assert list(negation.input) == [mean.output[0]]
            (shift,) = consumers[scaled_mean.output[0]]
            _, _, beta = inputs_by_producer(shift, "Mul")
            (output,) = consumers[shift.output[0]]
            assert output.op_type == "Add" and sorted(output.input) == sorted(
                [scaled_x.output[0], shift.output[0]])
            assert sorted(consumers[mean.output[0]], key=id) == sorted([center, negation], key=id)
        except (AssertionError, KeyError, TypeError, ValueError):
            continue
        matched = [mean, center, square, variance, shifted, root, reciprocal, scale,
                   scaled_x, scaled_mean, negation, shift, output]
        removed.update(node.name for node in matched)
        added.append((output, helper.make_node(
            "LayerNormalization", [x, gamma, beta], [output.output[0]], axis=-1,
            epsilon=scalars[epsilon], name=f"{output.name}/LayerNormalization")))
    nodes = []
    replacing = {id(output): node for output, node in added}
    for node in graph.node:
        if id(node) in replacing:
            nodes.append(replacing[id(node)])
        elif node.name not in removed:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    return len(added)


def graph_index(graph):
    """`(scalars, producer, consumers)` of an ONNX graph: `{name: value}` of
    its one-element initializers, `{tensor name: the node making it}` and
    `{tensor name: [the nodes taking it, each once]}`."""
    from onnx import numpy_helper

    scalars = {tensor.name: float(numpy_helper.to_array(tensor).reshape(-1)[0])
               for tensor in graph.initializer if math.prod(tensor.dims) == 1}
    producer = {output: node for node in graph.node for output in node.output}
    consumers = {}
    for node in graph.node:
        for name in dict.fromkeys(node.input):
            consumers.setdefault(name, []).append(node)
    return scalars, producer, consumers


def erf_gelu(x):
    """Exact GELU as `x (1 + erf(x / √2)) / 2`, in TensorFlow."""
    import tensorflow as tf

    return x * (1.0 + tf.math.erf(x / math.sqrt(2.0))) * 0.5
