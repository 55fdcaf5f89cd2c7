"""`OnnxEncoder`: a `SentenceEncoder`'s `encode` run by ONNX Runtime on the CPU.

sentence-transformers' `backend="onnx"` runs a transformer exported to ONNX
instead of torch; this is kcse's counterpart. The encoder is exported once
(`kcse.export.export_onnx`: backbone, pooling, whitening, normalisation)
into a cache folder named by a digest of everything that changes its
vectors; later `OnnxEncoder`s of the same encoder load that folder. The
texts go through kcse's own tokenisation and length-sorted, padding-trimmed
batches (`kcse.batched_prediction`), and only the model runs in ONNX
Runtime, so the vectors equal `SentenceEncoder.encode`'s (float32: within
1e-5, float rounding).

Light: the standard library and numpy at import (`kcse encode` checks its
flags with `missing_packages` before Keras starts).
"""

import hashlib
import importlib.util
import os
import pathlib

import numpy as np

from kcse.export.formats import ONNX_PACKAGES
from kcse.export.formats import QUANTIZATIONS
from kcse.foundation import digests
from kcse.foundation.validation import DEFAULT_PROMPT

# `OnnxEncoder`'s cache folder when given none: $KCSE_ONNX_CACHE, else this.
CACHE_VARIABLE = "KCSE_ONNX_CACHE"
DEFAULT_CACHE = pathlib.Path("~/.cache/kcse/onnx")


def missing_packages():
    """The packages of the `onnx` extra (`ONNX_PACKAGES`) not installed."""
    return [name for name in ONNX_PACKAGES if importlib.util.find_spec(name) is None]


def cache_folder(cache_dir=None):
    """`cache_dir`, else $KCSE_ONNX_CACHE, else ~/.cache/kcse/onnx, as a path."""
    folder = cache_dir or os.environ.get(CACHE_VARIABLE) or DEFAULT_CACHE
    return pathlib.Path(folder).expanduser()


def cache_key(encoder, quantize=None):
    """A digest of what the exported model's vectors depend on.

    The kcse version, the backbone's class and configuration (architecture
    and precision), the token layer, pooling, pooler activation, whitening,
    normalisation, the preprocessor's maximum length, the quantisation,
    and a SHA-256 of every weight (dtype, shape and bytes, in the
    encoder's order; not the variables' names, which differ between two
    builds of one model). Prompts are not in it: kcse prepends them to the
    texts, outside the model.
    """
    import keras

    import kcse

    weights = hashlib.sha256()
    for variable in encoder.weights:
        array = np.ascontiguousarray(keras.ops.convert_to_numpy(variable))
        weights.update(f"{array.dtype.name}{array.shape}".encode())
        weights.update(array.reshape(-1).view(np.uint8))
    whitening, token_layer = encoder.whitening, encoder.token_layer
    return digests.content_digest({
        "kcse": kcse.__version__,
        "backbone": layer_config(encoder.backbone),
        "token_layer": None if token_layer is None else layer_config(token_layer),
        "pooling": encoder.pooling,
        "pooler_activation": encoder.pooler_activation,
        "whitening": None if whitening is None else layer_config(whitening),
        "normalize": encoder.normalize,
        "max_length": getattr(encoder.preprocessor, "sequence_length", None),
        "quantize": quantize,
        "weights": weights.hexdigest(),
    })


def layer_config(layer):
    """`layer`'s class and configuration, but not its name (numbered apart
    in two builds of one model) or trainability."""
    config = {key: value for key, value in layer.get_config().items()
              if key not in ("name", "trainable")}
    return {"class": f"{type(layer).__module__}.{type(layer).__qualname__}", **config}


