"""Synthetic results.json cells of a grid, as kcse's grid stores them."""

import math

from kcse.experiments.cell_record import DONE
from kcse.experiments.cell_record import FAILED
from kcse.experiments.results.identity import cell_identity
from kcse.experiments.results.identity import cell_key
from kcse.experiments.results.identity import run_settings
from kcse.experiments.results.identity import settings_id

# A grid of 300 cells (3 models × 4 poolings × 5 tasks × 5 methods): results.json
# of some hundreds of kB, so that each rewrite takes milliseconds.
MODELS = ("bert-base-chinese", "chinese-roberta-wwm-ext", "simbert-base")
POOLINGS = ("cls", "pooler", "first-last-avg", "last-avg")
TASKS = ("ATEC", "BQ", "LCQMC", "PAWSX", "STS-B")
METHODS = ("simcse", "esimcse", "consert", "sg-opt", "whitening-only")
CELLS = len(MODELS) * len(POOLINGS) * len(TASKS) * len(METHODS)


def scores(base, nan_pearson=False):
    return {split: {"spearman": base + shift, "pearson": math.nan if nan_pearson else base - 1.5,
                    "n": 1361 if split == "test" else 1458}
            for split, shift in (("test", 0.0), ("dev", 0.7))}


def grid_cell(index, counter):
    """`(key, record)` of cell `index`; `counter`: the write that stored it."""
    model = MODELS[index % len(MODELS)]
    pooling = POOLINGS[index // len(MODELS) % len(POOLINGS)]
    task = TASKS[index // (len(MODELS) * len(POOLINGS)) % len(TASKS)]
    method = METHODS[index // (len(MODELS) * len(POOLINGS) * len(TASKS))]
    failed = index % 17 == 5
    source = {"source": f"/models/{model}", "family": "bert", "prefix": "",
              "digest": f"{index % len(MODELS):016x}",
              "description": f"original bert checkpoint /models/{model}"}
    settings = run_settings(
        {"batch_size": 64, "learning_rate": 1e-5, "max_steps": 1000},
        {"method": method, "temperature": 0.05}, seed=0, seeds=3)
    identity = cell_identity(source, pooling, task, f"data{index % 5}", settings)
    base = 50 + index % 31
    runs = [{"seed": seed, "scores": scores(base + seed + 3), "kept_step": counter + seed,
             "training_seconds": float(counter + 10 * seed), "training_samples": 10000}
            for seed in range(3)]
    record = {
        "model": model, "model_source": source, "pooling": pooling, "task": task,
        "protocol": "su", "method": method,
        "status": FAILED if failed else DONE,
        "error": "ResourceExhaustedError: out of memory" if failed else None,
        "reported_split": "test",
        "raw": scores(base), "whitening": scores(base + 2, nan_pearson=index % 7 == 0),
        "trained": None if failed else {
            split: dict(entry, spearman_std=0.4, pearson_std=0.5, runs=3)
            for split, entry in scores(base + 4).items()},
        "runs": [] if failed else runs,
        "published": [31.5, 67.0, 70.8] if model == MODELS[0] else None,
        "training_samples": 10000, "whitening_sentences": 10000,
        "seconds": float(counter),
        "settings": settings, "settings_id": settings_id(settings),
        "data_digest": f"data{index % 5}",
        "provenance": {"kcse": "0.1.0", "keras": "3.15.1", "keras_hub": "0.32.0",
                       "tensorflow": "2.21.0", "backend": "tensorflow",
                       "git_commit": None, "date": "2026-11-23T10:01:00+00:00"},
    }
    key = cell_key(model, pooling, task, "su", method, identity)
    return key, record


# The pairs of each split of `made_up`'s cells.
SPLIT_PAIRS = {"train": 1000, "valid": 200, "test": 300}


def made_up(index, pooling, task, base, trained=("test",), **fields):
    """`{key: record}` of a done SimCSE cell of BERT (Su's release: his
    published cell beside it) on every split, c on `trained` (None: no c);
    `fields` replace the cell's."""
    _, cell = grid_cell(0, index)
    scores = {split: {"spearman": base + i * 1.25, "pearson": base, "n": n}
              for i, (split, n) in enumerate(SPLIT_PAIRS.items())}
    cell |= {"model": "BERT", "pooling": pooling, "task": task, "method": "simcse",
             "status": DONE, "error": None, "raw": scores,
             "whitening": {split: dict(entry, spearman=entry["spearman"] + 2)
                           for split, entry in scores.items()},
             "trained": None if trained is None else {
                 split: dict(scores[split], spearman=scores[split]["spearman"] + 4)
                 for split in trained},
             "published": [16.59, 20.61, 33.14]}
    cell["model_source"] = dict(cell["model_source"], source="/models/BERT")
    cell |= fields
    return {f"BERT|{pooling}|{task}|{cell['protocol']}|{cell['method']}|{index:016x}": cell}
