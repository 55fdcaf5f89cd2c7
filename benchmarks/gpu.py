"""Training and encoding speed on one device: kcse (Keras 3 on JAX) vs HF transformers (PyTorch).

The same unsupervised SimCSE step in three stacks, on the same device:

- **kcse**: `kcse.SimCSE` (negatives "both_views", temperature 0.05) around
  `kcse.SentenceEncoder(backbone, None, pooling="cls", hidden_dropout=0.3)`,
  the backbone a randomly initialised `keras_hub.models.BertBackbone`,
  compiled with `Adam(1e-5)` and `jit_compile=True`, trained by
  `simcse.fit(token_dict, batch_size=64, epochs=1)` on random token ids (a
  dict of int32 arrays: no text, so no tokenizer and no TensorFlow in this
  script). Precision by `kcse.precision.set_precision`, before the backbone
  is built. Always `KERAS_BACKEND=jax`.
- **HF eager**: `transformers.BertModel` of the same shape (no pooler),
  hidden dropout 0.3 and attention dropout 0.1 as kcse's (keras-hub's
  `dropout`, 0.1, is on the attention probabilities and the residual
  stream; `hidden_dropout=0.3` sets the residual stream's), CLS vector, the
  same loss (both views query all 2N rows but themselves, 2N-2 negatives,
  cosine / 0.05, mean of the 2N cross-entropies), `torch.optim.Adam(1e-5,
  eps=1e-7)` (Keras' epsilon), a plain loop (forward, backward, step,
  zero_grad); bfloat16 by `torch.autocast`, float16 by autocast and a
  `GradScaler` (CUDA only).
- **torch.compile**: the same model and loss under `torch.compile(...,
  dynamic=False)` (one graph per length). On by default on CUDA; on a CPU
  only with `--torch-compile` (its C++ compilation is slow there).

Default shape: BERT-base (12 layers, 12 heads, hidden 768, intermediate
3072, vocabulary 21,128, 512 positions), batch 64 (SimCSE encodes it twice:
128 rows), lengths 64 and 128 (padding mask all ones), float32 and
bfloat16.

For each stack, precision and length it measures:

- **ms/step** in steady state: one warm-up epoch of `--steps` steps (it
  compiles), then a timed epoch over the same batches (on a CPU kcse
  trains a copy of the token-embedding rows its data uses, whose shape
  follows the data: other data would compile again); ms/step is the time
  from the end of the timed epoch's step 1 to the end of its last step,
  over the steps between. kcse: a callback marked safe for Keras'
  asynchronous dispatch reads each step's loss, which waits for that step,
  in a thread beside the training loop, so it does not stall the device
  (kcse's own NaN check works so on an accelerator; on a CPU kcse's fit
  waits for every step anyway). HF: one `cuda.synchronize` after step 1
  and one after the last, nothing between.
- **TFLOP/s** of that step and its share of the device's matrix-product
  rate, measured first with torch on the same device (n^3 in bfloat16 and
  float32, n = 8192 on CUDA, 2048 on a CPU; the share is of the faster,
  bfloat16 on a GPU). Step FLOPs: see `step_flops`.
- **seconds to the first step** of each shape: from the call of the first
  `fit` (HF: the first step's start) to the end of its first step, i.e.
  compilation included. kcse: in the first kcse process with an empty JAX
  persistent compilation cache (`kcse.compilation.use_compilation_cache`,
  a temporary folder; that process compiles and writes it: "fresh"), and in
  later kcse processes, which read it ("cached"; with `--runs 1` one more
  kcse process measures only that). torch.compile likewise, with a
  temporary `TORCHINDUCTOR_CACHE_DIR`.
- **encode sentences/s**: `keras.Model.predict(encoder, token_dict,
  batch_size=...)` (not the keras-hub Task's `predict`, which would
  preprocess text) vs the HF model in eval mode under
  `torch.inference_mode` (CLS vectors copied to the host), on
  `--encode-sentences` sentences of the full length, after one batch that
  compiles (its seconds are reported). Not measured for torch.compile.
- a **projection of Su Jianlin's full Chinese SimCSE grid** in minutes:
  models BERT, RoBERTa, SimBERT (base: 12 layers, 768), SimBERT-small (6
  layers, 384, intermediate 1536), SimBERT-tiny (4 layers, 312,
  intermediate 1248) x poolings P1-P4 x tasks ATEC, BQ, LCQMC, PAWSX,
  STS-B, with kcse's "su" protocol (`kcse.experiments.protocols`) and split
  sizes (`kcse.data.chinese.SPLIT_SIZES`): see `project_grid`. Shapes not
  measured are scaled by FLOPs from the measured model (stated in the
  output; small models use a device less well, so that is optimistic), or
  measured with `--measure-all-shapes`.

Runs alternate stacks (kcse, HF eager, torch.compile, kcse, ...; `--runs`
each), every measurement in its own process (`--worker`), so kcse and torch
never share one; the kcse worker sets `KERAS_BACKEND=jax` before it imports
Keras and never imports TensorFlow itself (kcse may, until its JAX path
goes without). The table shows medians over runs, the kcse speed ratios
(steps/s of kcse over steps/s of the other: above 1, kcse is faster) side
by side, and the devices torch and JAX computed on. `--json FILE` writes
every figure (rewritten after each process, complete: true at the end). A
stack whose process fails is reported and left out, the others go on (exit
status 1 at the end); `--deadline S` starts no further round of runs that
would end more than S seconds after the start.

Run from the repository root, with kcse importable:

    python benchmarks/gpu.py [--runs 3] [--lengths 64,128] [--precisions float32,bfloat16] \\
        [--steps 30] [--json gpu.json]
    python benchmarks/gpu.py --tiny     # 2 layers, hidden 64: a smoke run on a CPU

On a CPU, torch runs with `OMP_WAIT_POLICY=PASSIVE` (unless set): its
OpenMP threads otherwise spin while waiting, and on a shared machine its
steps slowed down 8-20x. `--tiny` on a CPU also runs kcse with
`XLA_FLAGS=--xla_backend_optimization_level=0`: XLA's CPU compiler spends
~25 s on even that model's train step otherwise (~5 s so); its figures
only show that everything runs. `--tiny` also blocks `import tensorflow`
in the kcse process (`--without-tensorflow`), so that it takes the path
the GPU machine, which has no TensorFlow, takes.

On the GPU machine: `benchmarks/gpu_run.sh`.
"""

import argparse
import json
import math
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
# kcse from this checkout, installed or not (a script's path is its folder).
sys.path.insert(1, str(REPO_ROOT))

STACKS = ("kcse", "hf_eager", "torch_compile")
STACK_LABELS = {"kcse": "kcse", "hf_eager": "HF eager", "torch_compile": "torch.compile"}
PRECISIONS = ("float32", "bfloat16", "float16")

