"""`benchmarks/gpu.py`'s kcse worker: `kcse.SimCSE` fit and encoder predict under Keras 3 on JAX.

Also one cell's compiled train programs: a fresh model fits one epoch of
Chinese STS-B's training sentences (Su's protocol, their real lengths) at
Su's batch and length, and every trace of the train step is counted (each
trace is a program XLA compiles, or reads from the persistent cache).
"""

import os
import sys
import time

from gpu_common import (
    ATTENTION_DROPOUT, CELL_BATCH_SIZE, CELL_LENGTH, HIDDEN_DROPOUT, LEARNING_RATE,
    MAX_POSITIONS, SHAPES, TEMPERATURE, check_device, encode_sentences, encoding_seed, key,
    measurements, say, step_statistics, token_data, training_seed,
)


def clock_callback(keras):
    """A Keras callback class recording each step's end time and loss."""

    class Clock(keras.callbacks.Callback):
        """Reading a step's loss waits for the step to finish.

        Safe for Keras' asynchronous dispatch: where every callback is (kcse's
        on an accelerator), Keras calls it in a thread beside the training
        loop, which goes on dispatching steps while this one waits, so the
        clock does not make the steps synchronous.
        """

        async_safe = True

        def __init__(self):
            super().__init__()
            self.end_of, self.loss_of = {}, {}

        def on_train_batch_end(self, batch, logs=None):
            loss = float(logs["loss"])
            self.end_of[batch], self.loss_of[batch] = time.perf_counter(), loss

        def ends(self):
            return [self.end_of[batch] for batch in sorted(self.end_of)]

        def losses(self):
            return [self.loss_of[batch] for batch in sorted(self.loss_of)]

    return Clock


def build_simcse(args, shape, precision):
    """A fresh BERT of `shape` in `precision`, as kcse's SentenceEncoder, in a compiled SimCSE."""
    import keras
    import keras_hub

    import kcse
    from kcse.foundation.precision import set_precision

    set_precision(precision)
    keras.utils.set_random_seed(0)
    s = SHAPES[shape]
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=args.vocabulary, num_layers=s["layers"], num_heads=s["heads"],
        hidden_dim=s["hidden"], intermediate_dim=s["intermediate"],
        max_sequence_length=MAX_POSITIONS, dropout=ATTENTION_DROPOUT,
    )
    encoder = kcse.SentenceEncoder(backbone, None, pooling="cls", hidden_dropout=HIDDEN_DROPOUT)
    simcse = kcse.SimCSE(encoder, temperature=TEMPERATURE)
    simcse.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE), jit_compile=True)
    return encoder, simcse


def measure_training(keras, simcse, x, args, record):
    """First step (compilation included) of a warm-up epoch, then a timed epoch's steps."""
    Clock = clock_callback(keras)
    clock = Clock()
    start = time.perf_counter()
    simcse.fit(x, batch_size=args.batch_size, epochs=1, verbose=0, callbacks=[clock])
    record["first_step_s"] = clock.ends()[0] - start
    # Whether fit trained a copy of the used token-embedding rows (kcse
    # does on a CPU): its shape follows the data, so is its program.
    record["embedding_rows_copy"] = getattr(simcse, "_embedding_rows", None) is not None
    if args.first_steps_only:
        return
    clock = Clock()
    history = simcse.fit(x, batch_size=args.batch_size, epochs=1, verbose=0, callbacks=[clock])
    keras.ops.convert_to_numpy(simcse.encoder.backbone.trainable_weights[-1])
    ends = clock.ends()
    if len(ends) != args.steps:
        raise SystemExit(f"kcse ran {len(ends)} steps, not {args.steps}")
    record.update(step_statistics([b - a for a, b in zip(ends, ends[1:])]))
    record["loss"] = float(history.history["loss"][-1])
    record["last_step_loss"] = clock.losses()[-1]


def measure_encoding(keras, encoder, args, shape, length, record, sentences):
    """Seconds of the first encoded batch (it compiles), then sentences/s."""
    import numpy as np

    batch = args.encode_batch_size
    encoded = token_data(sentences, length, args.vocabulary, encoding_seed(shape, length))
    first = {name: value[:batch] for name, value in encoded.items()}
    start = time.perf_counter()
    keras.Model.predict(encoder, first, batch_size=batch, verbose=0)
    record["first_encode_s"] = time.perf_counter() - start
    if args.first_steps_only:
        return
    start = time.perf_counter()
    vectors = np.asarray(keras.Model.predict(encoder, encoded, batch_size=batch, verbose=0))
    record["encode_sentences_per_s"] = sentences / (time.perf_counter() - start)
    record["encode_dtype"] = str(vectors.dtype)
    record["vectors_finite"] = bool(np.isfinite(vectors).all())


