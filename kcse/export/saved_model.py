"""SavedModel export of a `SentenceEncoder`, for TensorFlow Serving."""

import importlib
import math
import os
import pathlib
import warnings

import keras
import numpy as np

from kcse.export import checkpoint_bundle
from kcse.foundation import atomic_files
from kcse.foundation import compat
from kcse.foundation.compilation import trim_padding
from kcse.foundation.validation import check_bool
from kcse.foundation.validation import check_preprocessor_length

# The signatures of an exported encoder.
STRINGS_SIGNATURE = "serving_default"
IDS_SIGNATURE = "encode_ids"
OUTPUT = "embedding"
# The token inputs `encode_ids` may take, in order (`ids_inputs`); `model.onnx`
# takes the same under Hugging Face's names (`kcse.export.onnx.INPUT_NAMES`).
IDS_INPUTS = ("token_ids", "segment_ids", "padding_mask")

# What every export is run on before it is swapped into place: a few
# ordinary strings (whatever the vocabulary, unknown pieces included), the
# empty string and one text many times the preprocessor's maximum length.
CHECK_TEXTS = ["the cat sat on the mat", "一个女孩在梳头。", "A dog, 3 cats & 42 birds!"]
LONG_TEXT_PHRASE = "the cat sat on the mat"
# The long text has about this many words per token of the maximum length.
LONG_TEXT_FACTOR = 8
# Served vectors must equal the in-process encoder's within
# TOLERANCE + TOLERANCE * |expected|, elementwise...
TOLERANCE = 1e-4
# ... or, for an encoder computing in half precision (`kcse.foundation.precision`),
# where serving at the full length sums in another order than `encode`'s
# trimmed batches: a few units of bfloat16's (2^-8) or float16's (2^-11)
# epsilon, through the model's blocks.
HALF_PRECISION_TOLERANCES = {"bfloat16": 5e-2, "float16": 1e-2}


def check_tolerance(encoder):
    """How far an export's vectors may be from `encoder`'s: `TOLERANCE`, or
    that of the half precision it computes in (a mixed policy or half
    precision weights too: its compute dtype)."""
    return HALF_PRECISION_TOLERANCES.get(encoder.compute_dtype, TOLERANCE)


class ExportCheckError(RuntimeError):
    """An exported SavedModel failed on its own declared inputs.

    Raised by `export_saved_model` before the SavedModel is swapped into
    place: the folder at the export path is left as it was. The message
    names the signature and the input it failed on.
    """


