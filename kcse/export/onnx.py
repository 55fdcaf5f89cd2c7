"""ONNX export of a `SentenceEncoder`, for ONNX Runtime.

The exported graph is the SavedModel's `encode_ids` function
(`kcse.export.saved_model.ids_function`: backbone, pooling, whitening,
normalisation) converted by tf2onnx; the tokenizer stays outside, as
`tokenizer.json` (`kcse.export.word_piece_json`,
`kcse.export.sentencepiece_json`), because kcse's tokenizers are
TensorFlow Text ops that ONNX has no operators for. A client needs only
`onnxruntime` and `tokenizers` (or transformers' `AutoTokenizer`; for a
jieba tokenizer, WoBERT's and RoFormer's, `AutoTokenizer` with `rjieba`).

Why tf2onnx rather than Keras' `Model.export(format="onnx")`: on the
TensorFlow backend Keras' export is itself a call of
`tf2onnx.convert.from_function`, but on the encoder's own call, whose
inputs are keras-hub's (`token_ids`, `padding_mask` as bool) and whose
output has no name or normalisation. Converting the SavedModel's function
gives the ONNX model the same computation TF Serving runs, under the input
names ONNX Runtime clients (and sentence-transformers' ONNX models) use.

| file | what |
|---|---|
| `model.onnx` | float32 weights; `input_ids`, `attention_mask` (and `token_type_ids` where the tokenizer makes them: not e5's; the SavedModel's `encode_ids` inputs, `saved_model.ids_inputs`), int64 `[batch, length]` → `sentence_embedding`, float32 `[batch, dim]` |
| `model_int8.onnx` | with `quantize="int8"`: the same graph in 8 bits (ONNX Runtime's dynamic quantisation): the word (and segment) embedding tables uint8, the dense layers int8, but the feed-forward output projections only store int8 weights and compute in float32; the position embeddings, biases and layer norms stay float32. About a quarter of `model.onnx`'s size (e5-small, all-MiniLM-L6-v2) |
| `tokenizer.json`, `tokenizer_config.json`, ... | the tokenizer, as in the Hugging Face folder |
| `onnx_config.json` | the inputs, output, dimension, pooling, normalisation, maximum length, prompts and the default prompt's name |
"""

import contextlib
import pathlib
import warnings

import keras
import numpy as np

from kcse.foundation import atomic_files
from kcse.foundation import compat
from kcse.export import huggingface
from kcse.export import onnx_fusions
from kcse.export import saved_model
from kcse.export.formats import QUANTIZATIONS
from kcse.export.onnx_quantization import quantize_model
from kcse.foundation.validation import check_bool

# kcse's token inputs (the SavedModel's `encode_ids`, `saved_model.ids_inputs`)
# -> the names ONNX Runtime clients feed (Hugging Face's).
INPUT_NAMES = {
    "token_ids": "input_ids", "segment_ids": "token_type_ids", "padding_mask": "attention_mask",
}
OUTPUT = "sentence_embedding"
MODEL_FILE = "model.onnx"
QUANTIZED_FILES = {quantization: f"model_{quantization}.onnx" for quantization in QUANTIZATIONS}
CONFIG_FILE = "onnx_config.json"
# ONNX Runtime 1.16+ runs it; opset 17 has LayerNormalization.
OPSET = 17
# Bytes of an external initializer copied into model.onnx at a time.
COPY_BLOCK_BYTES = 16 * 2**20


