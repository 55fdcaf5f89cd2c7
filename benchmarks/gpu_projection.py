"""`benchmarks/gpu.py`'s projection of Su Jianlin's full Chinese SimCSE grid from measured figures.

Su's eight models (BERT, RoBERTa, NEZHA, WoBERT, RoFormer, SimBERT base,
small and tiny) x poolings P1-P4 (no P2 for WoBERT and RoFormer, which have
no pooler) x tasks ATEC, BQ, LCQMC, PAWSX, STS-B, under kcse's "su" protocol
(`kcse.experiments.protocols`: 10,000 training sentences a cell, PAWSX all of
them at length 128) and split sizes (`kcse.data.chinese.SPLIT_SIZES`).
"""

import math

from gpu_common import GRID_MODELS, forward_flops, grid_poolings, key, step_flops

# Encoding pads each batch to a power of two of at least this (kcse's
# `batched_prediction.COARSE_MIN_LENGTH` under JAX; not imported, it would
# load Keras): the projection counts one compiled program per such length.
ENCODE_MIN_LENGTH = 16


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

    return sum(len(grid_poolings(model)) for model in GRID_MODELS) * len(SPLIT_SIZES)


class Figures:
    """One stack's measured figures, looked up at the nearest measured length, scaled by FLOPs."""

    def __init__(self, summary, eager, stack, args, precision):
        from kcse.experiments.protocols import PROTOCOLS

        self.summary, self.args, self.precision = summary, args, precision
        # torch.compile's encoding is HF eager's (not measured compiled).
        self.encoding = (eager or {}) if stack == "torch_compile" else summary
        self.batch_size = PROTOCOLS["su"].batch_size
        self.notes = set()

    def lookup(self, table, shape, length, field):
        """(value at the nearest measured length, that length, the shape measured)."""
        for candidate in dict.fromkeys((shape, self.args.shape)):
            lengths = [int(name.split("/")[2]) for name, entry in table.items()
                       if name.startswith(f"{candidate}/{self.precision}/")
                       and entry.get(field) is not None]
            if lengths:
                at = min(lengths, key=lambda measured: (abs(measured - length), -measured))
                return table[key(candidate, self.precision, at)][field], at, candidate
        return None, None, None

    def step_seconds(self, shape, length):
        ms, at, measured = self.lookup(self.summary, shape, length, "ms_per_step")
        if ms is None:
            return None
        if (measured, at, self.args.batch_size) != (shape, length, self.batch_size):
            self.notes.add(f"train step, scaled by FLOPs: {shape} at length {length}, batch "
                           f"{self.batch_size} from {measured} at {at}, batch "
                           f"{self.args.batch_size}")
        return ms / 1000 * (step_flops(shape, self.batch_size, length)
                            / step_flops(measured, self.args.batch_size, at))

    def encode_seconds(self, shape, length, count):
        rate, at, measured = self.lookup(self.encoding, shape, length, "encode_sentences_per_s")
        if rate is None:
            return 0.0
        if (measured, at) != (shape, length):
            self.notes.add(f"encoding, scaled by FLOPs: {shape} at length {length} from "
                           f"{measured} at {at}")
        return count / rate * forward_flops(shape, length) / forward_flops(measured, at)

    def compile_seconds(self, shape, length, field, label):
        """The measured seconds; a cached figure not measured counts as the fresh one."""
        seconds, _, _ = self.lookup(self.summary, shape, length, field)
        seconds = seconds or {}
        if label not in seconds and "fresh" in seconds:
            self.notes.add(f"{field} from the cache not measured: counted as fresh")
            return seconds["fresh"]
        return seconds.get(label, 0.0)