def export_saved_model(encoder, path, normalize=None, overwrite=True):
    """Writes `encoder` as a TF SavedModel with two signatures.

    - `serving_default`: `texts`, a batch of strings `[None]`; the
      encoder's preprocessor tokenises inside the graph (serving it needs
      the tensorflow-text ops: `import tensorflow_text` in Python, the
      TF Serving build that has them). Left out, with a message, when the
      tokenizer cannot run in a graph (jieba-based WoBERT / RoFormer) or
      the encoder has no preprocessor.
    - `encode_ids`: `token_ids`, `padding_mask` (and `segment_ids` when the
      tokenizer makes token types: not XLM-R's, e5's; `ids_inputs`), int32
      `[None, None]`, as the preprocessor makes them: the inputs of the
      ONNX export, under kcse's names.

    Both return `{"embedding": float32 [None, dim]}`: the encoder's
    pooling, its whitening if it has one, then L2-normalisation when
    `normalize` (default: the encoder's own `normalize`). Both cut each
    batch to its longest text, rounded up to 8 tokens, before the model, so
    a batch of short texts does not pay for the preprocessor's full length
    (512 for e5). Each variable is stored once, so the SavedModel is about
    the size of the weights (Keras' own `export` stores them twice). Prefixes a model expects (E5:
    `"query: "`) are the client's to add, as with `encode`: the encoder's
    `prompts` are kept as the SavedModel's `prompts()` function
    (`tf.saved_model.load(path).prompts()` → `{"query": b"query: ", ...}`),
    and the text of its default prompt, the one it is scored with, as
    `default_prompt()` (→ `b"query: "`; `b""` without one).

    The SavedModel is written to a temporary folder beside `path`, then
    swapped into place (`kcse.foundation.atomic_files.replace_directory`), so a kill
    during the export leaves the previous folder intact. With
    `overwrite=False`, a non-empty folder at `path` raises
    `FileExistsError` before anything is written; so, always, does a
    folder holding a file kcse did not write there
    (`kcse.foundation.atomic_files.check_replaceable`).

    Before the folder is swapped into place the export runs both signatures
    on what a client may send (`check_saved_model`): `serving_default` on a
    batch of ordinary strings, the empty string, a string many times longer
    than the preprocessor's `sequence_length` (truncated, as by the
    encoder) and an empty batch (`[0]`); `encode_ids` on the preprocessor's
    ids of ordinary strings and on empty batches (`[0, length]` and
    `[0, 0]`). Every output must be `embedding`, float32 `[batch, dim]` and
    finite, and for the ordinary strings and their ids equal to the
    in-process encoder's vectors (`encoder.encode`, within 1e-4).
    Otherwise the temporary folder is deleted, the folder at `path` is left
    as it was (nothing is created there), and `ExportCheckError` names the
    signature and the input it failed on. An empty batch gives an empty
    `[0, dim]` embedding. The check loads the SavedModel's graph onto the
    encoder's own variables and compares its checkpoint with them byte for
    byte, so it holds no second copy of the weights; it takes about as long
    again as writing it (multilingual-e5-small at 512 tokens: 11-15 s on
    two CPU cores; a tiny test model: 2 s).

    Runs on the TensorFlow backend; a model trained on JAX is exported by
    loading its `.keras` file in a TensorFlow process
    (`kcse export --model model.keras`).

    Returns:
        The list of signature names written.

    Raises:
        ExportCheckError: a signature failed on one of the inputs above.
        FileExistsError: `overwrite=False` and `path` is a non-empty
            folder, or `path` holds a file kcse did not write there.

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
    check_preprocessor_length(encoder.preprocessor, "export")
    atomic_files.check_replaceable(path, overwrite)
    normalize = encoder.normalize if normalize is None else check_bool(normalize, "normalize")
    if encoder.normalize and not normalize:
        raise ValueError(
            "This encoder L2-normalises its vectors; export cannot undo that "
            "(normalize=False). Build the encoder with normalize=False."
        )

    encode_ids = ids_function(encoder, normalize)
    module = tf.Module()
    # The backing tf.Variables, once each; nothing else holds weights.
    module.weights = backing_variables(encoder)
    module.prompts = strings_function(encoder.prompts)
    module.default_prompt = strings_function(encoder.default_prompt)
    signatures = {IDS_SIGNATURE: encode_ids.get_concrete_function()}
    reason = strings_unsupported(encoder)
    if reason is None:

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="texts")])
        def serve_strings(texts):
            # Through `encode_ids`: the model's graph is stored once.
            features = encoder.preprocessor(texts)
            return encode_ids({name: tf.cast(features[name], tf.int32)
                               for name in ids_inputs(encoder)})

        signatures[STRINGS_SIGNATURE] = serve_strings.get_concrete_function()
        # Tokenizer resources the string signature captures (SentencePiece),
        # once traced: a tokenizer may build them on its first graph call.
        module.text_resources = text_resources(encoder.preprocessor)
    else:
        print(f"kcse export: no {STRINGS_SIGNATURE!r} (strings) signature: "
              f"{reason}. Clients send token ids to {IDS_SIGNATURE!r}.")
    with atomic_files.writing_folder(path, overwrite) as temporary:
        try:
            tf.saved_model.save(module, str(temporary), signatures=signatures)
        except tf.errors.OpError as error:  # TensorFlow's file writes.
            raise file_error(error) from None
        check_saved_model(temporary, encoder, normalize, sorted(signatures))
    return sorted(signatures)


def strings_function(strings):
    """A `tf.function` taking nothing and returning `strings` as string tensors.

    `strings` is a str or a dict of str. Saved as the SavedModel's
    `prompts` and `default_prompt` attributes, so a TensorFlow-only client
    reads what to prepend: `tf.saved_model.load(path).prompts()` gives
    `{"query": b"query: ", ...}` (an empty dict without prompts),
    `default_prompt()` gives `b"query: "`.
    """
    import tensorflow as tf

    values = strings if isinstance(strings, str) else dict(strings)

    @tf.function(input_signature=[])
    def read_strings():
        return tf.nest.map_structure(tf.constant, values)

    return read_strings


def embedding(encoder, features, normalize, output=OUTPUT, empty_batch_branch=True,
              trim=False):
    """`{output: float32 [batch, dim]}` of a batch of token features, in a graph.

    The encoder's vectors, L2-normalised when `normalize`. With `trim`, the
    batch is first cut after the last position its mask covers, rounded up
    to 8 (`kcse.foundation.compilation.trim_padding`): the preprocessor pads every batch to
    its full length (512 for e5), most of it padding for short texts, and
    padding never changes a vector. With `empty_batch_branch`, an empty
    batch gives `[0, dim]` whatever the model does with it (CLS pooling
    slices token 0, absent from a `[0, 0]` batch), through a `tf.cond`
    around the model. Segment ids the backbone takes but `features` lack
    (e5's: `ids_inputs`) are zeros.
    """
    import tensorflow as tf

    if trim:
        features = trim_padding(features)
    features = dict(features, padding_mask=tf.cast(features["padding_mask"], tf.bool))
    if "segment_ids" in encoder.backbone.input and "segment_ids" not in features:
        features["segment_ids"] = tf.zeros_like(features["token_ids"])  # `ids_inputs`.

    def vectors():
        vectors = tf.cast(encoder(features, training=False), tf.float32)
        if normalize:
            vectors = tf.math.l2_normalize(vectors, axis=-1)
        return vectors

    if not empty_batch_branch:
        return {output: vectors()}
    rows = tf.shape(features["token_ids"])[0]
    empty = tf.zeros([0, encoder.output_dim], tf.float32)
    return {output: tf.cond(rows > 0, vectors, lambda: empty)}


def ids_inputs(encoder):
    """The token inputs of `encode_ids`, and of `model.onnx` under Hugging
    Face's names: those of `IDS_INPUTS` the backbone takes, but `segment_ids`
    only where the tokenizer makes token types.

    XLM-R's tokenizer (e5's) makes none: transformers' gives no
    `token_type_ids`, and `XLMRobertaModel` takes zeros for them. So a client
    sends the same inputs to either export, and to transformers; kcse's BERT
    backbone under e5 gets zeros inside the graph (`embedding`).
    """
    from kcse.export.sentencepiece_json import is_xlm_roberta_tokenizer

    inputs = [name for name in IDS_INPUTS if name in encoder.backbone.input]
    if encoder.preprocessor is not None and is_xlm_roberta_tokenizer(
            encoder.preprocessor.tokenizer) and "segment_ids" in inputs:
        inputs.remove("segment_ids")
    return inputs


def ids_function(encoder, normalize):
    """The `encode_ids` signature: a `tf.function` from int32 token arrays
    (`ids_inputs`, each `[None, None]`) to `{"embedding": float32 [batch, dim]}`."""
    import tensorflow as tf

    inputs = ids_inputs(encoder)

    @tf.function(input_signature=[
        {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in inputs}
    ])
    def encode_ids(features):
        return embedding(encoder, features, normalize, trim=True)

    return encode_ids


def file_error(error):
    """The `OSError` a TensorFlow file-writing error stands for, else `error`.

    TensorFlow's file system reports a full disk as `ResourceExhaustedError`
    (or `UnknownError`) with the C library's words in the message.
    """
    for code in atomic_files.WRITE_ERRORS:
        if os.strerror(code) in error.message:
            return OSError(code, os.strerror(code))
    return error


def check_saved_model(path, encoder, normalize, signatures):
    """Runs the SavedModel at `path` on the inputs a client may send.

    `signatures` are the names written (`serving_default` and/or
    `encode_ids`); `normalize` is the export's. Loads the SavedModel (with
    the tensorflow-text ops when it takes strings) onto the encoder's
    variables (`loaded_with_variables`), checks that its checkpoint holds
    exactly their values (`stored_variables_problem`), then runs
    `serving_default` on `CHECK_TEXTS`, the empty string, a text of
    `LONG_TEXT_FACTOR` words per token of the preprocessor's
    `sequence_length` and an empty batch, and `encode_ids` on the
    preprocessor's int32 ids of two texts (token ids of a fixed sentence
    when the encoder has no preprocessor) and on `[0, length]` and
    `[0, 0]` batches. Each output must be `{"embedding": float32
    [batch, encoder.output_dim]}` and all finite; for the short texts and
    their ids, equal to the in-process encoder's vectors (`encode`, or a
    call on the fixed ids, L2-normalised when `normalize`) within
    `TOLERANCE`. The long text is not encoded in process: a full-length
    pass would about double the check's time on a 512-token model.

    Raises:
        ExportCheckError: naming the signature and the input it failed on.
    """
    import tensorflow as tf

    if STRINGS_SIGNATURE in signatures:
        try:
            # Registers the tokenizer's graph ops (the module itself is unused).
            importlib.import_module("tensorflow_text")
        except ImportError:
            pass  # then loading fails below, and says which op is missing
    variables = backing_variables(encoder)
    try:
        loaded = loaded_with_variables(path, variables)
    except Exception as error:
        raise ExportCheckError(
            f"the SavedModel written to {path} does not load: {error}"
        ) from error
    problem = stored_variables_problem(path, variables)
    if problem is not None:
        raise ExportCheckError(f"the SavedModel written to {path}: {problem}")
    dim = encoder.output_dim
    tolerance = check_tolerance(encoder)

    def run(signature, description, inputs, rows, expected=None):
        try:
            outputs = loaded.signatures[signature](**inputs)
        except Exception as error:
            raise ExportCheckError(
                f"{signature} failed on {description}: {type(error).__name__}: "
                f"{str(error).strip()}"
            ) from error
        problem = output_problem(outputs, rows, dim, expected, tolerance)
        if problem is not None:
            raise ExportCheckError(f"{signature} failed on {description}: {problem}")

    preprocessor = encoder.preprocessor
    length = getattr(preprocessor, "sequence_length", None) or 512
    words = LONG_TEXT_PHRASE.split()
    long_text = " ".join(words * math.ceil(LONG_TEXT_FACTOR * length / len(words)))
    if preprocessor is not None:
        # One in-process pass for the short texts either signature is run
        # on (the long text's full-length pass would double the check's time).
        texts = CHECK_TEXTS + [""]
        expected = dict(zip(texts, in_process_vectors(encoder, texts, normalize)))
    if STRINGS_SIGNATURE in signatures:
        for description, texts, compare in (
            (f"a batch of {len(CHECK_TEXTS)} ordinary strings", CHECK_TEXTS, True),
            ("the empty string", [""], True),
            (f"a string of {len(long_text.split())} words (the maximum length is "
             f"{length} tokens)", [long_text], False),
            ("an empty batch (shape [0])", [], False),
        ):
            inputs = {"texts": tf.constant(texts, tf.string, shape=[len(texts)])}
            vectors = np.array([expected[text] for text in texts]) if compare else None
            run(STRINGS_SIGNATURE, description, inputs, len(texts), vectors)
    if IDS_SIGNATURE in signatures:
        names = sorted(loaded.signatures[IDS_SIGNATURE].structured_input_signature[1])
        if preprocessor is not None:
            texts = CHECK_TEXTS[:2]
            made = {
                key: np.asarray(keras.ops.convert_to_numpy(value))
                for key, value in preprocessor(texts).items()
            }
            shape = made["token_ids"].shape
            features = {
                name: made[name].astype("int32") if name in made else np.zeros(shape, "int32")
                for name in names
            }
            vectors = np.array([expected[text] for text in texts])
            description = f"the token ids of {len(texts)} strings"
        else:
            features = fixed_token_ids(encoder, names)
            vectors = in_process_vectors(encoder, features, normalize)
            description = f"{len(vectors)} rows of fixed token ids"
        features = {name: tf.constant(value) for name, value in features.items()}
        run(IDS_SIGNATURE, description, features, len(vectors), vectors)
        for shape in ([0, length], [0, 0]):
            empty = {name: tf.zeros(shape, tf.int32) for name in names}
            run(IDS_SIGNATURE, f"an empty batch (shape {shape})", empty, 0)


def backing_variables(encoder):
    """The `tf.Variable` behind each of the encoder's weights, the
    SavedModel's `weights`."""
    return [variable.value for variable in encoder.weights]


