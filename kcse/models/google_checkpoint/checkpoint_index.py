"""The variables an original TF checkpoint holds, read without TensorFlow.

A checkpoint's `<prefix>.index` is a table (LevelDB's layout, which
TensorFlow's tensor bundles use, uncompressed) whose keys are the variable
names. The commands read it before any model loads, so that a pooling the
checkpoint cannot give (P2 without `bert/pooler/dense/kernel`) is one line
at once (`kcse.models.model_sources.read_structure`). Standard library only.

Example:
```python
from kcse.models.google_checkpoint.checkpoint_index import index_files
from kcse.models.google_checkpoint.checkpoint_index import tensor_names

names = tensor_names(index_files("chinese_L-12_H-768_A-12")[0])
"bert/pooler/dense/kernel" in names  # True for Google's BERT release
```
"""

import pathlib
import struct

# LevelDB's table footer: two block handles padded to 40 bytes, then this.
TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_LENGTH = 48
# After each block: its compression type (0: none) and a CRC.
BLOCK_TRAILER_LENGTH = 5


class UnreadableIndex(ValueError):
    """An index file this reader does not follow (its caller then says "unknown")."""


def index_files(folder):
    """The `*.ckpt.index` files of `folder`, else its `*.index` files, sorted."""
    folder = pathlib.Path(folder)
    return sorted(folder.glob("*.ckpt.index")) or sorted(folder.glob("*.index"))


def tensor_names(path):
    """The set of variable names the checkpoint index file `path` lists.

    Returns None when the file cannot be read or is not an uncompressed
    LevelDB table (the caller then knows nothing, and the model's loading
    says what is wrong).
    """
    try:
        data = pathlib.Path(path).read_bytes()
        # "" holds the bundle's header.
        return {key.decode("utf-8") for key, _ in table_entries(data)} - {""}
    except (OSError, UnreadableIndex, IndexError, UnicodeDecodeError, struct.error):
        return None


def table_entries(data):
    """Yields `(key, value)`, as bytes, of each entry of the table `data`
    (an index file's bytes), in key order.

    Raises:
        UnreadableIndex: `data` is not an uncompressed LevelDB table (or a
            malformed one: then also `IndexError` or `struct.error`).
    """
    if len(data) < FOOTER_LENGTH:
        raise UnreadableIndex("shorter than a table footer")
    footer = data[-FOOTER_LENGTH:]
    if struct.unpack("<Q", footer[-8:])[0] != TABLE_MAGIC:
        raise UnreadableIndex("no table magic number")
    position = 0
    handles = []
    for _ in range(4):  # metaindex offset and size, index offset and size
        value, position = _varint(footer, position)
        handles.append(value)
    index_block = _block(data, handles[2], handles[3])
    for _, handle in _entries(index_block):
        offset, at = _varint(handle, 0)
        size, _ = _varint(handle, at)
        yield from _entries(_block(data, offset, size))


def _block(data, offset, size):
    end = offset + size
    if end + BLOCK_TRAILER_LENGTH > len(data):
        raise UnreadableIndex("a block beyond the end of the file")
    if data[end] != 0:
        raise UnreadableIndex("a compressed block")
    return data[offset:end]


def _entries(block):
    """`(key, value)` of each entry of a block (keys share prefixes)."""
    if len(block) < 4:
        raise UnreadableIndex("a block without its restart count")
    restarts = struct.unpack("<I", block[-4:])[0]
    end = len(block) - 4 * (restarts + 1)
    if end < 0:
        raise UnreadableIndex("a block with a bad restart count")
    position, key = 0, b""
    while position < end:
        shared, position = _varint(block, position)
        unshared, position = _varint(block, position)
        length, position = _varint(block, position)
        if shared > len(key) or position + unshared + length > end:
            raise UnreadableIndex("a malformed block entry")
        key = key[:shared] + block[position:position + unshared]
        position += unshared
        yield key, block[position:position + length]
        position += length


def _varint(data, position):
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
        if shift > 63:
            raise UnreadableIndex("a varint longer than 64 bits")