def export_onnx(encoder, path, quantize=None, normalize=None, overwrite=False):
    """Writes `encoder` as an ONNX model and its tokenizer, in a folder at `path`.

    Args:
        encoder: a `kcse.SentenceEncoder` with a preprocessor.
        path: the folder to write.
        quantize: None, or `"int8"` to also write `model_int8.onnx`: the
            dense weights int8 and the embedding tables uint8, by ONNX
            Runtime's `quantize_dynamic` (activations quantised per batch
            at run time), but the feed-forward output projections, which
            store int8 weights and compute in float32
            (`onnx_quantization.quantize_model`).
        normalize: L2-normalise the output (default: the encoder's own
            `normalize`; an encoder that normalises cannot export without).
        overwrite: replace an existing non-empty folder at `path`, one
            holding only files kcse wrote there (an earlier export).

    The folder holds the files of the module table. `model.onnx` takes
    int64 `input_ids`, `attention_mask` (and `token_type_ids` when the
    backbone has segments and the tokenizer makes them: not e5's), `[batch, length]` of any length up to the
    backbone's, and returns `sentence_embedding`, float32 `[batch, dim]`:
    the encoder's vectors. Prompts (E5: `"query: "`) are the client's to
    prepend; `onnx_config.json` keeps the encoder's `prompts` and its
    `default_prompt_name`, the one the model is scored with (or null).

    Before the folder is renamed into place (written under a temporary
    name beside `path`), the export runs `model.onnx` in ONNX Runtime on
    the token ids of a few strings and the empty string (its graph, with
    its weights mapped from the file: `file_backed_twin`): its vectors must
    equal `encoder.encode`'s within 1e-4 (`saved_model.TOLERANCE`); the
    int8 model must give finite vectors of the same shape. Otherwise
    `saved_model.ExportCheckError`, and nothing is left at `path`. A batch
    needs at least one row (ONNX Runtime cannot reshape the attention of
    an empty one; the SavedModel can).

    Runs on the TensorFlow backend (tf2onnx converts a TensorFlow graph);
    needs the packages `tf2onnx`, `onnx` and `onnxruntime`.

    Raises:
        UnsupportedExportError: a tokenizer the folder's files cannot
            express (jieba's HMM), or no preprocessor.
        FileExistsError: `path` is a non-empty folder and not `overwrite`,
            or holds a file kcse did not write there.
        ValueError: an unknown `quantize`, or `normalize=False` for an
            encoder that normalises.

    Example:
    ```python
    import keras_hub
    import numpy as np
    import onnxruntime
    import transformers
    import kcse

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = kcse.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
        hidden_dim=8, intermediate_dim=16, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="P3")
    kcse.export.export_onnx(encoder, "tiny-onnx", quantize="int8")

    # Elsewhere: ONNX Runtime and a tokenizer, no TensorFlow.
    tokenizer = transformers.AutoTokenizer.from_pretrained("tiny-onnx")
    session = onnxruntime.InferenceSession("tiny-onnx/model.onnx")
    batch = tokenizer(["the cat", "cat"], padding=True, truncation=True,
                      return_tensors="np")
    feed = {value.name: batch[value.name] for value in session.get_inputs()}
    (vectors,) = session.run(["sentence_embedding"], feed)
    np.testing.assert_allclose(vectors, encoder.encode(["the cat", "cat"]), atol=1e-4)
    ```
    """
    if keras.config.backend() != "tensorflow":
        raise RuntimeError(
            "ONNX export runs on the TensorFlow backend (tf2onnx); this process uses "
            f"{keras.config.backend()!r}. Save the encoder (`encoder.save('model.keras')`) "
            "and export it with KERAS_BACKEND=tensorflow "
            "(`kcse export --model model.keras --format onnx`).")
    if quantize is not None and quantize not in QUANTIZED_FILES:
        raise ValueError(f"quantize={quantize!r}: expected None or one of "
                         f"{sorted(QUANTIZED_FILES)}.")
    normalize = encoder.normalize if normalize is None else check_bool(normalize, "normalize")
    if encoder.normalize and not normalize:
        raise ValueError("This encoder L2-normalises its vectors; export cannot undo that "
                         "(normalize=False). Build the encoder with normalize=False.")
    huggingface.check_tokenizer_exportable(encoder)
    atomic_files.check_replaceable(path, overwrite)
    tokenizer = encoder.preprocessor.tokenizer
    length = encoder.preprocessor.sequence_length
    tokenizer_files = huggingface.tokenizer_files(tokenizer, length)
    inputs = saved_model.ids_inputs(encoder)
    with atomic_files.writing_folder(path, overwrite) as temporary:
        twin = write_onnx_model(encoder, temporary / MODEL_FILE, normalize)
        models = {"float32": MODEL_FILE}
        if quantize is not None:
            quantize_model(temporary / MODEL_FILE, temporary / QUANTIZED_FILES[quantize],
                           encoder.backbone.intermediate_dim)
            models[quantize] = QUANTIZED_FILES[quantize]
        huggingface.write_files(temporary, tokenizer_files)
        huggingface.write_json(temporary / CONFIG_FILE, {
            "models": models,
            "inputs": [INPUT_NAMES[name] for name in inputs],
            "output": OUTPUT,
            "dimension": encoder.output_dim,
            "pooling": encoder.pooling,
            "whitening": encoder.whitening is not None,
            "normalize": bool(normalize),
            "max_seq_length": length,
            "prompts": dict(encoder.prompts),
            "default_prompt_name": encoder.default_prompt_name,
            "opset": OPSET,
        })
        try:
            check_onnx_models(temporary, models, encoder, normalize, {"float32": twin.name})
        finally:
            twin.unlink()
    return pathlib.Path(path)