def loaded_with_variables(path, variables):
    """The SavedModel at `path` running on `variables`, its own `weights`.

    Its checkpoint is not read (`stored_variables_problem` compares it), so
    the check holds one copy of the weights, not two: for
    multilingual-e5-small 0.47 GB less at the export's peak.
    `load_partial` is `tf.saved_model.load` given objects for some of the
    SavedModel's nodes; TensorFlow exports it as
    `tf.__internal__.saved_model.load_partial`.
    """
    import tensorflow as tf

    filters = {"root": None}
    filters.update({f"root.weights.{index}": variable
                    for index, variable in enumerate(variables)})
    options = tf.saved_model.LoadOptions(experimental_skip_checkpoint=True)
    loaded = tf.__internal__.saved_model.load_partial(str(path), filters, options=options)
    return loaded["root"]


def stored_variables_problem(path, variables):
    """How the SavedModel's checkpoint at `path` differs from `variables`
    (its `weights`, in order), or None.

    Restoring would give each variable the tensor at the key the
    checkpoint's object graph names for it; that tensor must have the
    variable's dtype, shape and bytes (`checkpoint_bundle`, read a piece at
    a time). A checkpoint holding anything else is a problem too: loading
    it skipped those values.
    """
    prefix = pathlib.Path(path, "variables", "variables")
    try:
        header, entries = checkpoint_bundle.bundle_index(prefix)
    except (OSError, ValueError) as error:  # Unreadable, or not a table.
        return f"its checkpoint index cannot be read: {error}"
    keys = checkpoint_bundle.list_checkpoint_keys(prefix, "weights")
    if len(keys) != len(variables):
        return f"its checkpoint lists {len(keys)} weights, not {len(variables)}"
    others = set(entries) - set(keys) - {checkpoint_bundle.OBJECT_GRAPH_KEY}
    if others:
        return f"its checkpoint holds values besides the weights: {sorted(others)}"
    for key, variable in zip(keys, variables):
        if key not in entries:
            return f"its checkpoint has no {key!r} for the weight {variable.name!r}"
        problem = checkpoint_bundle.stored_tensor_problem(
            prefix, header, entries[key], variable)
        if problem is not None:
            return f"the weight {variable.name!r} ({key!r}) {problem}"
    return None