def stsb_lengths(folder, limit):
    """Token counts of STS-B's training sentences under Su's protocol: characters + 2, at most 64.

    kcse's "su" protocol: both sides of every pair of all three splits,
    shuffled (seed 0), the first `limit`. Chinese BERT's WordPiece gives one
    token a character (Latin words and digits fewer), plus [CLS] and [SEP].
    """
    from kcse.data import read_chinese_task
    from kcse.experiments.protocols import PROTOCOLS, training_sentences

    protocol = PROTOCOLS["su"]
    data = {split: read_chinese_task(folder, "STS-B", split) for split in protocol.training_splits}
    sentences = training_sentences(data, protocol, "STS-B", seed=0)[:limit]
    return [min(len(sentence) + 2, CELL_LENGTH) for sentence in sentences]


def count_cell_programs(args, precision):
    """Train programs of one STS-B cell: traces of a fresh SimCSE's train step in one epoch."""
    import keras

    lengths = stsb_lengths(args.stsb_dir, args.cell_sentences)
    x = token_data(len(lengths), CELL_LENGTH, args.vocabulary, seed=7, lengths=lengths)
    _, simcse = build_simcse(args, args.shape, precision)
    traced_shapes = []
    step = simcse.train_step

    def counted_train_step(*inputs, **kwargs):
        data = inputs[-1]
        features = data[0] if isinstance(data, tuple) else data
        traced_shapes.append(list(features["token_ids"].shape))
        return step(*inputs, **kwargs)

    simcse.train_step = counted_train_step
    Clock = clock_callback(keras)
    clock = Clock()
    start = time.perf_counter()
    simcse.fit(x, batch_size=CELL_BATCH_SIZE, epochs=1, verbose=0, callbacks=[clock])
    seconds = time.perf_counter() - start
    return {"train_programs": len(traced_shapes), "traced_shapes": traced_shapes,
            "sentences": len(lengths), "steps": len(clock.ends()), "fit_s": seconds,
            "batch_size": CELL_BATCH_SIZE, "length": CELL_LENGTH, "precision": precision,
            "mean_tokens": sum(lengths) / len(lengths), "longest": max(lengths)}


def start_jax(args):
    """Keras on JAX with the persistent compilation cache; (jax, keras, keras_hub, info)."""
    os.environ["KERAS_BACKEND"] = "jax"
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    began = time.perf_counter()
    import jax
    import keras
    import keras_hub

    from kcse.foundation.compilation import use_compilation_cache

    if keras.backend.backend() != "jax":
        raise SystemExit(f"Keras runs on {keras.backend.backend()}, not JAX")
    cache = str(use_compilation_cache(args.cache)) if args.cache else None
    check_device(args, "JAX", jax.default_backend() != "cpu")
    cache_state = "off" if cache is None else (
        "filled by an earlier process" if os.listdir(cache) else "empty")
    info = {"backend": f"jax {jax.__version__}, {jax.default_backend()}",
            "device_name": jax.devices()[0].device_kind, "keras": keras.__version__,
            "keras_hub": keras_hub.__version__, "cache": cache, "cache_state": cache_state,
            "imports_s": time.perf_counter() - began,
            "jax_default_matmul_precision": str(jax.config.jax_default_matmul_precision)}
    say("kcse", f"keras {info['keras']}, keras-hub {info['keras_hub']}, {info['backend']} on "
        f"{info['device_name']}; imports {info['imports_s']:.1f} s; compilation cache "
        f"{cache_state}")
    return jax, keras, info


def kcse_worker(args):
    """kcse's SimCSE fit and encoder predict under Keras 3 on JAX; the cell's programs."""
    jax, keras, info = start_jax(args)
    sentences = encode_sentences(args, jax.default_backend() != "cpu")
    results, built = {}, {}
    for shape, precision, length in measurements(args):
        if (shape, precision) not in built:
            built.clear()  # One model in memory at a time.
            built[(shape, precision)] = build_simcse(args, shape, precision)
        encoder, simcse = built[(shape, precision)]
        x = token_data(args.steps * args.batch_size, length, args.vocabulary,
                       training_seed(shape, length))
        record = {}
        measure_training(keras, simcse, x, args, record)
        measure_encoding(keras, encoder, args, shape, length, record, sentences)
        results[key(shape, precision, length)] = record
        say("kcse", f"{key(shape, precision, length)}: " + summary_line(record))
    built.clear()
    output = {"results": results, "encode_sentences": sentences,
              "tensorflow_imported": "tensorflow" in sys.modules, **info}
    if not args.first_steps_only:
        output["cell"] = count_cell_programs(args, args.projection_precision)
        say("kcse", "one STS-B cell: {train_programs} train program(s) {traced_shapes}, "
            "{steps} steps, fit {fit_s:.1f} s".format(**output["cell"]))
    return output


def summary_line(record):
    parts = [f"first step {record['first_step_s']:.2f} s",
             f"first encode batch {record['first_encode_s']:.2f} s"]
    if "ms_per_step" in record:
        parts += [f"{record['ms_per_step']:.2f} ms/step (min {record['ms_min']:.2f}, "
                  f"p90 {record['ms_p90']:.2f})", f"loss {record['loss']:.4f}"]
    if record.get("encode_sentences_per_s"):
        parts.append(f"encode {record['encode_sentences_per_s']:.0f} sentences/s")
    return ", ".join(parts)
