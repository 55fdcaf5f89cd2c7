"""A TensorFlow checkpoint's tensors compared with arrays in memory, a piece
at a time.

A checkpoint (`prefix.index`, `prefix.data-00000-of-00001`, ...) is a tensor
bundle (TensorFlow's `core/util/tensor_bundle/tensor_bundle.cc`): the index
is a table in LevelDB's format, written uncompressed
(`kcse.models.google_checkpoint.checkpoint_index` reads it), from each
tensor's key to a `BundleEntryProto` (dtype, shape, shard, offset and size of
its bytes in that shard's data file), and from the key "" to a
`BundleHeaderProto` (number of shards, byte order). `tf.train.load_checkpoint`
reads a whole tensor at a time: comparing multilingual-e5-small's 384 MB
embedding table that way holds another 384 MB. Here the index is read alone,
and each tensor's bytes are compared with a variable's `READ_BYTES` of rows
at a time.
"""

import pathlib
import struct

import numpy as np

from kcse.models.google_checkpoint import checkpoint_index

HEADER_KEY = b""
# The key of one slice of a tensor stored in slices begins with a zero byte
# (`checkpoint::EncodeTensorNameSlice`); the tensor's own entry lists them.
SLICE_KEY_START = b"\x00"
# `tf.train.Checkpoint`'s object graph: which object each key belongs to.
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
READ_BYTES = 16 * 2**20


def bundle_index(prefix):
    """`(header, {key: BundleEntryProto})` of the checkpoint at `prefix`,
    for each tensor (not each slice) it stores.

    Raises:
        ValueError: naming `prefix.index` when it is not an uncompressed
            LevelDB table.
    """
    from tensorflow.core.protobuf import tensor_bundle_pb2

    path = f"{prefix}.index"
    header = tensor_bundle_pb2.BundleHeaderProto()
    entries = {}
    try:
        for key, value in checkpoint_index.table_entries(pathlib.Path(path).read_bytes()):
            if key == HEADER_KEY:
                header.ParseFromString(value)
            elif not key.startswith(SLICE_KEY_START):
                entry = entries[key.decode()] = tensor_bundle_pb2.BundleEntryProto()
                entry.ParseFromString(value)
    except (checkpoint_index.UnreadableIndex, IndexError, struct.error) as error:
        raise ValueError(f"{path}: not a TensorFlow checkpoint index "
                         f"({error or 'a malformed block'})") from None
    return header, entries


def list_checkpoint_keys(prefix, attribute):
    """The checkpoint keys of the items of the root object's list `attribute`
    (a `tf.Module`'s `module.weights = [...]`), in order, read from the
    checkpoint's object graph, as restoring does."""
    import tensorflow as tf
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(tf.train.load_checkpoint(str(prefix)).get_tensor(OBJECT_GRAPH_KEY))
    children = {child.local_name: child.node_id for child in graph.nodes[0].children}
    items = graph.nodes[children[attribute]].children
    return [graph.nodes[item.node_id].attributes[0].checkpoint_key
            for item in sorted(items, key=lambda item: int(item.local_name))]


def stored_tensor_problem(prefix, header, entry, variable):
    """How the tensor `entry` (of `bundle_index(prefix)`) differs from the
    `tf.Variable` `variable`, or None when its dtype, shape and bytes are
    the variable's.

    The variable is read `READ_BYTES` of rows at a time (`sparse_read`):
    once a sparse lookup has put it in copy-on-read mode (an embedding's
    `Gather` does), TensorFlow copies the whole tensor on each full read.
    """
    import tensorflow as tf

    from tensorflow.core.protobuf import tensor_bundle_pb2

    dtype = variable.dtype
    if entry.dtype != dtype.as_datatype_enum:
        return f"is {tf.as_dtype(entry.dtype).name}, not {dtype.name}"
    shape = [dimension.size for dimension in entry.shape.dim]
    if shape != variable.shape.as_list():
        return f"has shape {shape}, not {variable.shape.as_list()}"
    if entry.slices:
        return f"is stored in {len(entry.slices)} slices, which kcse does not compare"
    if header.endianness != tensor_bundle_pb2.BundleHeaderProto.LITTLE:
        return "is stored big-endian"
    size = variable.shape.num_elements() * dtype.size
    if entry.size != size:
        return f"has {entry.size} bytes, not {size}"
    rows = shape[0] if shape else 1
    row_bytes = size // rows if rows else 0
    rows_per_read = max(1, READ_BYTES // max(row_bytes, 1))
    data_file = f"{prefix}.data-{entry.shard_id:05d}-of-{header.num_shards:05d}"
    with open(data_file, "rb") as stored:
        stored.seek(entry.offset)
        for start in range(0, rows, rows_per_read):
            stop = min(start + rows_per_read, rows)
            values = (variable.sparse_read(tf.range(start, stop)) if shape
                      else variable.read_value())
            expected = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
            piece = stored.read(expected.size)
            if len(piece) < expected.size:
                return f"ends early: {data_file} is cut short"
            if not np.array_equal(np.frombuffer(piece, np.uint8), expected):
                return f"differs in rows {start}-{stop - 1}"
    return None