# Transformer shapes: layers, hidden, heads, intermediate.
SHAPES = {
    "base": dict(layers=12, hidden=768, heads=12, intermediate=3072),
    "small": dict(layers=6, hidden=384, heads=12, intermediate=1536),
    "tiny": dict(layers=4, hidden=312, heads=12, intermediate=1248),
    # --tiny's own model (not Su's SimBERT-tiny).
    "smoke": dict(layers=2, hidden=64, heads=2, intermediate=128),
}
# Su's models (bojone/SimCSE) and their shapes.
GRID_MODELS = {
    "BERT": "base",
    "RoBERTa": "base",
    "SimBERT": "base",
    "SimBERT-small": "small",
    "SimBERT-tiny": "tiny",
}
VOCABULARY = 21128  # Chinese BERT's.
MAX_POSITIONS = 512
ATTENTION_DROPOUT = 0.1  # keras-hub BertBackbone's `dropout` default.
HIDDEN_DROPOUT = 0.3  # Su's.
TEMPERATURE = 0.05
LEARNING_RATE = 1e-5
# Encoding pads each batch to a power of two of at least this (kcse's
# `batched_prediction.COARSE_MIN_LENGTH` under JAX; not imported, it would
# load Keras): the projection counts one compiled program per such length.
ENCODE_MIN_LENGTH = 16

TINY = dict(
    shape="smoke", vocabulary=1000, batch_size=8, lengths=(16, 32), steps=4,
    runs=1, encode_sentences=32, encode_batch_size=16, matmul_size=512,
)


# --------------------------------------------------------------------------
# FLOPs
# --------------------------------------------------------------------------


def forward_flops(shape, length):
    """FLOPs of one row of `length` tokens through the transformer, forward.

    forward = 2 x P x L + 4 x L^2 x hidden x layers, where P = layers x
    (4 hidden^2 + 2 hidden intermediate) are the weights of the matrix
    products (query, key, value and output projections; the two feed-forward
    layers), each used once per token (2 FLOPs a multiply-add), and the
    attention's two L x L x hidden products (scores, weighted sum) per
    layer. Embedding lookups, layer norms, softmax, the pooler and the loss
    are left out.
    """
    s = SHAPES[shape]
    weights = s["layers"] * (4 * s["hidden"] ** 2 + 2 * s["hidden"] * s["intermediate"])
    return 2 * weights * length + 4 * length**2 * s["hidden"] * s["layers"]


def step_flops(shape, batch_size, length):
    """FLOPs of one SimCSE training step: 3 x forward (backward ~ 2 x forward)
    over the 2 x batch_size rows (each sentence encoded twice) of `length`."""
    return 3 * 2 * batch_size * forward_flops(shape, length)


# --------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------


def int_list(text):
    return tuple(int(part) for part in text.split(",") if part)