def cell_compile_seconds(figures, stack, model, shape, length, programs, label, seen,
                         unique_train):
    """(seconds, seconds if train programs repeated) compiling one model x task's cells.

    A program seen before in the grid (`seen`, updated) costs the `label`
    figure ("cached": read back from the persistent cache), a new one the
    "fresh" figure.
    """
    total = ideal = 0.0
    if stack == "kcse":
        fresh = figures.compile_seconds(shape, length, "first_encode_s", "fresh")
        again = figures.compile_seconds(shape, length, "first_encode_s", label)
        padded_lengths = [2**i for i in range(4, 10)
                          if ENCODE_MIN_LENGTH <= 2**i < length] + [length]
        for pooling in ("every", *grid_poolings(model)):
            for padded in padded_lengths:
                cost = again if (model, pooling, padded) in seen else fresh
                seen.add((model, pooling, padded))
                total, ideal = total + cost, ideal + cost
    fresh = figures.compile_seconds(shape, length, "first_step_s", "fresh")
    again = figures.compile_seconds(shape, length, "first_step_s", label)
    for pooling in grid_poolings(model):
        program = (model, pooling, length, "train")
        repeat = again if program in seen else fresh
        seen.add(program)
        ideal += programs * repeat
        total += programs * (fresh if unique_train else repeat)
    return total, ideal


def grid_seconds(figures, stack, label, train_programs, unique_train):
    """Seconds of the grid's parts (train, encode, compile, compile_ideal), or None."""
    total = dict.fromkeys(("train", "encode", "compile", "compile_ideal"), 0.0)
    seen = set()
    for model, shape in GRID_MODELS.items():
        for plan in cell_plans().values():
            length = plan["length"]
            step = figures.step_seconds(shape, length)
            if step is None:
                return None
            cells = len(grid_poolings(model))
            total["train"] += cells * plan["steps"] * step
            total["encode"] += (figures.encode_seconds(shape, length, plan["raw_encoded"])
                                + cells * figures.encode_seconds(shape, length, plan["test_encoded"]))
            if label is not None:
                programs = train_programs or plan["train_shapes"]
                compiled, ideal = cell_compile_seconds(
                    figures, stack, model, shape, length, programs, label, seen, unique_train)
                total["compile"] += compiled
                total["compile_ideal"] += ideal
    return total


def project_grid(summary, stack, args, precision, eager=None, records=(), train_programs=None):
    """Minutes of Su's grid for one stack, from its measured figures.

    Per model x task: one raw pass encoding both sides of every pair of every
    split, for all four poolings at once. Per cell: SimCSE on the protocol's
    training sentences, one epoch, padded to the task's full length, each
    step timed as the measured median step; then the test split encoded
    again. Encoding is counted at the full length (an upper bound) and
    sentences are not deduplicated; model loading, whitening and scoring are
    left out. Compilation (kcse, torch.compile): each cell compiles
    `train_programs` train programs (kcse: measured on STS-B; else the
    plan's batch shapes) and kcse's encoders one per padded length, each at
    the measured seconds to the first step / encoded batch, "fresh" without
    a cache, "cached" where the same program (model, pooling, shapes) came
    before. Where kcse trained a copy of the used token-embedding rows (on
    a CPU), each cell's train program differs, so none is read back
    ("cache_if_train_shapes_repeat": what the cache would give otherwise).
    """
    figures = Figures(summary, eager, stack, args, precision)
    if stack == "torch_compile":
        figures.notes.add("torch.compile: encoding as HF eager's (not measured compiled)")
    if train_programs and stack == "kcse":
        figures.notes.add(f"kcse: {train_programs} train program(s) a cell, as measured on "
                          "STS-B")
    unique_train = any(record.get("embedding_rows_copy") for record in records)
    labels = ("fresh", "cached") if stack in ("kcse", "torch_compile") else (None,)
    minutes = {}
    for label in labels:
        total = grid_seconds(figures, stack, label, train_programs if stack == "kcse" else None,
                             unique_train)
        if total is None:
            return None
        name = {"fresh": "no_cache", "cached": "cache", None: "total"}[label]
        minutes[name] = (total["train"] + total["encode"] + total["compile"]) / 60
        if label == "cached" and unique_train:
            minutes["cache_if_train_shapes_repeat"] = (
                total["train"] + total["encode"] + total["compile_ideal"]) / 60
        minutes[f"{name}_parts"] = {k: v / 60 for k, v in total.items() if k != "compile_ideal"}
    return {"minutes": minutes, "notes": sorted(figures.notes)}