class OnnxEncoder:
    """A `kcse.SentenceEncoder`'s `encode`, run by ONNX Runtime on its ONNX export.

    Exports `encoder` (`encoder.export(folder, format="onnx",
    quantize=quantize)`) into `cache_dir/<cache_key>` the first time, and
    loads that folder afterwards (a second `OnnxEncoder` of the same
    encoder, weights, pooling, normalisation and maximum length, in this
    process or another, exports nothing). `encode` tokenises with the
    encoder's own preprocessor and batches as `SentenceEncoder.encode`
    does (length-sorted batches, padding trimmed, repeated texts once,
    the default prompt prepended); ONNX Runtime runs the model on each
    batch's token ids. float32 vectors equal the encoder's within float
    rounding (1e-5); int8 ones are ONNX Runtime's dynamic quantisation of
    the same graph (`kcse.export.export_onnx`), about twice as fast on a
    CPU with AVX-512 VNNI or AVX2, and a little less accurate.

    An `OnnxEncoder` is a snapshot: training the encoder afterwards does
    not change its vectors; make a new one (a new export, under a new key).

    Args:
        encoder: a `kcse.SentenceEncoder` with a preprocessor, on the
            TensorFlow backend (tf2onnx converts its graph) the first time;
            a cached export is only read, on any backend (JAX: the export a
            TensorFlow process made of the same encoder, its `.keras` file
            say, in the same `cache_dir`).
        quantize: None (float32), or `"int8"`.
        cache_dir: the folder of exports (default: $KCSE_ONNX_CACHE, else
            `~/.cache/kcse/onnx`).
        threads: ONNX Runtime's threads within an operator (default: its
            own, one per physical core); idle ones sleep, not spin.

    Raises:
        ImportError: a package of the `onnx` extra (tf2onnx, onnx,
            onnxruntime) is missing: `pip install 'kcse[onnx]'`.
        ValueError: an unknown `quantize`, or an encoder the ONNX export
            refuses or cannot convert (no preprocessor; a tokenizer the
            export cannot write), its reason in one line.
        RuntimeError: no cached export, on a backend other than
            TensorFlow (`check_backend`).

    Example:
    ```python
    import tempfile

    import keras_hub
    import numpy as np
    import kcse

    backbone = kcse.models.BertBackbone(
        vocabulary_size=8, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=8)
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"])
    encoder = kcse.SentenceEncoder(
        backbone, keras_hub.models.BertTextEmbedderPreprocessor(tokenizer, sequence_length=8),
        pooling="last_avg", normalize=True)
    cache = tempfile.mkdtemp()
    fast = kcse.OnnxEncoder(encoder, cache_dir=cache)  # exports to cache/<key>
    texts = ["the cat sat", "the cat", "cat"]
    np.testing.assert_allclose(fast.encode(texts), encoder.encode(texts), atol=1e-5)
    again = kcse.OnnxEncoder(encoder, cache_dir=cache)  # loads it: no export
    assert again.folder == fast.folder
    ```
    """

    def __init__(self, encoder, quantize=None, cache_dir=None, threads=None):
        missing = missing_packages()
        if missing:
            raise ImportError(
                f"kcse.OnnxEncoder needs the packages {', '.join(ONNX_PACKAGES)} (the onnx "
                f"extra: pip install 'kcse[onnx]'); missing: {', '.join(missing)}")
        if quantize is not None and quantize not in QUANTIZATIONS:
            raise ValueError(f"quantize={quantize!r}: expected None or one of "
                             f"{sorted(QUANTIZATIONS)}.")
        import onnxruntime

        from kcse.export import onnx as onnx_export
        from kcse.export import saved_model

        self.encoder = encoder
        self.quantize = quantize
        self.folder = cache_folder(cache_dir) / cache_key(encoder, quantize)
        if not (self.folder / onnx_export.CONFIG_FILE).is_file():
            check_backend(self.folder)
            export(encoder, self.folder, quantize)
        file = (onnx_export.QUANTIZED_FILES[quantize] if quantize else
                onnx_export.MODEL_FILE)
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # Errors only.
        # Idle threads sleep rather than spin between operators: on 2 cores
        # shared with other work, spinning took 1.25x the time (1,000 STS-B
        # sentences, all-MiniLM-L6-v2, alternating runs, 2026-11-28).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads is not None:
            options.intra_op_num_threads = threads
        self.session = onnxruntime.InferenceSession(
            str(self.folder / file), options, providers=["CPUExecutionProvider"])
        self.inputs = {name: onnx_export.INPUT_NAMES[name]
                       for name in saved_model.ids_inputs(encoder)}
        self.output = onnx_export.OUTPUT

    def __call__(self, batch):
        """The vectors (float32 numpy) of one batch of the preprocessor's token arrays."""
        feed = {onnx_name: np.asarray(batch[name], "int64")
                for name, onnx_name in self.inputs.items()}
        return self.session.run([self.output], feed)[0]

    def encode(self, texts, batch_size=64, prompt=None, prompt_name=DEFAULT_PROMPT):
        """`SentenceEncoder.encode`'s vectors of `texts`, by ONNX Runtime: the
        same arguments (the encoder's default prompt when given none) and errors."""
        encoder = self.encoder
        return encoder._encode(texts, batch_size, "texts", encoder._prompt(prompt, prompt_name),
                               model=self)


def check_backend(folder):
    """Raises RuntimeError, in one line, unless Keras runs on TensorFlow,
    which the export at `folder` (not made yet) needs: tf2onnx converts a
    TensorFlow graph. On JAX an `OnnxEncoder` reads the exports a
    TensorFlow process made in the same cache folder."""
    import keras

    backend = keras.config.backend()
    if backend != "tensorflow":
        raise RuntimeError(
            f"kcse.OnnxEncoder: no export of this encoder in {folder.parent} yet, and "
            f"the export runs on the TensorFlow backend (this process uses {backend!r}): "
            "make it once with KERAS_BACKEND=tensorflow and the same cache folder, e.g. "
            "python -c \"import keras, kcse; kcse.OnnxEncoder(keras.saving.load_model("
            "'model.keras'))\"; an OnnxEncoder on any backend then reads it")


def export(encoder, folder, quantize):
    """`encoder`'s ONNX export at `folder` (atomically, by `export_onnx`); a
    folder another process completed meanwhile is kept."""
    from kcse.export import onnx as onnx_export
    from kcse.export.formats import UnsupportedExportError
    from kcse.export.saved_model import ExportCheckError

    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        onnx_export.export_onnx(encoder, folder, quantize=quantize)
    except (UnsupportedExportError, ExportCheckError) as error:
        raise ValueError(f"kcse.OnnxEncoder: this encoder does not export to ONNX: "
                         f"{' '.join(str(error).split())}") from None
    except FileExistsError:  # Another process's export, renamed into place first.
        if not (folder / onnx_export.CONFIG_FILE).is_file():
            raise