def name_list(text):
    return tuple(part.strip() for part in text.split(",") if part.strip())


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int,
                        help="processes of each stack, alternated (default 3; --tiny 1)")
    parser.add_argument("--lengths", type=int_list,
                        help="token lengths (default 64,128; --tiny 16,32)")
    parser.add_argument("--precisions", type=name_list, default=("float32", "bfloat16"),
                        help="of float32, bfloat16, float16 (default float32,bfloat16)")
    parser.add_argument("--steps", type=int,
                        help="steps of an epoch, warm-up and timed (default 30; --tiny 4)")
    parser.add_argument("--batch-size", type=int, help="sentences a step (default 64; --tiny 8)")
    parser.add_argument("--encode-sentences", type=int,
                        help="sentences encoded per measurement, a multiple of the encode batch "
                             "(default 8192 on an accelerator, 512 on a CPU; --tiny 32)")
    parser.add_argument("--encode-batch-size", type=int,
                        help="(default 64, as the grid's; --tiny 16)")
    parser.add_argument("--stacks", type=name_list, default=STACKS,
                        help=f"of {', '.join(STACKS)} (default all)")
    parser.add_argument("--torch-compile", action="store_true",
                        help="run torch.compile on a CPU too (always on CUDA)")
    parser.add_argument("--torch-tf32", action="store_true",
                        help="HF float32 with TF32 matrix products (torch's default is full "
                             "float32; JAX's default on NVIDIA GPUs is TF32-like)")
    parser.add_argument("--measure-all-shapes", action="store_true",
                        help="also measure SimBERT-small and -tiny shapes (projection precision) "
                             "instead of scaling the measured model's figures by FLOPs")
    parser.add_argument("--projection-precision",
                        help="precision of the grid projection (default bfloat16 when measured)")
    parser.add_argument("--matmul-size", type=int,
                        help="n of the n^3 bfloat16 and float32 matrix products (default 8192 "
                             "on CUDA, 2048 on a CPU; --tiny 512)")
    parser.add_argument("--worker-timeout", type=float, default=900.0,
                        help="seconds a measuring process may take (default 900)")
    parser.add_argument("--without-tensorflow", action="store_true",
                        help="in the kcse process `import tensorflow` fails, as on a machine "
                             "without it (the GPU machine); on with --tiny")
    parser.add_argument("--deadline", type=float,
                        help="seconds: start no further round of runs (after the first) that "
                             "should end later than this after the start (estimated from the "
                             "rounds before)")
    parser.add_argument("--json", help="write every figure to this file")
    parser.add_argument("--tiny", action="store_true",
                        help="2 layers, hidden 64, 2 heads, intermediate 128, vocabulary 1000, "
                             "batch 8, lengths 16,32, 4 steps, 1 run: a smoke run")
    # Internal: a measuring process.
    parser.add_argument("--worker", choices=(*STACKS, "device"), help=argparse.SUPPRESS)
    parser.add_argument("--worker-out", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    parser.add_argument("--first-steps-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--device-kind", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    tiny = TINY if args.tiny else {}
    args.without_tensorflow = args.without_tensorflow or args.tiny
    args.shape = tiny.get("shape", "base")
    args.vocabulary = tiny.get("vocabulary", VOCABULARY)
    defaults = dict(runs=3, lengths=(64, 128), steps=30, batch_size=64, encode_batch_size=64)
    for name, default in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, tiny.get(name, default))
    if args.matmul_size is None:
        args.matmul_size = tiny.get("matmul_size")
    if args.encode_sentences is None:
        args.encode_sentences = tiny.get("encode_sentences")
    unknown = set(args.precisions) - set(PRECISIONS)
    if unknown:
        parser.error(f"unknown precision(s) {', '.join(sorted(unknown))}; "
                     f"use {', '.join(PRECISIONS)}")
    unknown = set(args.stacks) - set(STACKS)
    if unknown:
        parser.error(f"unknown stack(s) {', '.join(sorted(unknown))}; use {', '.join(STACKS)}")
    if args.runs < 1 or args.steps < 2 or args.batch_size < 2 or not args.lengths:
        parser.error("need --runs >= 1, --steps >= 2, --batch-size >= 2 and a length")
    if max(args.lengths) > MAX_POSITIONS or min(args.lengths) < 2:
        parser.error(f"lengths must be in 2..{MAX_POSITIONS}")
    if args.projection_precision is None:
        args.projection_precision = (
            "bfloat16" if "bfloat16" in args.precisions else args.precisions[0])
    elif args.projection_precision not in args.precisions:
        parser.error("--projection-precision must be one of --precisions")
    return args


def encode_sentences(args, accelerator):
    """Sentences an encode measurement runs: a multiple of the batch size."""
    wanted = args.encode_sentences or (8192 if accelerator else 512)
    return max(1, round(wanted / args.encode_batch_size)) * args.encode_batch_size


def measurements(args):
    """(shape, precision, length) of every measurement, in order."""
    planned = [(args.shape, p, length) for p in args.precisions for length in args.lengths]
    if args.measure_all_shapes:
        planned += [
            (shape, args.projection_precision, length)
            for shape in sorted(set(GRID_MODELS.values()) - {args.shape})
            for length in args.lengths
        ]
    return planned


def token_data(rows, length, vocabulary, seed):
    """Random token ids (no special tokens), one segment, no padding: numpy int32.

    The same `seed` gives the same ids in every process (kcse's compiled
    train step depends on the set of token ids the data uses).
    """
    import numpy as np

    generator = np.random.default_rng(seed)
    return {
        "token_ids": generator.integers(5, vocabulary, (rows, length)).astype("int32"),
        "segment_ids": np.zeros((rows, length), "int32"),
        "padding_mask": np.ones((rows, length), "int32"),
    }


def training_seed(shape, length):
    return 1000 * length + sorted(SHAPES).index(shape)


def encoding_seed(shape, length):
    return 1_000_000 + training_seed(shape, length)


def key(shape, precision, length):
    return f"{shape}/{precision}/{length}"


def write_json(path, data):
    """Writes `data` to `path` through a temporary file and `os.replace`."""
    path = pathlib.Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(temporary, path)


def say(stack, text):
    print(f"  [{stack}] {text}", flush=True)


# --------------------------------------------------------------------------
# Workers (each in its own process)
# --------------------------------------------------------------------------


def device_worker(args):
    """torch's device, its name and its matrix-product rates."""
    import torch

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    if cuda:
        name = torch.cuda.get_device_name(0)
    else:
        name = platform.processor() or "CPU"
        try:
            for line in open("/proc/cpuinfo"):
                if line.startswith("model name"):
                    name = line.split(":", 1)[1].strip()
                    break
        except OSError:
            pass
        name = f"{name} ({os.cpu_count()} logical CPUs, torch {torch.get_num_threads()} threads)"
    n = args.matmul_size or (8192 if cuda else 2048)
    rates = {}
    for dtype in (torch.bfloat16, torch.float32):
        a = torch.randn(n, n, device=device).to(dtype)
        b = torch.randn(n, n, device=device).to(dtype)
        a @ b
        sync(torch, device)
        repeats, seconds = 0, 0.0
        began = time.perf_counter()
        while repeats < 3 or (seconds < 1.0 and repeats < 200):
            a @ b
            repeats += 1
            if repeats % 5 == 0 or repeats < 3:
                sync(torch, device)
                seconds = time.perf_counter() - began
        sync(torch, device)
        seconds = time.perf_counter() - began
        rates[str(dtype).removeprefix("torch.")] = 2 * n**3 * repeats / seconds / 1e12
        del a, b
    return {
        "device": device,
        "name": name,
        "matmul_size": n,
        "matmul_tflops": rates,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "torch": torch.__version__,
    }


def sync(torch, device):
    if device == "cuda":
        torch.cuda.synchronize()


class WithoutTensorFlow:
    """The path finder of imports, blind to TensorFlow's packages.

    In its place in `sys.meta_path`, `import tensorflow` raises
    ModuleNotFoundError and `importlib.util.find_spec("tensorflow")` is
    None, as where TensorFlow is not installed.
    """

    BLOCKED = ("tensorflow", "tensorflow_text", "tensorflow_datasets")

    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.BLOCKED:
            return None
        return self.finder.find_spec(name, path, target)

    def __getattr__(self, name):  # invalidate_caches, find_distributions...
        return getattr(self.finder, name)

    @classmethod
    def install(cls):
        import importlib.machinery

        sys.meta_path[:] = [cls(finder) if finder is importlib.machinery.PathFinder else finder
                            for finder in sys.meta_path]


def kcse_worker(args):
    """kcse's SimCSE fit and encoder predict under Keras 3 on JAX."""
    if args.without_tensorflow:
        WithoutTensorFlow.install()
    os.environ["KERAS_BACKEND"] = "jax"
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    began = time.perf_counter()
    import jax
    import keras
    import keras_hub
    import numpy as np

    import kcse
    from kcse.compilation import use_compilation_cache
    from kcse.precision import set_precision

    if keras.backend.backend() != "jax":
        raise SystemExit(f"Keras runs on {keras.backend.backend()}, not JAX")
    cache = str(use_compilation_cache(args.cache)) if args.cache else None
    platform_name = jax.default_backend()
    check_device(args, "JAX", platform_name != "cpu")
    imported = time.perf_counter() - began
    if cache is None:
        cache_state = "off"
    else:
        cache_state = "filled by an earlier process" if os.listdir(cache) else "empty"
    say("kcse", f"keras {keras.__version__}, keras-hub {keras_hub.__version__}, jax "
        f"{jax.__version__} on {jax.devices()[0].device_kind} ({platform_name}); imports "
        f"{imported:.1f} s; compilation cache {cache_state}")

    class Clock(keras.callbacks.Callback):
        """Step end times: reading a step's loss waits for the step to finish.

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

        @property
        def ends(self):
            return [self.end_of[batch] for batch in sorted(self.end_of)]

        @property
        def losses(self):
            return [self.loss_of[batch] for batch in sorted(self.loss_of)]

    accelerator = platform_name != "cpu"
    sentences = encode_sentences(args, accelerator)
    results = {}
    built = {}
    for shape, precision, length in measurements(args):
        if (shape, precision) not in built:
            built.clear()  # One model in memory at a time.
            set_precision(precision)
            keras.utils.set_random_seed(0)
            s = SHAPES[shape]
            backbone = keras_hub.models.BertBackbone(
                vocabulary_size=args.vocabulary, num_layers=s["layers"], num_heads=s["heads"],
                hidden_dim=s["hidden"], intermediate_dim=s["intermediate"],
                max_sequence_length=MAX_POSITIONS, dropout=ATTENTION_DROPOUT,
            )
            encoder = kcse.SentenceEncoder(
                backbone, None, pooling="cls", hidden_dropout=HIDDEN_DROPOUT)
            simcse = kcse.SimCSE(encoder, temperature=TEMPERATURE)
            simcse.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE), jit_compile=True)
            built[(shape, precision)] = encoder, simcse
        encoder, simcse = built[(shape, precision)]
        x = token_data(args.steps * args.batch_size, length, args.vocabulary,
                       training_seed(shape, length))
        record = {}
        clock = Clock()
        start = time.perf_counter()
        simcse.fit(x, batch_size=args.batch_size, epochs=1, verbose=0, callbacks=[clock])
        record["first_step_s"] = clock.ends[0] - start
        record["warm_up_losses"] = clock.losses
        # Whether fit trained a copy of the used token-embedding rows (kcse
        # does on a CPU): its shape follows the data, so is its program.
        record["embedding_rows_copy"] = getattr(simcse, "_embedding_rows", None) is not None
        batch = args.encode_batch_size
        encoded = token_data(sentences, length, args.vocabulary, encoding_seed(shape, length))
        first = {name: value[:batch] for name, value in encoded.items()}
        start = time.perf_counter()
        keras.Model.predict(encoder, first, batch_size=batch, verbose=0)
        record["first_encode_s"] = time.perf_counter() - start
        if not args.first_steps_only:
            clock = Clock()
            history = simcse.fit(x, batch_size=args.batch_size, epochs=1, verbose=0,
                                 callbacks=[clock])
            # Values are final after fit; convert one to be sure all work is done.
            keras.ops.convert_to_numpy(encoder.backbone.trainable_weights[-1])
            if len(clock.ends) != args.steps:
                raise SystemExit(f"kcse ran {len(clock.ends)} steps, not {args.steps}")
            record["ms_per_step"] = 1000 * (clock.ends[-1] - clock.ends[0]) / (args.steps - 1)
            record["loss"] = float(history.history["loss"][-1])
            record["last_step_loss"] = clock.losses[-1]
            start = time.perf_counter()
            vectors = keras.Model.predict(encoder, encoded, batch_size=batch, verbose=0)
            vectors = np.asarray(vectors)
            record["encode_sentences_per_s"] = sentences / (time.perf_counter() - start)
            record["encode_shape"] = list(vectors.shape)
            record["encode_dtype"] = str(vectors.dtype)
            record["vectors_finite"] = bool(np.isfinite(vectors).all())
        results[key(shape, precision, length)] = record
        say("kcse", f"{key(shape, precision, length)}: " + summary_line(record))
    return {
        "results": results,
        "backend": f"jax {jax.__version__}, {platform_name}",
        "device_name": jax.devices()[0].device_kind,
        "keras": keras.__version__,
        "keras_hub": keras_hub.__version__,
        "cache": cache,
        "encode_sentences": sentences,
        "imports_s": imported,
        "tensorflow_imported": "tensorflow" in sys.modules,
        "jax_default_matmul_precision": str(jax.config.jax_default_matmul_precision),
    }


def summary_line(record):
    parts = [f"first step {record['first_step_s']:.2f} s",
             f"first encode batch {record['first_encode_s']:.2f} s"]
    if "ms_per_step" in record:
        parts += [f"{record['ms_per_step']:.2f} ms/step", f"loss {record['loss']:.4f}"]
    if record.get("encode_sentences_per_s"):
        parts.append(f"encode {record['encode_sentences_per_s']:.0f} sentences/s")
    return ", ".join(parts)


def check_device(args, library, on_accelerator):
    """Exits when this library's device is not the kind torch found first."""
    if args.device_kind and (args.device_kind != "cpu") != on_accelerator:
        raise SystemExit(
            f"{library} computes on {'an accelerator' if on_accelerator else 'the CPU'}, but "
            f"torch found {args.device_kind}: the figures would not compare"
        )


def simcse_loss(torch, vectors, temperature):
    """SimCSE "both_views": rows `[view 1 of all; view 2 of all]`, each row's
    positive is the other view of its sentence, every other row a negative."""
    views = torch.nn.functional.normalize(vectors.float(), dim=-1)
    rows = views.shape[0]
    half = rows // 2
    logits = views @ views.T / temperature
    logits = logits.masked_fill(torch.eye(rows, dtype=torch.bool, device=views.device), -1e9)
    indices = torch.arange(half, device=views.device)
    positives = torch.cat([indices + half, indices])
    return torch.nn.functional.cross_entropy(logits, positives)


def torch_worker(args, compiled):
    """HF transformers' BertModel in a torch loop, eager or under torch.compile."""
    os.environ.setdefault("USE_TF", "0")
    os.environ.setdefault("USE_FLAX", "0")
    os.environ.setdefault("USE_JAX", "0")
    stack = "torch_compile" if compiled else "hf_eager"
    began = time.perf_counter()
    import numpy as np
    import torch
    import transformers

    device = "cuda" if torch.cuda.is_available() else "cpu"
    check_device(args, "torch", device != "cpu")
    if args.torch_tf32:
        torch.set_float32_matmul_precision("high")
    imported = time.perf_counter() - began

    class SimCSEModel(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, token_ids, segment_ids, padding_mask):
            doubled = [torch.cat([value, value])
                       for value in (token_ids, segment_ids, padding_mask)]
            states = self.bert(input_ids=doubled[0], token_type_ids=doubled[1],
                               attention_mask=doubled[2]).last_hidden_state
            return simcse_loss(torch, states[:, 0], TEMPERATURE)

    def as_tensors(data):
        return {name: torch.from_numpy(value.astype("int64")).to(device)
                for name, value in data.items()}

    accelerator = device != "cpu"
    sentences = encode_sentences(args, accelerator)
    results, skipped, attention = {}, {}, None
    for shape, precision, length in measurements(args):
        name = key(shape, precision, length)
        if precision == "float16" and device == "cpu":
            skipped[name] = "float16 needs CUDA (GradScaler); not run on a CPU"
            continue
        torch.manual_seed(0)
        s = SHAPES[shape]
        config = transformers.BertConfig(
            vocab_size=args.vocabulary, hidden_size=s["hidden"], num_hidden_layers=s["layers"],
            num_attention_heads=s["heads"], intermediate_size=s["intermediate"],
            hidden_act="gelu", hidden_dropout_prob=HIDDEN_DROPOUT,
            attention_probs_dropout_prob=ATTENTION_DROPOUT,
            max_position_embeddings=MAX_POSITIONS, type_vocab_size=2,
        )
        bert = transformers.BertModel(config, add_pooling_layer=False).to(device)
        attention = getattr(bert.config, "_attn_implementation", None)
        model = SimCSEModel(bert)
        step_model = torch.compile(model, dynamic=False) if compiled else model
        optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE, eps=1e-7)
        scaler = torch.amp.GradScaler("cuda") if precision == "float16" else None
        autocast_dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(precision)

        def autocast():
            return torch.autocast(device, dtype=autocast_dtype, enabled=autocast_dtype is not None)

        data = as_tensors(token_data(args.steps * args.batch_size, length, args.vocabulary,
                                     training_seed(shape, length)))
        batches = [{k: v[i : i + args.batch_size] for k, v in data.items()}
                   for i in range(0, args.steps * args.batch_size, args.batch_size)]

        def step(batch):
            with autocast():
                loss = step_model(batch["token_ids"], batch["segment_ids"], batch["padding_mask"])
            if scaler is None:
                loss.backward()
                optimizer.step()
            else:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            optimizer.zero_grad(set_to_none=True)
            return loss

        record = {}
        model.train()
        start = time.perf_counter()
        for index, batch in enumerate(batches):  # Warm-up epoch.
            loss = step(batch)
            if index == 0:
                sync(torch, device)
                record["first_step_s"] = time.perf_counter() - start
        if not args.first_steps_only:
            losses = []
            for index, batch in enumerate(batches):
                losses.append(step(batch).detach())
                if index == 0:
                    sync(torch, device)
                    start = time.perf_counter()
            sync(torch, device)
            record["ms_per_step"] = 1000 * (time.perf_counter() - start) / (args.steps - 1)
            losses = torch.stack(losses).float().cpu().numpy()
            record["loss"] = float(losses.mean())
            record["last_step_loss"] = float(losses[-1])
        else:
            sync(torch, device)
        if not compiled:
            bert.eval()
            encoded = as_tensors(token_data(sentences, length, args.vocabulary,
                                            encoding_seed(shape, length)))
            batch_size = args.encode_batch_size

            def encode(count):
                vectors = []
                with torch.inference_mode(), autocast():
                    for i in range(0, count, batch_size):
                        states = bert(input_ids=encoded["token_ids"][i : i + batch_size],
                                      token_type_ids=encoded["segment_ids"][i : i + batch_size],
                                      attention_mask=encoded["padding_mask"][i : i + batch_size])
                        vectors.append(states.last_hidden_state[:, 0].float().cpu().numpy())
                return np.concatenate(vectors)

            start = time.perf_counter()
            encode(batch_size)
            record["first_encode_s"] = time.perf_counter() - start
            if not args.first_steps_only:
                start = time.perf_counter()
                vectors = encode(sentences)
                record["encode_sentences_per_s"] = sentences / (time.perf_counter() - start)
                record["vectors_finite"] = bool(np.isfinite(vectors).all())
            bert.train()
        results[name] = record
        say(stack, f"{name}: " + ", ".join(
            f"{k} {v:.3f}" for k, v in record.items() if isinstance(v, float)))
        del model, step_model, bert, optimizer
        if device == "cuda":
            torch.cuda.empty_cache()
    return {
        "results": results,
        "skipped": skipped,
        "backend": f"torch {torch.__version__}, {device}",
        "device_name": torch.cuda.get_device_name(0) if device == "cuda" else "CPU",
        "transformers": transformers.__version__,
        "attention": attention,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "encode_sentences": None if compiled else sentences,
        "imports_s": imported,
        "inductor_cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR") if compiled else None,
    }


