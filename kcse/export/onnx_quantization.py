"""int8 ONNX models: ONNX Runtime's dynamic quantisation of kcse's export.

`quantize_model` writes `model_int8.onnx` from `model.onnx` (see
`kcse.export.onnx`'s table): the embedding tables uint8, the dense layers
int8, the feed-forward output projections int8 weights computing in
float32; ONNX Runtime's advice to pre-process first dropped.
"""

import contextlib
import logging
import pathlib

import numpy as np

from kcse.export import saved_model
from kcse.foundation import atomic_files

# Which operators dynamic int8 quantisation rewrites: the dense layers and
# the embedding tables, whose lookups become lookups of uint8 rows
# (multilingual-e5-small's word embeddings are 96M of its 118M weights);
# the feed-forward output projections only store int8 (`quantize_model`).
QUANTIZED_OPERATORS = ["MatMul", "Gather"]
# The start of ONNX Runtime's warning that `without_preprocessing_advice` drops.
PREPROCESSING_ADVICE = "Please consider to run pre-processing before quantization"


def quantize_model(source, target, intermediate_dim):
    """Writes `source`'s ONNX model with int8 weights to `target`.

    ONNX Runtime's `quantize_dynamic` (`QUANTIZED_OPERATORS`) makes the
    `MatMul`s int8 (weights, and activations quantised per batch at run
    time) and the embedding tables uint8 (`Gather` on uint8 rows, then
    `DequantizeLinear` of the rows looked up; one scale a table). tf2onnx
    writes the attention projections as `Gemm`, which the quantiser leaves
    float32; they are rewritten as `MatMul` + `Add` first (`gemm_as_matmul`),
    as a PyTorch export has them. The feed-forward output projections
    (weights of `intermediate_dim` rows) keep float32 arithmetic but store
    their weights as int8 (`int8_weights_only`): with their activations
    quantised too, multilingual-e5-small lost 0.88 Spearman ×100 on the
    Chinese STS-B test (77.37 → 76.49) instead of 0.15; stored float32 they
    were 14 MB of all-MiniLM-L6-v2's 34 MB int8 file. Figures in
    docs/serving_and_export.md. A float16 encoder's tables and feed-forward
    output projections stay float16.
    """
    import onnx
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic

    model = onnx.load(str(source))
    gemm_as_matmul(model.graph)
    weights = {tensor.name: tuple(tensor.dims) for tensor in model.graph.initializer}
    float32 = {tensor.name for tensor in model.graph.initializer
               if tensor.data_type == onnx.TensorProto.FLOAT}
    float_layers = [node for node in model.graph.node if node.op_type == "MatMul"
                    and weights.get(node.input[1], (None,))[0] == intermediate_dim]
    # A float16 table stays float16: opset 17's DequantizeLinear takes no
    # float16 scale.
    float16_tables = [node for node in model.graph.node if node.op_type == "Gather"
                      and node.input[0] in weights and node.input[0] not in float32]
    rewritten = pathlib.Path(target).with_suffix(".matmul.onnx")
    onnx.save(model, str(rewritten))
    with without_preprocessing_advice():
        try:
            quantize_dynamic(str(rewritten), str(target), weight_type=QuantType.QInt8,
                             op_types_to_quantize=QUANTIZED_OPERATORS,
                             nodes_to_exclude=[node.name for node in
                                               float_layers + float16_tables])
        except Exception as error:
            # A short file read back: its shape-inferred copy of the model,
            # or the int8 model (larger than float32's for tiny models).
            atomic_files.probe_room(target, 2 * rewritten.stat().st_size)
            raise saved_model.ExportCheckError(
                f"ONNX Runtime could not quantise {pathlib.Path(source).name} to "
                f"{pathlib.Path(target).name}: {type(error).__name__}: {error}") from error
    rewritten.unlink()
    # After the quantiser, which refuses a model holding DequantizeLinear.
    quantized = onnx.load(str(target))
    int8_weights_only(quantized.graph, [node.input[1] for node in float_layers
                                        if node.input[1] in float32])
    onnx.save(quantized, str(target))


