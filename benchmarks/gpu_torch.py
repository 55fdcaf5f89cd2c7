"""`benchmarks/gpu.py`'s torch workers: HF transformers' BertModel in a torch loop, eager or
under `torch.compile(dynamic=False)`, with kcse's SimCSE loss."""

import os
import time

from gpu_common import (
    ATTENTION_DROPOUT, HIDDEN_DROPOUT, LEARNING_RATE, MAX_POSITIONS, SHAPES, TEMPERATURE,
    check_device, encode_sentences, encoding_seed, key, measurements, say, step_statistics,
    token_data, training_seed,
)
from gpu_device import sync


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


def build_model(torch, transformers, args, shape, device, compiled):
    """A randomly initialised BertModel (no pooler) of `shape` and the SimCSE loss module.

    `compiled`: the BertModel under `torch.compile(dynamic=False)`; the loss
    (a 2N x 2N matrix, a negligible share of the step) stays eager, as
    inductor's fused nll_loss kernel failed to compile in Triton
    ("PassManager::run failed") on an H200 with torch 2.11.
    """

    class SimCSEModel(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert
            self.encode = torch.compile(bert, dynamic=False) if compiled else bert

        def forward(self, token_ids, segment_ids, padding_mask):
            doubled = [torch.cat([value, value])
                       for value in (token_ids, segment_ids, padding_mask)]
            states = self.encode(input_ids=doubled[0], token_type_ids=doubled[1],
                                 attention_mask=doubled[2]).last_hidden_state
            return simcse_loss(torch, states[:, 0], TEMPERATURE)

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
    return bert, SimCSEModel(bert)


def as_tensors(torch, data, device):
    return {name: torch.from_numpy(value.astype("int64")).to(device)
            for name, value in data.items()}


def autocast_for(torch, device, precision):
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(precision)
    return lambda: torch.autocast(device, dtype=dtype, enabled=dtype is not None)


def step_function(torch, model, optimizer, autocast, precision):
    """One training step: forward under autocast, backward, Adam, zero_grad; the loss."""
    scaler = torch.amp.GradScaler("cuda") if precision == "float16" else None

    def step(batch):
        with autocast():
            loss = model(batch["token_ids"], batch["segment_ids"], batch["padding_mask"])
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step


def timed_epoch(torch, step, batches, device):
    """Per-step seconds (CUDA events between steps, no synchronisation; on a CPU the
    clock) from the end of step 1 on, and the losses."""
    losses, marks = [], []
    for batch in batches:
        losses.append(step(batch).detach())
        if device == "cuda":
            marks.append(torch.cuda.Event(enable_timing=True))
            marks[-1].record()
        else:
            marks.append(time.perf_counter())
    sync(torch, device)
    if device == "cuda":
        seconds = [a.elapsed_time(b) / 1000 for a, b in zip(marks, marks[1:])]
    else:
        seconds = [b - a for a, b in zip(marks, marks[1:])]
    return seconds, torch.stack(losses).float().cpu().numpy()


def measure_training(torch, step, batches, device, args, record):
    """First step (compilation included) of a warm-up epoch, then a timed epoch's steps."""
    start = time.perf_counter()
    for index, batch in enumerate(batches):
        step(batch)
        if index == 0:
            sync(torch, device)
            record["first_step_s"] = time.perf_counter() - start
        if args.first_steps_only:
            return
    seconds, losses = timed_epoch(torch, step, batches, device)
    record.update(step_statistics(seconds))
    record["loss"] = float(losses.mean())
    record["last_step_loss"] = float(losses[-1])


def measure_encoding(torch, bert, encoded, autocast, args, record, sentences):
    """Eval mode under inference_mode: seconds of the first batch, then sentences/s."""
    import numpy as np

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

    bert.eval()
    start = time.perf_counter()
    encode(batch_size)
    record["first_encode_s"] = time.perf_counter() - start
    if not args.first_steps_only:
        start = time.perf_counter()
        vectors = encode(sentences)
        record["encode_sentences_per_s"] = sentences / (time.perf_counter() - start)
        record["vectors_finite"] = bool(np.isfinite(vectors).all())
    bert.train()


def measure(torch, transformers, args, compiled, device, shape, precision, length):
    """One (shape, precision, length): its record, and the attention implementation."""
    bert, model = build_model(torch, transformers, args, shape, device, compiled)
    optimizer = torch.optim.Adam(bert.parameters(), lr=LEARNING_RATE, eps=1e-7)
    autocast = autocast_for(torch, device, precision)
    step = step_function(torch, model, optimizer, autocast, precision)
    data = as_tensors(torch, token_data(args.steps * args.batch_size, length, args.vocabulary,
                                        training_seed(shape, length)), device)
    batches = [{k: v[i : i + args.batch_size] for k, v in data.items()}
               for i in range(0, args.steps * args.batch_size, args.batch_size)]
    record = {}
    model.train()
    measure_training(torch, step, batches, device, args, record)
    if not compiled:
        encoded = as_tensors(torch, token_data(
            encode_sentences(args, device != "cpu"), length, args.vocabulary,
            encoding_seed(shape, length)), device)
        measure_encoding(torch, bert, encoded, autocast, args, record,
                         encode_sentences(args, device != "cpu"))
    return record, getattr(bert.config, "_attn_implementation", None)


def torch_worker(args, compiled):
    """HF transformers' BertModel in a torch loop, eager or under torch.compile.

    float32 runs with TF32 matrix products allowed, as JAX's default precision
    computes float32 on H100/H200.
    """
    for name in ("USE_TF", "USE_FLAX", "USE_JAX"):
        os.environ.setdefault(name, "0")
    stack = "torch_compile" if compiled else "hf_eager"
    began = time.perf_counter()
    import torch
    import transformers

    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device = "cuda" if torch.cuda.is_available() else "cpu"
    check_device(args, "torch", device != "cpu")
    imported = time.perf_counter() - began
    results, skipped, attention = {}, {}, None
    for shape, precision, length in measurements(args):
        name = key(shape, precision, length)
        if precision == "float16" and device == "cpu":
            skipped[name] = "float16 needs CUDA (GradScaler); not run on a CPU"
            continue
        results[name], attention = measure(
            torch, transformers, args, compiled, device, shape, precision, length)
        say(stack, f"{name}: " + ", ".join(
            f"{k} {v:.3f}" for k, v in results[name].items() if isinstance(v, float)))
        if device == "cuda":
            torch.cuda.empty_cache()
    return {
        "results": results, "skipped": skipped,
        "backend": f"torch {torch.__version__}, {device}",
        "device_name": torch.cuda.get_device_name(0) if device == "cuda" else "CPU",
        "transformers": transformers.__version__, "attention": attention,
        "tf32": {"cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                 "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32},
        "encode_sentences": None if compiled else encode_sentences(args, device != "cpu"),
        "imports_s": imported,
        "inductor_cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR") if compiled else None,
    }
