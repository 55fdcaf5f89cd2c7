"""The base of every training objective: a Task wrapping a SentenceEncoder."""

import contextlib

import keras
import keras_hub
import numpy as np
from keras import ops

from kcse.foundation.compilation import compiles_per_shape
from kcse.foundation.compilation import on_accelerator
from kcse.foundation.compilation import trim_padding
from kcse.models.block_recomputation import recomputed_blocks
from kcse.models.embedding_lookup import token_embedding
from kcse.objectives.embedding_rows import EmbeddingRows
from kcse.objectives.embedding_rows import WriteBackEmbeddingRows
from kcse.objectives.embedding_rows import separable_optimizer
from kcse.objectives.embedding_rows import variable_scope
from kcse.objectives.token_batches import DrawnPairBatches
from kcse.objectives.token_batches import TokenBatches
from kcse.objectives.token_batches import token_arrays
from kcse.objectives.training_data import is_in_memory
from kcse.objectives.training_data import is_tf_dataset
from kcse.objectives.training_data import require_tensorflow
from kcse.objectives.training_data import sample_count
from kcse.objectives.training_data import static_batch_size
from kcse.objectives.training_data import tensorflow_importable
from kcse.objectives.training_data import training_dataset
from kcse.objectives.training_data import with_batch_size
from kcse.foundation import progress
from kcse.foundation.training_progress import StepCounter
from kcse.foundation.training_stops import StopOnInterrupt
from kcse.foundation.training_stops import StopOnNonFiniteLoss
from kcse.foundation.truncation import text_tokens
from kcse.foundation.truncation import truncated_texts
from kcse.foundation.truncation import warn_if_truncated
from kcse.foundation.validation import check_count
from kcse.foundation.validation import check_preprocessor_length
from kcse.foundation.validation import check_texts
from kcse.foundation import compat
from kcse import distribution


def is_token_arrays(x):
    """Whether `x` is a dict of token arrays (with a `padding_mask`)."""
    return isinstance(x, dict) and "padding_mask" in x