def write_onnx_model(encoder, path, normalize):
    """Converts the encoder's token-ids function to an ONNX file at `path`.

    tf2onnx converts a graph that takes the weights as inputs
    (`converted_model`); they become the ONNX model's initializers
    afterwards, and ONNX Runtime's basic graph optimisations fold what the
    conversion left to compute from them (transposed kernels). Between
    these steps the weights are files, not protobuf messages: the converted
    model's float32 initializers are written to a data file beside it
    (`external_initializers`), ONNX Runtime writes the optimised model's to
    another, and `path` is assembled from both (`inline_external_data`), one
    tensor at a time. The lookup tables (`lookup_tables`: e5's word
    embeddings, 0.38 GB) stay graph inputs while ONNX Runtime optimises,
    so that it neither reads nor copies them, and are put back as
    initializers after. Converting the weights as TensorFlow constants
    instead copies them through every tf2onnx pass: multilingual-e5-small
    took 257 s and 20 GB that way.

    Returns the path of `path`'s file-backed twin (`file_backed_twin`),
    beside it, which the export's check runs; the other files written
    beside `path` are removed.
    """
    import onnx
    import onnxruntime

    model = converted_model(encoder, normalize)
    onnx_fusions.fusable_gelu(model.graph)
    onnx_fusions.layer_normalizations(model.graph)
    weights = {f"weight_{index}": variable for index, variable in enumerate(encoder.weights)}
    used = {name for node in model.graph.node for name in node.input}
    tables = lookup_tables(model.graph, weights)
    kept = [value for value in model.graph.input if value.name not in weights
            or value.name in tables]
    for value in kept:  # A table's rows, unknown in the conversion (`unknown_rows`).
        if value.name in tables:
            value.type.tensor_type.shape.dim[0].dim_value = weights[value.name].shape[0]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    # The pooling's weights only (P2: the pooler's), float32 ones in a data file.
    converted = path.with_name(f"converted.{path.name}")
    data = path.with_name(converted.name + ".data")
    initializers = external_initializers(
        {name: variable for name, variable in weights.items() if name in used}, data)
    model.graph.initializer.extend(value for value in initializers if value.name not in tables)
    onnx.save(model, str(converted))
    size = converted.stat().st_size + data.stat().st_size
    optimized = path.with_name(f"optimized.{path.name}")
    options = light_session_options()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(optimized)
    options.add_session_config_entry(
        "session.optimized_model_external_initializers_file_name", optimized.name + ".data")
    twin = path.with_name(f"check.{path.name}")
    try:
        onnxruntime.InferenceSession(str(converted), options, providers=["CPUExecutionProvider"])
        model = onnx.load(str(optimized), load_external_data=False)
        kept = [value for value in model.graph.input if value.name not in tables]
        del model.graph.input[:]
        model.graph.input.extend(kept)
        model.graph.initializer.extend(value for value in initializers if value.name in tables)
        onnx.save(model, str(optimized))
        file_backed_twin(model, path, inline_external_data(optimized, path), twin)
    except Exception as error:
        atomic_files.probe_room(path, size)  # "Protobuf serialization failed", a short file.
        raise saved_model.ExportCheckError(
            f"ONNX Runtime could not load the converted encoder (pooling "
            f"{encoder.pooling!r}): {type(error).__name__}: {error}") from error
    finally:
        for written in (converted, optimized):
            written.unlink(missing_ok=True)
            written.with_name(written.name + ".data").unlink(missing_ok=True)
    try:
        onnx.checker.check_model(str(twin))
    except onnx.checker.ValidationError as error:
        twin.unlink()
        raise saved_model.ExportCheckError(
            f"{path.name} is not a valid ONNX model (onnx.checker): {error}") from error
    return twin