def run_worker(args):
    if args.worker == "device":
        output = device_worker(args)
    elif args.worker == "kcse":
        output = kcse_worker(args)
    else:
        output = torch_worker(args, compiled=args.worker == "torch_compile")
    write_json(args.worker_out, output)


# --------------------------------------------------------------------------
# The orchestrating process (imports neither Keras, JAX nor torch)
# --------------------------------------------------------------------------


def forwarded_arguments(argv):
    """This command's arguments for a worker: all but --json and its value."""
    forwarded, skip = [], False
    for argument in argv:
        if skip:
            skip = False
        elif argument == "--json":
            skip = True
        elif not argument.startswith("--json="):
            forwarded.append(argument)
    return forwarded


def spawn(stack, argv, folder, extra=(), env=None, timeout=900.0):
    """Runs one worker process: `(its JSON output, None)`, or `(None, why it failed)`."""
    out = pathlib.Path(folder) / f"{stack}-{time.monotonic_ns()}.json"
    log = out.with_suffix(".log")
    command = [sys.executable, str(pathlib.Path(__file__).resolve()), *argv,
               "--worker", stack, "--worker-out", str(out), *extra]
    environment = {**os.environ, **(env or {})}
    environment.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    began = time.perf_counter()
    with open(log, "w") as stderr:
        try:
            code = subprocess.run(command, stdout=None, stderr=stderr, env=environment,
                                  cwd=REPO_ROOT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = f"killed after --worker-timeout {timeout:.0f} s"
    if code != 0 or not out.is_file():
        tail = log.read_text(errors="replace")[-4000:]
        return None, f"the {stack} process failed ({code}); the end of its stderr:\n{tail}"
    result = json.loads(out.read_text())
    result["process_s"] = time.perf_counter() - began
    return result, None


def median_of(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(stack_runs, fresh_runs, cached_runs):
    """Per measurement: medians over runs, and first-step seconds fresh / cached."""
    summary = {}
    names = {name for run in stack_runs for name in run["results"]}
    for name in sorted(names):
        records = [run["results"][name] for run in stack_runs if name in run["results"]]
        entry = {}
        for field in ("ms_per_step", "encode_sentences_per_s"):
            values = [r[field] for r in records if r.get(field) is not None]
            if values:
                entry[field] = statistics.median(values)
                entry[f"{field}_runs"] = values
        losses = [r["loss"] for r in records if "loss" in r]
        if losses:
            entry["loss"] = losses[-1]
            entry["loss_runs"] = losses
        for label, runs in (("fresh", fresh_runs), ("cached", cached_runs)):
            for field in ("first_step_s", "first_encode_s"):
                value = median_of([run["results"].get(name, {}).get(field) for run in runs])
                if value is not None:
                    entry.setdefault(field, {})[label] = value
        summary[name] = entry
    return summary


def add_rates(summary, args, peak):
    """TFLOP/s of each step time and its share of the device's matrix-product rate `peak`."""
    for name, entry in summary.items():
        shape, _, length = name.split("/")
        if entry.get("ms_per_step"):
            flops = step_flops(shape, args.batch_size, int(length))
            entry["step_tflop"] = flops / 1e12
            entry["tflops"] = flops / (entry["ms_per_step"] / 1000) / 1e12
            if peak:
                entry["share_of_peak"] = entry["tflops"] / peak


def nearest(lengths, length):
    return min(lengths, key=lambda measured: (abs(measured - length), -measured))


def project_grid(summary, stack, args, precision, eager_encoding=None, measured_records=()):
    """Minutes of Su's grid for one stack, from its measured figures.

    Per model x task (the grid loads a model once per task): one raw pass
    encoding both sides of every pair of every split, for all four
    poolings at once. Per cell (model x pooling x task): SimCSE on the
    protocol's training sentences (both sides of the pairs of its training
    splits, at most `max_sentences`; PAWSX all of them), one epoch at its
    batch size, padded to the task's full length, each step timed as a full
    one; then the test split encoded again (`trained_splits`). Encoding is
    counted at the full length (an upper bound: kcse pads each batch to the
    power of two above its longest sentence) and sentences are not
    deduplicated. Model loading, whitening and scoring are left out.
    torch.compile's encoding is HF eager's (`eager_encoding`: the HF eager
    summary).

    Compilation (kcse and torch.compile): a cell compiles its train step
    once per batch shape (the full batch, and the last when it is partial)
    and kcse's encoders once per padded length (powers of two from 16 to
    the task's length; the raw pass likewise). Each costs the measured
    seconds to the first step (train) or to the first encoded batch
    (encode) at the nearest measured length, "fresh" without a cache.
    With a persistent cache ("cached" figures) a program is read back after
    its first compilation, where the same program comes again (same model,
    pooling and shapes; models are not assumed to share programs). Where
    kcse trained a copy of the used token-embedding rows (on a CPU; the
    measurement says), the copy has as many rows as the cell's text has
    distinct tokens, so each cell's train program differs and none is read
    back in one grid run (then the figure "cache_if_train_shapes_repeat"
    shows what the cache would give if they were).
    """
    from kcse.experiments.protocols import PROTOCOLS

    protocol = PROTOCOLS["su"]
    notes = set()

    def lookup(table, shape, length, field):
        """(value at the nearest measured length, that length, the shape measured)."""
        for candidate in dict.fromkeys((shape, args.shape)):
            lengths = [int(name.split("/")[2]) for name, entry in table.items()
                       if name.startswith(f"{candidate}/{precision}/")
                       and entry.get(field) is not None]
            if lengths:
                at = nearest(lengths, length)
                return table[key(candidate, precision, at)][field], at, candidate
        return None, None, None

    def step_seconds(shape, length):
        ms, at, measured = lookup(summary, shape, length, "ms_per_step")
        if ms is None:
            return None
        if (measured, at, args.batch_size) != (shape, length, protocol.batch_size):
            notes.add(f"train step, scaled by FLOPs: {shape} at length {length}, batch "
                      f"{protocol.batch_size} from {measured} at {at}, batch {args.batch_size}")
        return ms / 1000 * (step_flops(shape, protocol.batch_size, length)
                            / step_flops(measured, args.batch_size, at))

    def encode_seconds(shape, length, count):
        table = summary if stack != "torch_compile" else eager_encoding or {}
        rate, at, measured = lookup(table, shape, length, "encode_sentences_per_s")
        if rate is None:
            return 0.0
        if (measured, at) != (shape, length):
            notes.add(f"encoding, scaled by FLOPs: {shape} at length {length} from "
                      f"{measured} at {at}")
        return count / rate * forward_flops(shape, length) / forward_flops(measured, at)

    def compile_seconds(shape, length, field, label):
        seconds, _, _ = lookup(summary, shape, length, field)
        return (seconds or {}).get(label) or 0.0

    if stack == "torch_compile":
        notes.add("torch.compile: encoding as HF eager's (not measured compiled)")
    compiles = stack in ("kcse", "torch_compile")
    # Whether each cell's train program is its own (kcse's embedding-row copy).
    unique_train = any(record.get("embedding_rows_copy") for record in measured_records)
    minutes, per_model = {}, {}
    for label in ("fresh", "cached") if compiles else (None,):
        total = dict.fromkeys(("train", "encode", "compile", "compile_ideal"), 0.0)
        seen = set()
        for model, shape in GRID_MODELS.items():
            model_seconds = 0.0
            for task, plan in cell_plans().items():
                length, steps, train_shapes = plan["length"], plan["steps"], plan["train_shapes"]
                raw, tested = plan["raw_encoded"], plan["test_encoded"]
                step = step_seconds(shape, length)
                if step is None:
                    return None
                train = 4 * steps * step
                encode = (encode_seconds(shape, length, raw)
                          + 4 * encode_seconds(shape, length, tested))
                compile_total = compile_ideal = 0.0
                if compiles:
                    fresh_step = compile_seconds(shape, length, "first_step_s", "fresh")
                    step_compile = compile_seconds(shape, length, "first_step_s", label)
                    encode_lengths = [2**i for i in range(4, 10)
                                      if ENCODE_MIN_LENGTH <= 2**i < length] + [length]
                    if stack == "kcse":
                        fresh_encode = compile_seconds(shape, length, "first_encode_s", "fresh")
                        encode_compile = compile_seconds(shape, length, "first_encode_s", label)
                        for pooling in ("every", "P1", "P2", "P3", "P4"):
                            for padded in encode_lengths:
                                program = (model, pooling, padded)
                                cost = fresh_encode if program not in seen else encode_compile
                                seen.add(program)
                                compile_total += cost
                                compile_ideal += cost
                    for pooling in ("P1", "P2", "P3", "P4"):
                        program = (model, pooling, length, "train")
                        repeat = step_compile if program in seen else fresh_step
                        seen.add(program)
                        compile_ideal += train_shapes * repeat
                        compile_total += train_shapes * (fresh_step if unique_train else repeat)
                total["train"] += train
                total["encode"] += encode
                total["compile"] += compile_total
                total["compile_ideal"] += compile_ideal
                model_seconds += train + encode + compile_total
            per_model.setdefault(model, {})[label or "total"] = model_seconds / 60
        name = {"fresh": "no_cache", "cached": "cache", None: "total"}[label]
        minutes[name] = (total["train"] + total["encode"] + total["compile"]) / 60
        if label == "cached" and unique_train:
            minutes["cache_if_train_shapes_repeat"] = (
                total["train"] + total["encode"] + total["compile_ideal"]) / 60
        minutes[f"{name}_parts"] = {k: v / 60 for k, v in total.items() if k != "compile_ideal"}
    return {"minutes": minutes, "per_model_minutes": per_model, "notes": sorted(notes)}


def cell_plans():
    """Per task of Su's grid, under kcse's "su" protocol: what one cell does.

    length: the padded length; training_sentences: both sides of the pairs
    of the training splits, at most `max_sentences` (PAWSX: all); steps of
    one epoch (kcse leaves out a last batch of one sentence); train_shapes:
    2 when the last batch is partial; raw_encoded: sentences of every split
    (both sides), encoded once per model and task for all poolings;
    test_encoded: those of the trained splits, encoded again per cell.
    """
    from kcse.data.chinese import SPLIT_SIZES
    from kcse.experiments.protocols import PROTOCOLS

    protocol = PROTOCOLS["su"]
    plans = {}
    for task, sizes in SPLIT_SIZES.items():
        pairs = dict(zip(("train", "valid", "test"), sizes))
        available = 2 * sum(pairs[split] for split in protocol.training_splits)
        limit = protocol.sentence_limit(task)
        sentences = available if limit is None else min(limit, available)
        batch = protocol.batch_size
        plans[task] = {
            "length": protocol.sequence_length(task),
            "training_sentences": sentences,
            "batch_size": batch,
            "steps": math.ceil(sentences / batch) - (sentences % batch == 1),
            "train_shapes": 1 + (sentences % batch not in (0, 1)),
            "raw_encoded": 2 * sum(pairs.values()),
            "test_encoded": 2 * sum(pairs[split] for split in protocol.trained_splits),
        }
    return plans


def grid_cells():
    from kcse.data.chinese import SPLIT_SIZES

    return len(GRID_MODELS) * 4 * len(SPLIT_SIZES)


def fmt(value, spec=".1f", width=9):
    return f"{'-' if value is None else format(value, spec):>{width}}"


def ratio(a, b):
    """Speed of kcse over another stack, from ms/step or seconds (b / a)."""
    return None if not a or not b else b / a


def print_report(report, args):
    device = report["device"]
    print(f"\ndevice (torch): {device['name']} [{device['device']}]; "
          f"bfloat16 {device['matmul_size']}^3 matrix product "
          f"{device['matmul_tflops']['bfloat16']:.3g} TFLOP/s, float32 "
          f"{device['matmul_tflops']['float32']:.3g} TFLOP/s "
          f"(torch float32 matmul precision: {device['float32_matmul_precision']})")
    for stack in args.stacks:
        info = report["stacks"].get(stack, {}).get("info")
        if info:
            extra = ""
            if stack == "kcse":
                extra = (f"; JAX default matmul precision {info['jax_default_matmul_precision']}"
                         f"; TensorFlow imported in the kcse process: "
                         f"{'yes' if info['tensorflow_imported'] else 'no'}"
                         + (" (import blocked)" if args.without_tensorflow else ""))
            elif info.get("attention"):
                extra = f"; transformers {info['transformers']}, attention {info['attention']}"
            print(f"{STACK_LABELS[stack]}: {info['backend']} on {info['device_name']}{extra}")
    for stack, reason in report["skipped_stacks"].items():
        print(f"{STACK_LABELS[stack]}: not run ({reason})")
    for stack in report["failed_stacks"]:
        print(f"{stack}: FAILED (its error is above and in the JSON)")
    s = SHAPES[args.shape]
    print(f"\nmodel: {s['layers']} layers, hidden {s['hidden']}, {s['heads']} heads, intermediate "
          f"{s['intermediate']}, vocabulary {args.vocabulary}; batch {args.batch_size} "
          f"({2 * args.batch_size} rows), {args.steps} steps an epoch; medians of "
          f"{report['runs_completed']} run(s) per stack, alternated; random weights and token ids")
    ran = [stack for stack in STACKS if stack in report["stacks"]]
    summaries = {stack: report["stacks"][stack]["summary"] for stack in ran}
    names = [key(args.shape, p, n) for p in args.precisions for n in args.lengths]
    if args.measure_all_shapes:
        names += sorted({n for summary in summaries.values() for n in summary} - set(names))
    others = [stack for stack in ran if stack != "kcse"]
    peak = report["peak"]
    print("\ntraining step, ms/step (median), and kcse's speed ratio (steps/s of kcse over the "
          "other's; >1: kcse faster)")
    print(f"{'shape/precision/length':<24}"
          + "".join(f"{STACK_LABELS[stack]:>15}" for stack in ran)
          + ("".join(f"{'kcse/' + STACK_LABELS[stack]:>20}" for stack in others)
             if "kcse" in ran else ""))
    for name in names:
        row = f"{name:<24}" + "".join(
            fmt(summaries[stack].get(name, {}).get("ms_per_step"), ".2f", 15) for stack in ran)
        if "kcse" in ran:
            row += "".join(
                fmt(ratio(summaries["kcse"].get(name, {}).get("ms_per_step"),
                          summaries[stack].get(name, {}).get("ms_per_step")), ".2f", 20)
                for stack in others)
        print(row)
    print(f"\nTFLOP/s of the step (3 x forward, see step_flops) and its share of the "
          f"{peak['dtype']} matrix product's {peak['tflops']:.3g} TFLOP/s")
    print(f"{'shape/precision/length':<24}"
          + "".join(f"{STACK_LABELS[stack]:>20}" for stack in ran))
    for name in names:
        row = f"{name:<24}"
        for stack in ran:
            entry = summaries[stack].get(name, {})
            tflops, share = entry.get("tflops"), entry.get("share_of_peak")
            text = "-" if tflops is None else (
                f"{tflops:.3g} ({100 * share:.0f}%)" if share else f"{tflops:.3g}")
            row += f"{text:>20}"
        print(row)
    encoders = [stack for stack in ran if stack != "torch_compile"]
    if encoders:
        print(f"\nencoding (sentences/s, batch {args.encode_batch_size}, full length; "
              "kcse: keras.Model.predict; HF: eval, inference_mode)")
        print(f"{'shape/precision/length':<24}" + "".join(
            f"{STACK_LABELS[stack]:>14}" for stack in encoders)
            + (f"{'kcse/HF eager':>16}" if len(encoders) == 2 else ""))
        for name in names:
            values = [summaries[stack].get(name, {}).get("encode_sentences_per_s")
                      for stack in encoders]
            row = f"{name:<24}" + "".join(fmt(v, ".0f", 14) for v in values)
            if len(encoders) == 2:
                row += fmt(None if None in values else values[0] / values[1], ".2f", 16)
            print(row)
    print("\nseconds to the first step of each shape (compilation included); to the first "
          "encoded batch in ()")
    columns = []
    for stack in ran:
        labels = ("fresh", "cached") if stack in ("kcse", "torch_compile") else ("fresh",)
        columns += [(stack, label) for label in labels]
    print(f"{'shape/precision/length':<24}" + "".join(
        f"{STACK_LABELS[stack] + ' ' + label:>24}" for stack, label in columns))
    for name in names:
        row = f"{name:<24}"
        for stack, label in columns:
            entry = summaries[stack].get(name, {})
            step = entry.get("first_step_s", {}).get(label)
            encode = entry.get("first_encode_s", {}).get(label)
            text = "-" if step is None else (
                f"{step:.1f}" + ("" if encode is None else f" ({encode:.1f})"))
            row += f"{text:>24}"
        print(row)
    if "kcse" in ran:
        print("kcse fresh: the first kcse process, its JAX compilation cache empty (it compiles "
              "and fills it); cached: later kcse processes reading it")
        for name in names:
            entry = summaries["kcse"].get(name, {})
            if "loss" in entry:
                others_loss = ", ".join(
                    f"{STACK_LABELS[stack]} {summaries[stack][name]['loss']:.4f}"
                    for stack in others if "loss" in summaries[stack].get(name, {}))
                print(f"  mean loss of the timed epoch at {name}: kcse {entry['loss']:.4f}"
                      + (f", {others_loss}" if others_loss else ""))
    projection = report.get("projection")
    if projection:
        print(f"\nprojection of Su's full grid ({projection['cells']} cells: "
              f"{', '.join(GRID_MODELS)} x P1-P4 x {', '.join(projection['tasks'])}; "
              f"protocol 'su'; {projection['precision']}) in minutes:")
        for task, plan in projection["cell_plans"].items():
            print(f"  {task:<6} length {plan['length']}, {plan['training_sentences']} training "
                  f"sentences: {plan['steps']} steps ({plan['train_shapes']} batch shapes); "
                  f"encodes {plan['raw_encoded']} sentences (a, b) and {plan['test_encoded']} "
                  "per cell (c)")
        for stack, result in projection["stacks"].items():
            m = result["minutes"]
            if "total" in m:
                parts = m["total_parts"]
                print(f"  {STACK_LABELS[stack]:<14} {m['total']:8.1f}  "
                      f"(train {parts['train']:.1f}, "
                      f"encode {parts['encode']:.1f}, no compilation)")
            else:
                for name, label in (("no_cache", "no cache"), ("cache", "with cache")):
                    if name in m:
                        parts = m[f"{name}_parts"]
                        print(f"  {STACK_LABELS[stack]:<14} {m[name]:8.1f}  {label} (train "
                              f"{parts['train']:.1f}, encode {parts['encode']:.1f}, compile "
                              f"{parts['compile']:.1f})")
                if "cache_if_train_shapes_repeat" in m:
                    print(f"  {'':<14} {m['cache_if_train_shapes_repeat']:8.1f}  with cache, if "
                          "kcse's train program did not follow the cell's tokens (its "
                          "embedding-row copy, CPU only)")
        grouped = {}
        for note in projection["notes"]:
            head, _, tail = note.partition(": ")
            grouped.setdefault(head, []).append(tail)
        for head, tails in grouped.items():
            print(f"  {head}: {'; '.join(tails)}" if tails[0] else f"  {head}")
        print("  (the measured figures behind it: " + (
            "a tiny smoke configuration, so the minutes mean nothing"
            if args.tiny else f"{args.shape} shape, batch {args.batch_size}") + ")")


def main():
    args = parse_args()
    if args.worker:
        run_worker(args)
        return
    argv = forwarded_arguments(sys.argv[1:])
    began = time.monotonic()
    folder = tempfile.mkdtemp(prefix="kcse-gpu-bench-")
    report = {"complete": False, "arguments": {
        k: v for k, v in vars(args).items() if not k.startswith("worker") and k not in (
            "cache", "first_steps_only", "device_kind")},
        "stacks": {}, "skipped_stacks": {}, "failed_stacks": {}}

    def save():
        if args.json:
            write_json(args.json, report)

    try:
        print(f"measuring the device (torch, {args.matmul_size or 'default'} matrix size) ...",
              flush=True)
        device, failure = spawn("device", argv, folder, env={
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")},
            timeout=args.worker_timeout)
        if failure:
            sys.exit(failure)
        report["device"] = device
        save()
        kind = device["device"]
        argv += ["--device-kind", kind]
        stacks = list(args.stacks)
        if "torch_compile" in stacks and kind == "cpu" and not args.torch_compile:
            stacks.remove("torch_compile")
            report["skipped_stacks"]["torch_compile"] = "on a CPU only with --torch-compile"
        if not stacks:
            sys.exit("no stack to run on this device")
        kcse_cache = os.path.join(folder, "jax-cache")
        inductor_cache = os.path.join(folder, "inductor-cache")
        runs = {stack: [] for stack in stacks}
        extras = {"kcse": ["--cache", kcse_cache]}
        environments = {"torch_compile": {"TORCHINDUCTOR_CACHE_DIR": inductor_cache}}
        if kind == "cpu" and "OMP_WAIT_POLICY" not in os.environ:
            # On a CPU that other processes share, torch's OpenMP threads
            # spin while they wait for each other (benchmarks/train.py):
            # measured 8-20x slower steps at load 6 on 2 cores.
            for stack in ("hf_eager", "torch_compile"):
                environments.setdefault(stack, {})["OMP_WAIT_POLICY"] = "PASSIVE"
            report["torch_omp_wait_policy"] = "PASSIVE"
            print("on a CPU: torch runs with OMP_WAIT_POLICY=PASSIVE", flush=True)
        if args.tiny and kind == "cpu":
            # XLA's CPU compiler takes ~25 s for even the smoke model's train
            # step at its default optimisation level; level 0 takes ~5 s.
            flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()
            environments["kcse"] = {"XLA_FLAGS": flags}
            report["kcse_xla_flags"] = flags
            print(f"--tiny on a CPU: kcse runs with XLA_FLAGS={flags} (faster compilation, "
                  "slower code)", flush=True)

        def left():
            return math.inf if args.deadline is None else args.deadline - (time.monotonic() - began)

        def estimate(stack):
            """Seconds the stack's next process should take."""
            last = runs[stack][-1]
            if len(runs[stack]) > 1 or stack == "hf_eager":
                return last["process_s"]
            # After the first: its compilations read from the cache, taken
            # as a quarter of their first time (kcse measured ~1/5).
            compiling = sum(record.get("first_step_s", 0) + record.get("first_encode_s", 0)
                            for record in last["results"].values())
            return last["process_s"] - 0.75 * compiling

        for run in range(args.runs):
            # A later round only when all of it should end before --deadline,
            # so that the stacks keep the same number of runs.
            needed = sum(estimate(stack) for stack in stacks) if run else 0.0
            if needed > left():
                print(f"--deadline: {left():.0f} s left, a round would take {needed:.0f} s; "
                      f"stopping after {run} run(s)", flush=True)
                report["stopped_by_deadline_after_runs"] = run
                break
            for stack in list(stacks):
                print(f"run {run + 1}/{args.runs}: {STACK_LABELS[stack]}", flush=True)
                output, failure = spawn(stack, argv, folder, extras.get(stack, ()),
                                        environments.get(stack), args.worker_timeout)
                if failure:  # The other stacks go on; this one is left out.
                    print(failure, flush=True)
                    report["failed_stacks"][stack] = failure
                    stacks.remove(stack)
                    report["stacks"].pop(stack, None)
                    runs.pop(stack)
                else:
                    print(f"  ({output['process_s']:.0f} s)", flush=True)
                    runs[stack].append(output)
                    report["stacks"][stack] = {"runs": runs[stack]}
                save()
            if not stacks:
                sys.exit("every stack failed")
        cached_only = {}
        for stack in ("kcse", "torch_compile"):
            if stack in stacks and len(runs[stack]) == 1:
                # Its cache is filled: first steps only, much shorter than a run.
                if runs[stack][0]["process_s"] / 2 > left():
                    print(f"--deadline: no time left for {STACK_LABELS[stack]}'s cached "
                          "first steps")
                    continue
                print(f"{STACK_LABELS[stack]} again, first steps only, its cache filled",
                      flush=True)
                output, failure = spawn(
                    stack, argv + ["--first-steps-only"], folder, extras.get(stack, ()),
                    environments.get(stack), args.worker_timeout)
                if failure:
                    print(failure, flush=True)
                    report["failed_stacks"][f"{stack} (first steps, cached)"] = failure
                else:
                    cached_only[stack] = [output]
                    print(f"  ({output['process_s']:.0f} s)", flush=True)
        # The device's fastest measured matrix product: bfloat16 on a GPU (on
        # a CPU without bfloat16 units, float32).
        peak_dtype = max(device["matmul_tflops"], key=device["matmul_tflops"].get)
        peak = device["matmul_tflops"][peak_dtype]
        report["peak"] = {"dtype": peak_dtype, "tflops": peak}
        report["runs_completed"] = min(len(runs[stack]) for stack in stacks)
        for stack in stacks:
            all_runs = runs[stack]
            if stack == "hf_eager":  # No compilation cache: every process is fresh.
                fresh, cached = all_runs, []
            else:
                fresh, cached = all_runs[:1], all_runs[1:] + cached_only.get(stack, [])
            summary = summarize(all_runs, fresh, cached)
            add_rates(summary, args, peak)
            info = {k: v for k, v in all_runs[-1].items() if k != "results"}
            report["stacks"][stack] = {"runs": all_runs, "summary": summary, "info": info}
            if stack in cached_only:
                report["stacks"][stack]["first_steps_only_runs"] = cached_only[stack]
        from kcse.data.chinese import SPLIT_SIZES

        projection = {"precision": args.projection_precision, "cells": grid_cells(),
                      "tasks": list(SPLIT_SIZES), "models": GRID_MODELS,
                      "cell_plans": cell_plans(), "stacks": {}, "notes": []}
        eager = report["stacks"].get("hf_eager", {}).get("summary")
        for stack in stacks:
            records = [record for run in runs[stack] for record in run["results"].values()]
            result = project_grid(report["stacks"][stack]["summary"], stack, args,
                                  args.projection_precision, eager, records)
            if result:
                projection["stacks"][stack] = result
                projection["notes"] = sorted(set(projection["notes"]) | set(result["notes"]))
        report["projection"] = projection
        report["complete"] = not report["failed_stacks"]
        save()
        print_report(report, args)
        if report["failed_stacks"]:
            sys.exit(f"failed: {', '.join(report['failed_stacks'])} (see above and the JSON)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