class EncoderObjective(keras_hub.models.Task):
    """A trainable objective around a `kcse.SentenceEncoder`.

    Subclasses define `call` (what the encoder produces for a batch) and set
    `objective_loss`, a `keras.losses.Loss` of `(y, y_pred, sample_weight)`,
    or override `objective` when the loss has several terms; losses added
    by layers are summed to it. The objective shares the
    encoder's layers, so training it trains the encoder in place; `fit`
    accepts raw text, tokenised by the encoder's preprocessor: a batch of
    strings, or a tuple of k batches (k sentences per sample, e.g. pairs
    or triplets), which becomes token arrays of shape `(batch, k, length)`
    (see `encode_columns`).

    Args:
        encoder: a `kcse.SentenceEncoder`.
        rematerialize: bool. Whether training recomputes each transformer
            block in the backward pass instead of keeping its activations
            (`kcse.models.block_recomputation`; TensorFlow only): the same
            gradients, dropout included, for one more forward pass of the
            stack per step. For multilingual-e5-small at batch 64, length
            64, `SimCSE.fit` of 256 sentences peaked at 3.3 GB instead of
            4.5 GB and took 61 s instead of 46 s, load included (2 CPU
            cores). The `kcse` command and the recipes
            turn it on with TensorFlow (`--no-rematerialize` turns it off).
        padded_lengths: tuple of ints, or None. Where train steps are
            compiled per input shape (JAX; TensorFlow with
            `jit_compile=True`; see `kcse.foundation.compilation`), the lengths token
            batches are padded to: each batch takes the smallest that holds
            its longest sentence, the preprocessor's full length beyond
            them. None (default) pads every batch to the full length: one
            compiled shape, plus one for a last, partial batch. Elsewhere
            batches are cut to their longest sentence rounded up to 8.

    Example:

    A minimal objective (every kcse objective, `kcse.SimCSE` included, is
    built this way), on a tiny random encoder; `run_eagerly=True` only
    skips graph tracing for this toy run.

    ```python
    import keras
    import keras_hub
    import kcse


    class CosineRegression(kcse.objectives.EncoderObjective):
        # Fits the cosine of each sentence pair to its label.

        def __init__(self, encoder, **kwargs):
            super().__init__(encoder, **kwargs)
            self.objective_loss = keras.losses.MeanSquaredError()

        def call(self, inputs, training=None):
            pairs = self.encode_columns(inputs, training, 2, "sentence pairs")
            pairs = keras.ops.normalize(pairs, axis=-1)  # (batch, 2, dim)
            return keras.ops.sum(pairs[:, 0] * pairs[:, 1], axis=-1)  # cosines


    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                  "a", "cat", "dog", "sat", "ran", "the"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="last_avg")
    model = CosineRegression(encoder)
    model.compile(run_eagerly=True)  # optimizer "auto": Adam(1e-5)
    history = model.fit((["a cat sat", "the dog ran"], ["the cat sat", "a cat ran"]),
                        [1.0, 0.0], batch_size=2, epochs=1, verbose=0)
    history.history["loss"]  # one float per epoch, e.g. [0.5]
    assert issubclass(kcse.SimCSE, kcse.objectives.EncoderObjective)
    ```
    """

    objective_loss = None
    # Whether each sentence's negatives are the batch's other sentences, so
    # that a batch needs at least two samples.
    in_batch_negatives = False

    def __init__(self, encoder, rematerialize=False, padded_lengths=None, **kwargs):
        kwargs.setdefault("compile", False)
        # The encoder's precision: under "mixed_float16" Keras' compile then
        # wraps the optimizer in a LossScaleOptimizer.
        kwargs.setdefault("dtype", encoder.dtype_policy)
        super().__init__(**kwargs)
        self.encoder = encoder
        self.preprocessor = encoder.preprocessor
        if rematerialize and keras.backend.backend() != "tensorflow":
            raise ValueError(
                "rematerialize=True needs the TensorFlow backend; this is "
                f"{keras.backend.backend()}."
            )
        self.rematerialize = bool(rematerialize)
        if padded_lengths is not None:
            padded_lengths = tuple(
                check_count(length, f"padded_lengths[{index}]")
                for index, length in enumerate(padded_lengths)
            )
        self.padded_lengths = padded_lengths

    def preprocess_samples(self, x, y=None, sample_weight=None):
        """Tokenises a batch of text, or takes its token arrays as they
        are, and trims its padding (runs inside tf.data).

        A batch of a known size keeps it (the tokeniser loses it): Keras
        needs it to give each process of a multi-process run its block.
        """
        import tensorflow as tf

        rows = static_batch_size(x)
        lengths = self._batch_lengths()
        if isinstance(x, tuple) and self.preprocessor is not None:
            columns = [self.preprocessor(column) for column in x]
            x = {
                key: tf.stack([column[key] for column in columns], axis=1)
                for key in columns[0]
            }
        elif not is_token_arrays(x):  # Text (or arrays without a preprocessor).
            x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(
                super().preprocess_samples(x, y, sample_weight)
            )
        if is_token_arrays(x):
            x = trim_padding(x, lengths)
        samples = keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
        return with_batch_size(samples, rows)

    def _batch_lengths(self):
        """The lengths training batches are padded to (`trim_padding`'s `lengths`)."""
        if not compiles_per_shape(self):
            return None  # Multiples of 8.
        return self.padded_lengths or ()  # () : the full length only.

    def encode_columns(self, inputs, training=None, columns=None, kind=""):
        """Vectors `(batch, k, dim)` of token arrays `(batch, k, length)`.

        With `columns`, samples must hold that many sentences (`kind` names
        them in the error).
        """
        given = inputs["token_ids"].shape
        if columns is not None and (len(given) != 3 or given[1] != columns):
            raise ValueError(
                f"{type(self).__name__} trains on {kind}: pass a tuple of "
                f"{columns} string columns; got token arrays of shape {given}."
            )
        shape = ops.shape(inputs["token_ids"])
        flat = {
            key: ops.reshape(value, (-1, shape[-1]))
            for key, value in inputs.items()
        }
        vectors = self.encoder(flat, training=training)
        return ops.reshape(vectors, (shape[0], shape[1], -1))

    def compute_loss(
        self, x=None, y=None, y_pred=None, sample_weight=None, training=True
    ):
        losses = [self.objective(y, y_pred, sample_weight)]
        losses += [compat.aggregate_additional_loss(self, loss) for loss in self.losses]
        return ops.sum(ops.stack(losses))

    def objective(self, y, y_pred, sample_weight):
        """The training loss of a batch (before layers' added losses)."""
        return self.objective_loss(y, y_pred, sample_weight)

    def fit(self, x=None, y=None, batch_size=None, shuffle=True, callbacks=None,
            **kwargs):
        """Trains the encoder; see `keras.Model.fit`.

        `x` is raw text (or token dicts): a list or array, or a tuple of
        them (several sentences per sample), which is reshuffled every epoch
        when `shuffle` (in-batch negatives depend on which sentences share a
        batch), or a `tf.data.Dataset`, which is used as given (shuffle it
        yourself; a sample of several sentences is `((s1, s2, ...), y)`, or
        `((s1, s2, ...),)` without labels).

        In-memory text is checked before training, and sentences longer
        than the preprocessor's `sequence_length` are counted in one
        `kcse.TruncationWarning`. For objectives with
        in-batch negatives (`in_batch_negatives`: SimCSE, ConSERT's
        contrastive modes, SG-OPT, supervised SimCSE), a batch of one sample
        has none, so a last batch of exactly one in-memory sample is left
        out (after reshuffling: a different sample each epoch).

        In a multi-process run (`kcse.distribution.start_data_parallel`)
        every process passes the same global data; each trains on its
        block of every global batch, and a last, partial batch is left out.

        In-memory text is tokenised once, before training, into token
        arrays of the preprocessor's full length (`token_arrays`: for a
        corpus too large for them, pass a `tf.data.Dataset` of strings,
        which is tokenised batch by batch inside the pipeline); they are
        batched by `tf.data` (`training_dataset`), or where TensorFlow
        cannot be imported (JAX) fed as numpy batches (`TokenBatches`);
        `tf.data.Dataset`s and multi-process runs need TensorFlow. Each
        batch is cut to its longest sentence, or where train steps compile
        per input shape (JAX, XLA) padded to `padded_lengths` (see the
        class).

        The encoder trains exactly the variables its pooling uses (the
        pooler only for P2), and a NaN or infinite loss stops training at
        once with `NonFiniteLossError` (step and loss).

        With in-memory text and an optimizer that leaves rows without
        gradient where they are (`embedding_rows.separable_optimizer`: SGD,
        Adam, RMSprop... without weight decay or EMA), only the rows of the
        token embedding that the text's tokens use are trained, as a copy
        (`embedding_rows`, a variable of this objective, not of the encoder)
        written back into the encoder after every step: the same result as
        training the whole table, without its dense gradient and optimizer
        slots (for multilingual-e5-small, 1.15 GB less under Adam). A later
        `fit` on text with other tokens extends the copy, carrying the
        optimizer's state over; a `tf.data.Dataset` after that extends it to
        the whole table.

        Raises:
            ValueError: `epochs` < 1; in-memory `x` has no samples, or
                columns of different lengths; `batch_size` < 1; or, with
                in-batch negatives, `batch_size` or the sample count is below
                2 (under a `tf.distribute` strategy `batch_size` is the global
                batch); in a multi-process run, `batch_size` does not split
                evenly over the devices or exceeds the sample count, or a
                `tf.data.Dataset`'s batches have no fixed size.
            TypeError: `epochs` or `batch_size` is not an int, or a text is
                not a str (the message names it, e.g. `x[1][3]`).
        """
        check_count(kwargs.get("epochs", 1), "epochs")
        check_preprocessor_length(self.preprocessor, "fit")
        used_ids = None
        if is_in_memory(x):
            batch_size, used_ids = self._check_in_memory(x, batch_size)
            sharded = distribution.process_count() > 1
            x = token_arrays(self.preprocessor, x)
            if not sharded and not tensorflow_importable():
                x = TokenBatches(
                    x, y,
                    kwargs.pop("sample_weight", None), batch_size, shuffle,
                    drop_single_last=self.in_batch_negatives,
                    lengths=self._batch_lengths(),
                )
                return self._fit_batches(x, None, None, used_ids, callbacks, **kwargs)
            require_tensorflow("Training in several processes")
            x = training_dataset(
                x, y, kwargs.pop("sample_weight", None), batch_size, shuffle,
                drop_single_last=self.in_batch_negatives, drop_remainder=sharded,
            )
            if sharded and kwargs.get("steps_per_epoch") is None:
                # Keras splits the batches over the processes with
                # `Dataset.rebatch`, after which their count is unknown.
                kwargs["steps_per_epoch"] = int(x.cardinality())
                x = x.repeat()
            y = batch_size = None
        elif is_tf_dataset(x):
            distribution.check_global_dataset(x)
        return self._fit_batches(x, y, batch_size, used_ids, callbacks, **kwargs)

    def _fit_batches(self, x, y, batch_size, used_ids, callbacks, **kwargs):
        """`keras.Model.fit` on batches `fit` has checked and made.

        `used_ids`: the token ids of the text `x` is drawn from (sorted and
        distinct), so that only their embedding rows train; None when not
        known (a stream), which trains the whole table.
        """
        self.encoder.train_used_layers_only()
        callbacks = [StopOnNonFiniteLoss(async_safe=on_accelerator()), StopOnInterrupt(),
                     *(callbacks or [])]
        rows = self._trained_embedding_rows(used_ids)
        with contextlib.ExitStack() as context:
            # The traced train step is freed with the objective.
            context.enter_context(compat.released_custom_gradients())
            if self.rematerialize:
                context.enter_context(recomputed_blocks(self.encoder.backbone))
            if rows is not None:
                rows.install()
                context.callback(rows.uninstall)
                callbacks = [WriteBackEmbeddingRows(rows), *callbacks]
            if progress.is_reporting():  # A command's: its bar, not Keras'.
                steps = context.enter_context(progress.task("training", unit="step"))
                callbacks = [*callbacks, StepCounter(steps)]
                kwargs["verbose"] = 0
            optimizer = getattr(self, "optimizer", None)
            if optimizer is not None and not optimizer.built:
                # Now rather than where Keras builds it on TensorFlow: inside
                # the first traced step, whose slot variables TensorFlow then
                # lifts out of the graph one by one before tracing the whole
                # step a second time (about a third of a small model's fit).
                with variable_scope(self):
                    optimizer.build(self.trainable_variables)
            if isinstance(x, (TokenBatches, DrawnPairBatches)):  # Tokenised: keras-hub's
                return keras.Model.fit(  # fit would map the preprocessor over them.
                    self, x, shuffle=False, callbacks=callbacks, **kwargs
                )
            return super().fit(
                x, y, batch_size=batch_size, shuffle=False, callbacks=callbacks,
                **kwargs,
            )

    def train_step(self, *args, **kwargs):
        rows = self._embedding_rows
        if rows is None:
            return super().train_step(*args, **kwargs)
        with rows.tracing():
            return super().train_step(*args, **kwargs)

    _embedding_rows = None  # The `EmbeddingRows` the optimizer trains.

    def _trained_embedding_rows(self, used_ids):
        """The `EmbeddingRows` this fit trains, or None: the whole table.

        `used_ids`: the token ids of in-memory text, None for a stream.
        Rows the optimizer already trains are kept, extended (to every row
        for a stream) when the text has other tokens, and re-read from the
        table, which may have been set since.
        """
        embedding = token_embedding(self.encoder.backbone)
        optimizer = getattr(self, "optimizer", None)
        # On an accelerator the whole table's gradient is cheap, and writing
        # rows back after every step would stall it.
        if embedding is None or optimizer is None or on_accelerator():
            return None
        rows = self._embedding_rows
        if rows is not None and rows.optimizer is optimizer and optimizer.built:
            if used_ids is None:
                used_ids = np.arange(embedding.input_dim)
            if not rows.covers(used_ids):
                rows = self._extend_embedding_rows(rows, used_ids)
            rows.read_table()
            return rows
        self._drop_embedding_rows()  # Of an optimizer no longer used.
        table = compat.embedding_table(embedding)
        if (
            used_ids is None or optimizer.built or not separable_optimizer(optimizer)
            or embedding.quantization_mode is not None or embedding.lora_enabled
            or not any(v is table for v in self.trainable_variables)
            or not (len(used_ids) and 0 <= used_ids[0] and used_ids[-1] < embedding.input_dim)
        ):
            return None
        return self._new_embedding_rows(embedding, used_ids, optimizer)

    def _new_embedding_rows(self, embedding, ids, optimizer):
        with variable_scope(self), compat.unlocked_state(self):
            self.embedding_rows = self.add_weight(
                shape=(len(ids), embedding.output_dim), initializer="zeros",
                dtype=compat.embedding_table(embedding).dtype, name="embedding_rows",
            )
        self._embedding_rows = EmbeddingRows(
            embedding, ids, self.embedding_rows, optimizer
        )
        return self._embedding_rows

    def _drop_embedding_rows(self):
        if self._embedding_rows is not None:
            del self.embedding_rows
            self._embedding_rows = None

    def _extend_embedding_rows(self, rows, used_ids):
        """Rows for `used_ids` too, with the optimizer's state carried over.

        The optimizer was built with the old rows; a new one of the same
        configuration is built with the new rows and takes every state
        variable of the old one, a slot of the old rows into its rows.
        """
        old_optimizer, old_ids = rows.optimizer, rows.ids
        old_slots = [ops.convert_to_numpy(v) for v in old_optimizer.variables]
        old_shape = tuple(rows.rows.shape)
        with variable_scope(self):  # A TF optimizer keeps the strategy it is made in.
            optimizer = type(old_optimizer).from_config(old_optimizer.get_config())
        self._drop_embedding_rows()
        rows = self._new_embedding_rows(
            rows.embedding, np.union1d(old_ids, used_ids), optimizer
        )
        rows.install()  # The table frozen: the variables the optimizer had.
        try:
            with variable_scope(self):
                optimizer.build(self.trainable_variables)
        finally:
            rows.uninstall()
        new_shape = tuple(rows.rows.shape)
        positions = np.searchsorted(rows.ids, old_ids)
        if len(optimizer.variables) != len(old_slots):
            raise RuntimeError(f"{type(optimizer).__name__} changed its state layout.")
        for variable, old in zip(optimizer.variables, old_slots):
            if old.shape == tuple(variable.shape):
                variable.assign(old)
            elif old.shape == old_shape and tuple(variable.shape) == new_shape:
                value = ops.convert_to_numpy(variable)  # Its initial state.
                value[positions] = old
                variable.assign(value)
            else:
                raise RuntimeError(f"{type(optimizer).__name__} changed its state layout.")
        self.optimizer = optimizer
        self.train_function = None  # Traced with the old rows.
        return rows

    def _check_in_memory(self, x, batch_size):
        """Checks in-memory training data and warns of truncation.

        Returns the batch size (32 when None) and the distinct token ids of
        the data (None when they are not known before tokenizing).
        """
        count = sample_count(x)
        if count == 0:
            raise ValueError("x holds no training samples.")
        batch_size = check_count(32 if batch_size is None else batch_size, "batch_size")
        name = type(self).__name__
        if self.in_batch_negatives and min(batch_size, count) < 2:
            raise ValueError(
                f"{name} needs at least 2 sentences per batch for in-batch "
                f"negatives; got batch_size={batch_size} and {count} sample(s) "
                "(under a tf.distribute strategy, batch_size is the global batch)."
            )
        distribution.check_global_batch_size(batch_size, count)
        if isinstance(x, dict):
            if "token_ids" not in x:
                return batch_size, None
            return batch_size, np.unique(np.asarray(x["token_ids"]))
        if self.preprocessor is None:
            return batch_size, None
        columns = dict(enumerate(x)) if isinstance(x, tuple) else {None: x}
        texts = []
        for index, column in columns.items():
            texts += check_texts(column, "x" if index is None else f"x[{index}]")
        counts, ids = text_tokens(self.preprocessor, texts)
        warn_if_truncated(
            int(truncated_texts(self.preprocessor, texts, counts).sum()),
            len(texts),
            getattr(self.preprocessor, "sequence_length", None),
            "are truncated in training",
        )
        return batch_size, ids

    def compile(self, optimizer="auto", **kwargs):
        """Configures training; `"auto"` is Adam with learning rate 1e-5."""
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(1e-5)
        super().compile(optimizer=optimizer, **kwargs)

    def get_config(self):
        return {
            "encoder": keras.layers.serialize(self.encoder),
            "rematerialize": self.rematerialize,
            "padded_lengths": self.padded_lengths,
            "name": self.name,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["encoder"] = keras.layers.deserialize(config["encoder"])
        return cls(**config)