def converted_model(encoder, normalize):
    """tf2onnx's ONNX model of the encoder's token-ids function: inputs the
    token arrays (`INPUT_NAMES`) and each weight (`weight_<index>`, in
    `encoder.weights`' order: a Keras `StatelessScope` maps each variable
    to one), output `OUTPUT`."""
    import tensorflow as tf
    import tf2onnx

    variables = encoder.weights
    inputs = saved_model.ids_inputs(encoder)

    @tf.function(input_signature=[
        {INPUT_NAMES[name]: tf.TensorSpec([None, None], tf.int64, name=INPUT_NAMES[name])
         for name in inputs},
        [tf.TensorSpec(unknown_rows(variable.shape), variable.dtype, name=f"weight_{index}")
         for index, variable in enumerate(variables)],
    ])
    def encode_ids(features, values):
        features = {name: tf.cast(features[INPUT_NAMES[name]], tf.int32) for name in inputs}
        values = [tf.ensure_shape(value, variable.shape)
                  for value, variable in zip(values, variables)]
        with keras.StatelessScope(state_mapping=list(zip(variables, values))), \
                computing_in_float32(encoder), \
                onnx_fusions.gelu_as_onnx_runtime_fuses(encoder):
            # No tf.cond for empty batches (the SavedModel's): ONNX Runtime's
            # quantisation does not reach into an `If` subgraph.
            return saved_model.embedding(encoder, features, normalize, OUTPUT,
                                         empty_batch_branch=False)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tf2onnx's deprecated TF calls.
        try:
            model, _ = tf2onnx.convert.from_function(
                encode_ids, input_signature=encode_ids.input_signature, opset=OPSET,
                custom_op_handlers={"Erfc": (erfc_as_one_minus_erf, [])})
        except Exception as error:  # An operation ONNX has no counterpart for.
            raise saved_model.ExportCheckError(
                f"tf2onnx could not convert the encoder (pooling {encoder.pooling!r}): "
                f"{type(error).__name__}: {error}") from error
    return model


def lookup_tables(graph, weights):
    """The names in `weights` that `graph` only looks rows up in: the data
    input of each node using them is a `Gather`'s (embedding tables)."""
    uses = {}
    for node in graph.node:
        for position, name in enumerate(node.input):
            if name in weights:
                uses.setdefault(name, []).append(node.op_type == "Gather" and position == 0)
    return {name for name, lookups in uses.items() if all(lookups)}


def unknown_rows(shape):
    """`shape` with its first dimension unknown (None), for a weight's graph input.

    tf2onnx optimises the graph with TensorFlow's grappler, which feeds
    every placeholder a zero tensor of its shape (`GrapplerItemFromMetaGraphDef`):
    as many bytes again as the weights (multilingual-e5-small: 0.5 GB
    more at the export's peak). An unknown dimension is 1 in that tensor,
    so it holds a row of each weight; `tf.ensure_shape` gives the model its
    weights' shapes back inside the graph.
    """
    return [None, *shape[1:]] if len(shape) else shape


