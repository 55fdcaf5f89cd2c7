"""Training only the token-embedding rows a fit's sentences use.

A sentence encoder's token embedding is most of its weights (multilingual-
e5-small: 250,037 × 384 of 118M), yet a fit touches the rows of the tokens
its sentences hold: a few thousand. Trained as one dense variable, the
table carries a dense gradient and, under Adam, two optimizer slots of its
full size (1.15 GB for e5-small). `EmbeddingRows` trains a copy of the used
rows instead: while an objective's train step runs, the backbone's token
embedding looks those tokens up in the copy and every other token in the
table, which is frozen for the fit; after every step the copy is written
back into the table, so callbacks, `encode` and saving see the current
weights.

The result equals training the whole table whenever a row that gets no
gradient does not move: true of SGD (with momentum or not), Adam, Nadam,
Adamax, RMSprop, Adagrad, Adadelta and Lion without weight decay or EMA
(`separable_optimizer`); others train the whole table.
"""

import contextlib
import threading

import keras
import numpy as np
from keras import ops

from kcse.foundation import compat
from kcse.models.embedding_lookup import gather_rows

# Keras' optimizers whose update of a variable row is zero while its
# gradient and its slots are zero (their initial state).
_SEPARABLE_OPTIMIZERS = (
    keras.optimizers.SGD,
    keras.optimizers.Adam,
    keras.optimizers.Nadam,
    keras.optimizers.Adamax,
    keras.optimizers.RMSprop,
    keras.optimizers.Adagrad,
    keras.optimizers.Adadelta,
    keras.optimizers.Lion,
)

# The `EmbeddingRows` whose train step the current thread is tracing (each
# replica of a `tf.distribute` strategy traces in a thread of its own).
_tracing = threading.local()


def separable_optimizer(optimizer):
    """Whether `optimizer` leaves rows with no gradient exactly where they are.

    Weight decay and EMA move every row at every step, so an optimizer with
    either is not; nor is one kcse does not know (a loss-scale wrapper, a
    custom class).

    ```python
    import keras
    from kcse.objectives.embedding_rows import separable_optimizer

    assert separable_optimizer(keras.optimizers.Adam(1e-5))
    assert separable_optimizer(keras.optimizers.SGD(0.1, momentum=0.9))
    assert not separable_optimizer(keras.optimizers.AdamW(1e-5))  # weight decay
    ```
    """
    return (
        type(optimizer) in _SEPARABLE_OPTIMIZERS
        or type(optimizer) is keras.optimizers.AdamW
    ) and not optimizer.weight_decay and not optimizer.use_ema


def variable_scope(model):
    """Where `model`'s new variables belong: its `tf.distribute` strategy's scope.

    Under JAX the global `keras.distribution` lays variables out by itself.
    """
    if keras.backend.backend() == "tensorflow":
        return model.distribute_strategy.scope()
    return contextlib.nullcontext()


class EmbeddingRows:
    """The trained copy of some rows of a token-embedding layer.

    Made by `EncoderObjective.fit`: `rows`, a variable of the objective
    (never of the encoder), holds rows `ids` of `embedding`'s table and is
    trained by `optimizer`. Use `install()` / `uninstall()` around a fit,
    `tracing()` around the objective's train step, and `write_back()` after
    each step.

    Args:
        embedding: the backbone's `keras.layers.Embedding`.
        ids: sorted distinct int token ids.
        rows: a float variable of shape `(len(ids), embedding.output_dim)`;
            set from the table here.
        optimizer: the optimizer that trains `rows`.
    """

    def __init__(self, embedding, ids, rows, optimizer):
        self.embedding = embedding
        self.table = compat.embedding_table(embedding)
        self.ids = np.asarray(ids, "int32")
        self.row_of_id = np.full((embedding.input_dim,), -1, "int32")
        self.row_of_id[self.ids] = np.arange(len(self.ids), dtype="int32")
        self.rows = rows
        self.optimizer = optimizer
        self.read_table()

    def covers(self, ids):
        """Whether every id of `ids` has a row here."""
        return bool(np.all(self.row_of_id[np.asarray(ids, "int32")] >= 0))

    def read_table(self):
        """Sets the rows from the table (it may have changed since the last fit)."""
        self.rows.assign(gather_rows(self.table, self.ids))

    def write_back(self):
        """Writes the rows into the table, in place on TensorFlow."""
        variable = self.table
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            variable.value.scatter_update(
                tf.IndexedSlices(self.rows.value, tf.constant(self.ids))
            )
        else:
            variable.assign(
                ops.scatter_update(variable.value, self.ids[:, None], self.rows.value)
            )

    def install(self):
        """Freezes the table and routes lookups made in `tracing()` to the rows."""
        embedding = self.embedding
        self._installed_call = embedding.__dict__.get("call")
        original = embedding.call

        def call(inputs, *args, **kwargs):
            if getattr(_tracing, "rows", None) is not self or args or kwargs:
                return original(inputs, *args, **kwargs)
            return self.lookup(inputs)

        self.table.trainable = False
        object.__setattr__(embedding, "call", call)

    def uninstall(self):
        """Undoes `install()`: the table trains as a whole again."""
        self.embedding.__dict__.pop("call", None)
        if self._installed_call is not None:
            object.__setattr__(self.embedding, "call", self._installed_call)
        self.table.trainable = True

    @contextlib.contextmanager
    def tracing(self):
        """Context in which the token embedding looks up the used rows."""
        previous = getattr(_tracing, "rows", None)
        _tracing.rows = self
        try:
            yield
        finally:
            _tracing.rows = previous

    def lookup(self, token_ids):
        """Vectors of `token_ids`: from the rows, or from the frozen table."""
        token_ids = ops.cast(token_ids, "int32")
        row = ops.take(ops.convert_to_tensor(self.row_of_id), token_ids, axis=0)
        trained = gather_rows(self.rows, ops.maximum(row, 0))
        frozen = gather_rows(self.table, token_ids)
        vectors = ops.where(ops.expand_dims(row >= 0, -1), trained, frozen)
        return ops.cast(vectors, self.embedding.compute_dtype)


class WriteBackEmbeddingRows(keras.callbacks.Callback):
    """Writes trained embedding rows into the encoder after every step.

    First of a fit's callbacks, so the others see the current weights.
    """

    def __init__(self, rows):
        super().__init__()
        self.rows = rows

    def on_train_batch_end(self, batch, logs=None):
        _ = self.model  # Under JAX, syncs the training state into the variables.
        self.rows.write_back()