def int8_weights_only(graph, names):
    """Stores each float32 initializer of `names` (`[in, out]` MatMul
    weights) as int8 with one scale an output column, in place: a
    `DequantizeLinear` node computes the float32 weights under the old name,
    so the nodes that read them (and their arithmetic) stay as they were.
    Symmetric: the scale is the column's largest |weight| / 127."""
    from onnx import helper
    from onnx import numpy_helper

    names = set(names)
    initializers = []
    dequantized = []
    for tensor in graph.initializer:
        if tensor.name not in names:
            initializers.append(tensor)
            continue
        values = numpy_helper.to_array(tensor)
        scale = np.abs(values).max(axis=0) / 127
        scale[scale == 0] = 1  # An all-zero column: zeros whatever the scale.
        quantized = np.round(values / scale).astype(np.int8)
        initializers += [numpy_helper.from_array(quantized, f"{tensor.name}_int8"),
                         numpy_helper.from_array(scale.astype(np.float32),
                                                 f"{tensor.name}_int8_scale")]
        dequantized.append(helper.make_node(
            "DequantizeLinear", [f"{tensor.name}_int8", f"{tensor.name}_int8_scale"],
            [tensor.name], name=f"{tensor.name}_dequantize", axis=1))
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    nodes = dequantized + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)


@contextlib.contextmanager
def without_preprocessing_advice():
    """Inside the block, the root logger drops ONNX Runtime's advice to run
    its pre-processing before quantising (`PREPROCESSING_ADVICE`, logged on
    every `quantize_dynamic` of a model without it); other messages pass.

    The pre-processing (`quant_pre_process`: shape inference and graph
    optimisation for static quantisation) changes nothing that dynamic
    quantisation does here. `logging.warning` gives the root logger a
    handler when it has none (`basicConfig`); a root without handlers gets
    Python's last-resort one for the block instead, so that the block
    leaves logging as it was and other warnings still print.
    """
    root = logging.getLogger()
    stand_in = [] if root.handlers else [logging.lastResort]

    def not_advice(record):
        return not record.getMessage().startswith(PREPROCESSING_ADVICE)

    root.addFilter(not_advice)
    for handler in stand_in:
        root.addHandler(handler)
    try:
        yield
    finally:
        for handler in stand_in:
            root.removeHandler(handler)
        root.removeFilter(not_advice)


def gemm_as_matmul(graph):
    """Rewrites each `Gemm(A, B, C)` of `graph` whose B is a constant as
    `MatMul(A, B) + C` (B transposed first when `transB`), in place.

    Only the forms tf2onnx writes for a dense layer: alpha = 1, beta = 1 or
    no C, A not transposed; any other `Gemm` is left as it is.
    """
    from onnx import helper
    from onnx import numpy_helper

    constants = {tensor.name: tensor for tensor in graph.initializer}
    nodes = []
    for node in graph.node:
        attributes = {attribute.name: helper.get_attribute_value(attribute)
                      for attribute in node.attribute}
        bias = len(node.input) > 2 and node.input[2]
        rewritable = (node.op_type == "Gemm" and node.input[1] in constants
                      and attributes.get("alpha", 1.0) == 1.0
                      and (not bias or attributes.get("beta", 1.0) == 1.0)
                      and not attributes.get("transA", 0))
        if not rewritable:
            nodes.append(node)
            continue
        weights = constants[node.input[1]]
        if attributes.get("transB", 0):
            transposed = numpy_helper.to_array(weights).T.copy()
            weights.CopyFrom(numpy_helper.from_array(transposed, weights.name))
        product = node.output[0] + "_matmul"
        nodes.append(helper.make_node("MatMul", node.input[:2], [product],
                                      name=node.name + "_matmul"))
        if bias:
            nodes.append(helper.make_node("Add", [product, node.input[2]], node.output,
                                          name=node.name + "_add"))
        else:
            nodes.append(helper.make_node("Identity", [product], node.output,
                                          name=node.name + "_identity"))
    del graph.node[:]
    graph.node.extend(nodes)