def external_initializers(variables, data_path):
    """ONNX initializers of `{name: variable}`, float32 values in `data_path`.

    Each float32 variable is written to the data file (a 2-D one
    `huggingface.WRITE_BLOCK_ROWS` rows at a time, `huggingface.VariableRows`)
    and its initializer refers to its bytes there (ONNX's external data);
    other dtypes are inline, each from its own numpy copy.
    """
    from onnx import TensorProto
    from onnx import numpy_helper

    initializers = []
    with open(data_path, "wb") as data:
        for name, variable in variables.items():
            if variable.dtype != "float32":
                initializers.append(numpy_helper.from_array(
                    np.asarray(keras.ops.convert_to_numpy(variable)), name))
                continue
            start = data.tell()
            if len(variable.shape) == 2:
                blocks = huggingface.VariableRows(variable).blocks()
            else:
                blocks = [np.asarray(keras.ops.convert_to_numpy(variable), "float32")]
            for block in blocks:
                data.write(np.ascontiguousarray(block).data)
            tensor = TensorProto(name=name, dims=variable.shape, data_type=TensorProto.FLOAT,
                                 data_location=TensorProto.EXTERNAL)
            for key, value in (("location", data_path.name), ("offset", start),
                               ("length", data.tell() - start)):
                tensor.external_data.add(key=key, value=str(value))
            initializers.append(tensor)
    return initializers


def inline_external_data(source, target):
    """Writes the ONNX model `source`, whose initializers may keep their
    bytes in external data files, to `target` as one file.

    The protobuf bytes are assembled, not a message: the model without its
    graph, then the graph (protobuf field 7) as its fields without
    initializers followed by each initializer (field 5), an external one's
    bytes copied from its file as the tensor's `raw_data` (field 9). Fields
    of a message may come in any order, so `target` reads as the model
    with its weights inline; no more than a block of the bytes is in
    memory at once.

    Returns `{name: (offset, length)}`: where each external initializer's
    bytes are in `target`.
    """
    import onnx

    model = onnx.load(str(source), load_external_data=False)
    initializers = list(model.graph.initializer)
    del model.graph.initializer[:]
    graph = model.graph.SerializeToString()
    model.ClearField("graph")
    parts = []  # (protobuf bytes before the raw data, external file, offset, length)
    for tensor in initializers:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            parts.append((field_header(5, tensor.ByteSize()) + tensor.SerializeToString(),
                          None, 0, 0))
            continue
        location = {entry.key: entry.value for entry in tensor.external_data}
        offset, length = int(location.get("offset", 0)), int(location["length"])
        tensor.ClearField("external_data")
        tensor.ClearField("data_location")
        header = tensor.SerializeToString() + field_header(9, length)
        parts.append((field_header(5, len(header) + length) + header,
                      source.parent / location["location"], offset, length))
    graph_size = len(graph) + sum(len(head) + length for head, _, _, length in parts)
    positions = {}
    with open(target, "wb") as out:
        out.write(model.SerializeToString() + field_header(7, graph_size) + graph)
        for tensor, (head, file, offset, length) in zip(initializers, parts):
            out.write(head)
            if file is not None:
                positions[tensor.name] = (out.tell(), length)
                with open(file, "rb") as data:
                    data.seek(offset)
                    for start in range(0, length, COPY_BLOCK_BYTES):
                        out.write(data.read(min(COPY_BLOCK_BYTES, length - start)))
    return positions


def file_backed_twin(model, target, positions, twin):
    """Writes `twin`: `model` (the graph `inline_external_data` wrote as
    `target`) whose initializers at `positions` are ONNX external data at
    those offsets of `target` itself.

    ONNX Runtime maps external data into memory rather than reading it, so
    a session of the twin runs `target`'s own weight bytes without a copy of
    them (multilingual-e5-small: 0.15 GB at its peak against 0.9 GB for
    `target`, which ONNX Runtime parses whole). The export's check runs it.
    """
    import onnx

    for tensor in model.graph.initializer:
        if tensor.name in positions:
            offset, length = positions[tensor.name]
            del tensor.external_data[:]
            for key, value in (("location", target.name), ("offset", offset),
                               ("length", length)):
                tensor.external_data.add(key=key, value=str(value))
    onnx.save(model, str(twin))


def field_header(number, length):
    """A protobuf length-delimited field's tag and length (varints)."""
    encoded = bytearray()
    for value in ((number << 3) | 2, length):
        while value > 0x7F:
            encoded.append(value & 0x7F | 0x80)
            value >>= 7
        encoded.append(value)
    return bytes(encoded)


