"""SavedModel export of a `SentenceEncoder`, for TensorFlow Serving."""

import pathlib
import shutil

import keras

from kcse import atomic_files

# The signatures of an exported encoder.
STRINGS_SIGNATURE = "serving_default"
IDS_SIGNATURE = "encode_ids"
OUTPUT = "embedding"


def export_saved_model(encoder, path, normalize=None, overwrite=True):
    """Writes `encoder` as a TF SavedModel with two signatures.

    - `serving_default`: `texts`, a batch of strings `[None]`; the
      encoder's preprocessor tokenises inside the graph (serving it needs
      the tensorflow-text ops: `import tensorflow_text` in Python, the
      TF Serving build that has them). Left out, with a message, when the
      tokenizer cannot run in a graph (jieba-based WoBERT / RoFormer) or
      the encoder has no preprocessor.
    - `encode_ids`: `token_ids`, `padding_mask` (and `segment_ids` when the
      backbone takes them), int32 `[None, None]`, as the preprocessor
      makes them.

    Both return `{"embedding": float32 [None, dim]}`: the encoder's
    pooling, its whitening if it has one, then L2-normalisation when
    `normalize` (default: the encoder's own `normalize`). Each variable is
    stored once, so the SavedModel is about the size of the weights (Keras'
    own `export` stores them twice). Prefixes a model expects (E5:
    `"query: "`) are the client's to add, as with the encoder.

    The SavedModel is written to a temporary folder beside `path`, then
    swapped into place (`kcse.atomic_files.replace_directory`), so a kill
    during the export leaves the previous folder intact. With
    `overwrite=False`, a non-empty folder at `path` raises
    `FileExistsError` before anything is written.

    Runs on the TensorFlow backend; a model trained on JAX is exported by
    loading its `.keras` file in a TensorFlow process
    (`kcse export --model model.keras`).

    Returns:
        The list of signature names written.

    Example:
    ```python
    encoder = kcse.SentenceEncoder.from_preset(
        "multilingual_e5_small", pooling="last_avg"
    )
    encoder.export("serving/e5/1")  # ["encode_ids", "serving_default"]

    # Elsewhere, TensorFlow only:
    import tensorflow as tf, tensorflow_text  # noqa: F401
    served = tf.saved_model.load("serving/e5/1").signatures["serving_default"]
    vectors = served(texts=tf.constant(["query: 一个女孩在梳头。"]))["embedding"]
    ```
    """
    if keras.config.backend() != "tensorflow":
        raise RuntimeError(
            "SavedModel export runs on the TensorFlow backend; this process "
            f"uses {keras.config.backend()!r}. Save the encoder "
            "(`encoder.save('model.keras')`) and export it with "
            "KERAS_BACKEND=tensorflow (`kcse export --model model.keras`)."
        )
    import tensorflow as tf

    path = pathlib.Path(path)
    if not overwrite and path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise FileExistsError(f"{path} exists and is not empty; pass overwrite=True to replace it.")
    if normalize is None:
        normalize = encoder.normalize
    if encoder.normalize and not normalize:
        raise ValueError(
            "This encoder L2-normalises its vectors; export cannot undo that "
            "(normalize=False). Build the encoder with normalize=False."
        )

    def embed(features):
        vectors = encoder(features, training=False)
        if normalize:
            vectors = tf.math.l2_normalize(vectors, axis=-1)
        return {OUTPUT: vectors}

    id_inputs = [
        name
        for name in ("token_ids", "segment_ids", "padding_mask")
        if name in encoder.backbone.input
    ]

    @tf.function(
        input_signature=[
            {name: tf.TensorSpec([None, None], tf.int32, name=name)
             for name in id_inputs}
        ]
    )
    def encode_ids(features):
        features = dict(features)
        features["padding_mask"] = tf.cast(features["padding_mask"], tf.bool)
        return embed(features)

    module = tf.Module()
    # The backing tf.Variables, once each; nothing else holds weights.
    module.weights = [variable.value for variable in encoder.weights]
    # Tokenizer resources the string signature captures (SentencePiece).
    module.text_resources = text_resources(encoder.preprocessor)
    signatures = {IDS_SIGNATURE: encode_ids.get_concrete_function()}
    reason = strings_unsupported(encoder)
    if reason is None:

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="texts")])
        def serve_strings(texts):
            return embed(encoder.preprocessor(texts))

        signatures[STRINGS_SIGNATURE] = serve_strings.get_concrete_function()
    else:
        print(f"kcse export: no {STRINGS_SIGNATURE!r} (strings) signature: "
              f"{reason}. Clients send token ids to {IDS_SIGNATURE!r}.")
    temporary = atomic_files.temporary_sibling(path, directory=True)
    try:
        tf.saved_model.save(module, str(temporary), signatures=signatures)
        atomic_files.replace_directory(temporary, path)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return sorted(signatures)


def text_resources(preprocessor):
    """The TensorFlow Text tokenizers (tf.Modules) inside a preprocessor."""
    import tensorflow as tf

    if preprocessor is None:
        return []
    return [
        value
        for layer in preprocessor._flatten_layers()
        for value in vars(layer).values()
        if isinstance(value, tf.Module)
    ]


def strings_unsupported(encoder):
    """Why the encoder cannot take strings in a graph, or None if it can."""
    if encoder.preprocessor is None:
        return "the encoder has no preprocessor"
    tokenizer = getattr(encoder.preprocessor, "tokenizer", None)
    if not getattr(tokenizer, "runs_in_graph", True):
        return (
            f"{type(tokenizer).__name__} runs Python (jieba) and cannot be "
            "inside a graph"
        )
    return None