def output_problem(outputs, rows, dim, expected=None, tolerance=TOLERANCE, output=OUTPUT):
    """What is wrong with an exported model's outputs, or None.

    They must be `{output: float32 [rows, dim]}` (tensors or arrays), all
    finite, and within `tolerance` of `expected` when it is given.
    """
    if set(outputs) != {output}:
        return f"it returned {sorted(outputs)}, not [{output!r}]"
    vectors = np.asarray(outputs[output])
    if vectors.dtype.name != "float32":
        return f"{output!r} is {vectors.dtype.name}, not float32"
    if vectors.shape != (rows, dim):
        return f"{output!r} has shape {list(vectors.shape)}, not {[rows, dim]}"
    if not np.isfinite(vectors).all():
        return f"{output!r} has {int((~np.isfinite(vectors)).sum())} non-finite values"
    if expected is None:
        return None
    difference = np.abs(vectors - expected)
    allowed = tolerance + tolerance * np.abs(expected)
    if not (difference <= allowed).all():
        return (
            f"{output!r} differs from the in-process encoder's vectors by up to "
            f"{float(np.nanmax(difference)):.3g} (tolerance {tolerance:g})"
        )
    return None


def in_process_vectors(encoder, inputs, normalize):
    """The encoder's vectors (of texts, or of a token dict) as exported."""
    if isinstance(inputs, dict):
        inputs = dict(inputs, padding_mask=inputs["padding_mask"].astype(bool))
        vectors = keras.ops.convert_to_numpy(encoder(inputs, training=False))
    else:
        # Texts the check makes up warn nothing (a TruncationWarning when
        # the preprocessor's sequence_length is tiny).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            vectors = encoder.encode(inputs, prompt="")  # Clients prepend it.
    vectors = np.asarray(vectors, "float32")
    if normalize:
        # tf.math.l2_normalize's epsilon: a zero vector stays zero.
        squares = np.sum(np.square(vectors), axis=-1, keepdims=True)
        vectors = vectors / np.sqrt(np.maximum(squares, 1e-12))
    return vectors


def fixed_token_ids(encoder, names):
    """Two rows of token ids for an encoder without a preprocessor."""
    vocabulary = getattr(encoder.backbone, "vocabulary_size", None) or 8
    ids = np.array([[1, 5, 6, 7, 2], [1, 5, 2, 0, 0]]) % vocabulary
    mask = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    values = {"token_ids": ids, "padding_mask": mask, "segment_ids": np.zeros_like(ids)}
    return {name: values[name].astype("int32") for name in names}


def text_resources(preprocessor):
    """The TensorFlow Text tokenizers (tf.Modules) inside a preprocessor."""
    import tensorflow as tf

    if preprocessor is None:
        return []
    return [
        value
        for layer in [preprocessor, *compat.sublayers(preprocessor)]
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