@contextlib.contextmanager
def computing_in_float32(encoder):
    """Inside the block, `encoder`'s bfloat16 layers compute in float32.

    ONNX Runtime's CPU kernels take no bfloat16 (tf2onnx's graph of a
    bfloat16 encoder fails to load: "Type parameter (T) of Optype (Mul)
    bound to different types"), so a bfloat16 encoder (`"mixed_bfloat16"`,
    or bfloat16 weights too) is converted computing in float32: its
    layers' dtype policies are float32 for the conversion, and bfloat16
    weights are cast as they are read (Keras' autocast scope). Its vectors
    then differ from the encoder's by bfloat16's rounding only
    (`saved_model.HALF_PRECISION_TOLERANCES`). float16 stays as it is:
    ONNX Runtime runs it.
    """
    layers = [layer for layer in [encoder, *compat.sublayers(encoder)]
              if layer.dtype_policy.compute_dtype == "bfloat16"]
    policies = [layer.dtype_policy for layer in layers]
    if not layers:
        yield
        return
    try:
        for layer in layers:
            layer.dtype_policy = "float32"
        with compat.autocast_scope("float32"):
            yield
    finally:
        for layer, policy in zip(layers, policies):
            layer.dtype_policy = policy


def erfc_as_one_minus_erf(graph, node, name, args):
    """tf2onnx's handler for TensorFlow's `Erfc`, which ONNX has no operator
    for and TensorFlow's exact GELU computes (`0.5 x erfc(-x/√2)`): the node
    becomes ONNX's `Erf`, followed by `1 - erf`."""
    from tf2onnx import utils

    node.type = "Erf"
    dtype = utils.map_onnx_to_numpy_type(graph.get_dtype(node.output[0]))
    one = graph.make_const(utils.make_name(f"{name}_one"), np.array(1, dtype))
    graph.insert_new_node_on_output(
        "Sub", node.output[0], name=utils.make_name(f"{name}_erfc"),
        inputs=[one.output[0], node.output[0]])


def light_session_options():
    """ONNX Runtime session options for the export's own sessions, which
    run a few short batches once: no prepacked copies of the dense layers'
    weights (as many bytes again), errors only in the log."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    options.add_session_config_entry("session.disable_prepacking", "1")
    return options


def check_onnx_models(folder, models, encoder, normalize, run_files=None):
    """Runs each written model in ONNX Runtime on the token ids of a few texts.

    `models`: `{precision: file}` in `folder`; `run_files`: `{precision:
    file}` run instead, named as the model's file in errors (float32's
    file-backed twin, `file_backed_twin`). float32 must equal the in-process encoder within
    `saved_model.TOLERANCE` (a half-precision encoder's, within its
    `HALF_PRECISION_TOLERANCES`); a quantised model must give finite float32
    vectors of the right shape. Raises `saved_model.ExportCheckError`
    naming the file.
    """
    import onnxruntime

    texts = saved_model.CHECK_TEXTS + [""]
    expected = saved_model.in_process_vectors(encoder, texts, normalize)
    tolerance = saved_model.check_tolerance(encoder)
    made = {name: np.asarray(keras.ops.convert_to_numpy(value))
            for name, value in encoder.preprocessor(texts).items()}
    batch = {INPUT_NAMES[name]: made[name].astype("int64")
             for name in saved_model.ids_inputs(encoder)}
    for precision, file in models.items():
        try:
            session = onnxruntime.InferenceSession(
                str(folder / (run_files or {}).get(precision, file)), light_session_options(),
                providers=["CPUExecutionProvider"])
            outputs = dict(zip([OUTPUT], session.run([OUTPUT], batch)))
            problem = saved_model.output_problem(
                outputs, len(texts), encoder.output_dim,
                expected if precision == "float32" else None, tolerance, OUTPUT)
            if problem is not None:
                raise saved_model.ExportCheckError(
                    f"{file} failed on the token ids of {len(texts)} strings: {problem}")
        except saved_model.ExportCheckError:
            raise
        except Exception as error:  # ONNX Runtime's load and run errors.
            raise saved_model.ExportCheckError(
                f"{file} failed in ONNX Runtime: {type(error).__name__}: {error}") from error
