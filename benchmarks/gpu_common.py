"""Shared by `benchmarks/gpu.py`'s processes: shapes, FLOPs, data, JSON, step statistics.

Imports no framework (numpy only inside the functions that make arrays).
"""

import json
import os
import pathlib
import statistics

STACKS = ("kcse", "hf_eager", "torch_compile")
STACK_LABELS = {"kcse": "kcse", "hf_eager": "HF eager", "torch_compile": "torch.compile"}
PRECISIONS = ("bfloat16", "float32", "float16")

# Transformer shapes: layers, hidden, heads, intermediate.
SHAPES = {
    "base": dict(layers=12, hidden=768, heads=12, intermediate=3072),
    "small": dict(layers=6, hidden=384, heads=12, intermediate=1536),
    "tiny": dict(layers=4, hidden=312, heads=12, intermediate=1248),
    # --tiny's own model (not Su's SimBERT-tiny).
    "smoke": dict(layers=2, hidden=64, heads=2, intermediate=128),
}
# Su's eight models (bojone/SimCSE; kcse.models.model_sources.SU_CHECKPOINTS)
# and their shapes. NEZHA (relative positions) and RoFormer (rotary ones)
# are counted as BERT-base, whose matrix products they share.
GRID_MODELS = {
    "BERT": "base",
    "RoBERTa": "base",
    "NEZHA": "base",
    "WoBERT": "base",
    "RoFormer": "base",
    "SimBERT": "base",
    "SimBERT-small": "small",
    "SimBERT-tiny": "tiny",
}
# WoBERT and RoFormer have no pooler: no P2 cells ("-" in Su's tables).
WITHOUT_POOLER = ("WoBERT", "RoFormer")


def grid_poolings(model):
    """The poolings of `model`'s cells in Su's grid."""
    return ("P1", "P3", "P4") if model in WITHOUT_POOLER else ("P1", "P2", "P3", "P4")


VOCABULARY = 21128  # Chinese BERT's.
MAX_POSITIONS = 512
ATTENTION_DROPOUT = 0.1  # keras-hub BertBackbone's `dropout` default.
HIDDEN_DROPOUT = 0.3  # Su's.
TEMPERATURE = 0.05
LEARNING_RATE = 1e-5
# Su's batch and length for STS-B, the cell whose compiled train programs are counted.
CELL_BATCH_SIZE = 64
CELL_LENGTH = 64


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


def token_data(rows, length, vocabulary, seed, lengths=None):
    """Random token ids, one segment: a dict of numpy int32 arrays `(rows, length)`.

    `lengths`: each row's real token count (its padding mask; ids 0 after
    it), else every row is full. The same `seed` gives the same ids in every
    process (kcse's compiled train step may depend on the ids the data uses).
    """
    import numpy as np

    generator = np.random.default_rng(seed)
    token_ids = generator.integers(5, vocabulary, (rows, length)).astype("int32")
    mask = np.ones((rows, length), "int32")
    if lengths is not None:
        mask = (np.arange(length)[None, :] < np.asarray(lengths)[:, None]).astype("int32")
        token_ids *= mask
    return {"token_ids": token_ids, "segment_ids": np.zeros((rows, length), "int32"),
            "padding_mask": mask}


def training_seed(shape, length):
    return 1000 * length + sorted(SHAPES).index(shape)


def encoding_seed(shape, length):
    return 1_000_000 + training_seed(shape, length)


def key(shape, precision, length):
    return f"{shape}/{precision}/{length}"


def step_statistics(seconds):
    """min / median / p90 (nearest rank) / mean milliseconds of per-step seconds."""
    ordered = sorted(1000 * s for s in seconds)
    p90 = ordered[min(len(ordered) - 1, max(0, -(-9 * len(ordered) // 10) - 1))]
    return {"ms_per_step": statistics.median(ordered), "ms_min": ordered[0], "ms_p90": p90,
            "ms_mean": statistics.fmean(ordered), "timed_steps": len(ordered)}


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


def check_device(args, library, on_accelerator):
    """Exits when this library's device is not the kind torch found first."""
    if args.device_kind and (args.device_kind != "cpu") != on_accelerator:
        raise SystemExit(
            f"{library} computes on {'an accelerator' if on_accelerator else 'the CPU'}, but "
            f"torch found {args.device_kind}: the figures would not compare"
        )


def write_json(path, data):
    """Writes `data` to `path` through a temporary file and `os.replace`."""
    path = pathlib.Path(path)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(temporary, path)


def say(stack, text):
    print(f"  [{stack}] {text}", flush=True)
