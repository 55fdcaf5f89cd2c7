"""The comparison grid: models × poolings × tasks, raw / whitening / trained."""

import contextlib
import dataclasses
import itertools
import pathlib
import time
import warnings

import keras
import numpy as np

from kcse.backbones.checkpoint import from_checkpoint
from kcse.backbones.hidden_states import set_hidden_dropout
from kcse.evaluation.sts import cosine_scores
from kcse.evaluation.sts import sts_correlations
from kcse.evaluation.sts_evaluator import STSEvaluator
from kcse.experiments.protocols import SPLITS
from kcse.experiments.methods import SimCSEMethod
from kcse.experiments.published import published_cell
from kcse.experiments.results import cell_key
from kcse.layers.whitening import Whitening
from kcse.sentence_encoder import SentenceEncoder
from kcse.sentence_encoder import predict_in_length_order

# Su's models: checkpoint folder names (as released) and kcse family.
SU_CHECKPOINTS = {
    "BERT": ("chinese_L-12_H-768_A-12", "bert"),
    "RoBERTa": ("chinese_roberta_wwm_ext_L-12_H-768_A-12", "roberta"),
    "NEZHA": ("nezha_base_wwm", "nezha"),
    "WoBERT": ("chinese_wobert_plus_L-12_H-768_A-12", "wobert"),
    "RoFormer": ("chinese_roformer_L-12_H-768_A-12", "roformer"),
    "SimBERT": ("chinese_simbert_L-12_H-768_A-12", "simbert"),
    "SimBERT-small": ("chinese_simbert_L-6_H-384_A-12", "simbert"),
    "SimBERT-tiny": ("chinese_simbert_L-4_H-312_A-12", "simbert"),
}
# Short names of keras-hub presets, with the text prefix they expect.
PRESETS = {"e5-small": ("multilingual_e5_small", "query: ")}


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """Where a model of the grid comes from.

    `family` set: an original TF checkpoint folder (`source`) of that kcse
    family; otherwise `source` is a keras-hub preset or local preset / HF
    folder. `prefix` is prepended to every sentence (E5: `"query: "`).
    """

    name: str
    source: str
    family: str = None
    prefix: str = ""


def resolve_model(name, checkpoint_root=None):
    """A `ModelSpec` from a grid model name.

    Names: Su's models (`BERT`, `RoBERTa`, `NEZHA`, `WoBERT`, `RoFormer`,
    `SimBERT`, `SimBERT-small`, `SimBERT-tiny`: folders under
    `checkpoint_root`), `e5-small`, a keras-hub preset, or a local folder;
    `PATH:family` names a checkpoint folder of a kcse family.
    """
    if name in SU_CHECKPOINTS:
        folder, family = SU_CHECKPOINTS[name]
        if checkpoint_root is None:
            raise ValueError(
                f"Model {name!r} needs --checkpoint-root, the folder holding "
                f"{folder}/ (the original release)."
            )
        return ModelSpec(name, str(pathlib.Path(checkpoint_root) / folder), family)
    if name in PRESETS:
        preset, prefix = PRESETS[name]
        return ModelSpec(name, preset, prefix=prefix)
    if ":" in name and not name.startswith(("hf://", "kaggle://")):
        path, family = name.rsplit(":", 1)
        return ModelSpec(pathlib.Path(path).name, path, family)
    if pathlib.Path(name).is_dir() and (pathlib.Path(name) / "bert_config.json").is_file():
        return ModelSpec(pathlib.Path(name).name, name, "bert")
    return ModelSpec(name, name)


def load_model(spec, sequence_length):
    """`(backbone, preprocessor)` for a `ModelSpec`."""
    if spec.family is not None:
        return from_checkpoint(spec.source, spec.family, sequence_length)
    with warnings.catch_warnings():
        # The offline e5 fallback warns; the grid prints its source instead.
        warnings.simplefilter("ignore", UserWarning)
        encoder = SentenceEncoder.from_preset(
            spec.source, sequence_length=sequence_length
        )
    return encoder.backbone, encoder.preprocessor


def has_pooler(backbone):
    """Whether P2 can run: a pooler with pretrained (non-zero) weights."""
    try:
        kernel = backbone.get_layer("pooled_dense").kernel
    except ValueError:
        return False
    return bool(np.any(keras.ops.convert_to_numpy(kernel)))


def encode_splits(model, preprocessor, data, prefix, batch_size, splits=SPLITS):
    """Vectors of both sides of every pair of `splits`: `{split: (v1, v2)}`.

    All sentences go through `predict_in_length_order` at once, so one
    sentence shared by several pairs or splits is encoded once. A model with
    a dict of outputs gives `{output: {split: (v1, v2)}}`.
    """
    texts, spans = [], {}
    for split in splits:
        pairs = data[split]
        spans[split] = (len(texts), len(pairs))
        texts += [prefix + s for s in pairs.sentences1 + pairs.sentences2]
    vectors = predict_in_length_order(model, preprocessor, texts, batch_size)

    def by_split(array):
        return {
            split: (array[start : start + n], array[start + n : start + 2 * n])
            for split, (start, n) in spans.items()
        }

    if isinstance(vectors, dict):
        return {key: by_split(array) for key, array in vectors.items()}
    return by_split(vectors)


class EveryPooling(keras.Model):
    """One pass of a backbone, the vectors of several encoders' poolings.

    The encoders share the backbone; the output is `{pooling: vectors}`.
    The raw vectors of all poolings of a cell group cost one encoding.
    """

    def __init__(self, encoders, **kwargs):
        super().__init__(**kwargs)
        self.encoders = encoders

    def call(self, inputs):
        first = next(iter(self.encoders.values()))
        states = first.hidden_states(inputs)["hidden_states"]
        return {
            pooling: encoder.pool(states, inputs["padding_mask"])
            for pooling, encoder in self.encoders.items()
        }


def score_splits(data, vectors, transform=None):
    """`{split: {"spearman", "pearson", "n"}}` of cosine vs gold."""
    scores = {}
    for split, (v1, v2) in vectors.items():
        if transform is not None:
            v1, v2 = transform(v1), transform(v2)
        scores[split] = sts_correlations(data[split].scores, cosine_scores(v1, v2))
    return scores


def valid_selection(encoder, data, protocol, prefix, batch_size=64):
    """Callbacks keeping the best step on valid, if the protocol says so."""
    if not protocol.select_on_valid:
        return []
    valid = data["valid"]
    return [
        STSEvaluator(
            encoder,
            ([prefix + s for s in valid.sentences1],
             [prefix + s for s in valid.sentences2], valid.scores),
            every_n_steps=protocol.eval_every,
            batch_size=batch_size,
            restore_best_weights=True,
        )
    ]


def run_cell(spec, encoder, pooling, task, data, raw_vectors, protocol, seed,
             method, encode_batch_size=64, plot_dir=None):
    """One cell: a raw, b whitened and c `method`-trained scores per split.

    `encoder` pools as `pooling` (the grid's name for it, e.g. "P1");
    `raw_vectors` are its un-tuned `{split: (v1, v2)}` of every split. The
    encoder's backbone must hold the model's initial weights; `method` (a
    `kcse.experiments.methods.Method`) trains it in place (the caller
    restores them for the next cell).
    """
    start = time.time()
    raw = score_splits(data, raw_vectors)

    # float64, as bojone's numpy: LayerNorm'd vectors have one direction of
    # near-zero variance, which whitening scales up; float32 arithmetic there
    # moves Spearman by ~0.1.
    whitening = Whitening(dtype="float64")
    statistics = [
        np.concatenate(raw_vectors[split]) for split in protocol.whitening_splits
    ]
    whitening.adapt(np.concatenate(statistics))
    whitened = score_splits(
        data,
        raw_vectors,
        lambda v: keras.ops.convert_to_numpy(whitening(v.astype("float64"))),
    )

    set_hidden_dropout(encoder.backbone, protocol.hidden_dropout)
    training_samples = method.train(
        encoder, data, protocol, task, seed, spec.prefix,
        valid_selection(encoder, data, protocol, spec.prefix, encode_batch_size),
    )
    trained_vectors = encode_splits(
        encoder, encoder.preprocessor, data, spec.prefix, encode_batch_size,
        protocol.trained_splits,
    )
    trained = score_splits(data, trained_vectors)

    record = {
        "model": spec.name,
        "source": spec.source,
        "pooling": pooling,
        "task": task,
        "protocol": protocol.name,
        "method": method.name,
        "reported_split": "test",
        "raw": raw,
        "whitening": whitened,
        "trained": trained,
        # Su's table is of unsupervised SimCSE.
        "published": published_cell(spec.name, pooling, task)
        if method.name == SimCSEMethod.name else None,
        "training_samples": training_samples,
        "whitening_sentences": int(sum(len(s) for s in statistics)),
        "seconds": time.time() - start,
        "settings": dataclasses.asdict(protocol) | method.settings() | {"seed": seed},
    }
    if plot_dir is not None:
        from kcse.experiments.plots import plot_cell

        split = record["reported_split"]
        pathlib.Path(plot_dir).mkdir(parents=True, exist_ok=True)
        plot_cell(
            pathlib.Path(plot_dir) / f"{spec.name}_{pooling}_{task}.png",
            data[split].scores,
            cosine_scores(*raw_vectors[split]),
            cosine_scores(*trained_vectors[split]),
            spec.name, pooling, task,
            raw[split]["spearman"], trained[split]["spearman"], split,
            method.title,
        )
    return record


def run_grid(models, poolings, tasks, read_task, protocol, store, seed=0,
             strategy=None, checkpoint_root=None, plot_dir=None, log=print,
             method=None):
    """Runs every cell not already in `store`, printing a line per cell.

    `read_task(task, split)` gives the `SentencePairs` of a split. Models
    are loaded once (inside `strategy.scope()` when a strategy is given)
    and reset to their initial weights before each cell; the raw vectors of
    all poolings of a model and task come from one encoding pass. Cells
    whose pooling the model cannot do (P2 without a pretrained pooler) are
    skipped, as the "-" of Su's table. `method` trains column c
    (`kcse.experiments.methods`; default: unsupervised SimCSE).
    """
    method = method or SimCSEMethod()
    if "test" not in protocol.trained_splits:
        raise ValueError(
            "The comparison reports the test split: trained_splits must "
            f"include 'test'; got {protocol.trained_splits}."
        )
    specs = [resolve_model(name, checkpoint_root) for name in models]
    todo = [
        (spec, pooling, task)
        for spec in specs
        for task in tasks
        for pooling in poolings
        if not store.has(cell_key(spec.name, pooling, task, protocol.name, method.name))
    ]
    skipped = len(specs) * len(tasks) * len(poolings) - len(todo)
    if skipped:
        log(f"{skipped} cell(s) already in {store.json_path}: skipped")
    start, done, total = time.time(), 0, len(todo)
    loaded = {}

    def scope():
        return strategy.scope() if strategy else contextlib.nullcontext()

    for (spec, task), group in itertools.groupby(todo, lambda c: (c[0], c[2])):
        if spec.name not in loaded:
            loaded.clear()  # One model in memory at a time.
            with scope():
                backbone, preprocessor = load_model(
                    spec, protocol.sequence_length(task)
                )
            loaded[spec.name] = (backbone, preprocessor, backbone.get_weights())
        backbone, preprocessor, initial = loaded[spec.name]
        group_poolings = []
        for _, pooling, _ in group:
            if pooling == "P2" and not has_pooler(backbone):
                key = cell_key(spec.name, pooling, task, protocol.name, method.name)
                log(f"{key}: no pretrained pooler, P2 skipped ('-' in Su's table)")
                total -= 1
            else:
                group_poolings.append(pooling)
        if not group_poolings:
            continue
        backbone.set_weights(initial)
        preprocessor.sequence_length = protocol.sequence_length(task)
        data = {split: read_task(task, split) for split in SPLITS}
        with scope():
            encoders = {
                pooling: SentenceEncoder(backbone, preprocessor, pooling=pooling)
                for pooling in group_poolings
            }
            raw_vectors = encode_splits(
                EveryPooling(encoders), preprocessor, data, spec.prefix, 64
            )
        for pooling in group_poolings:
            backbone.set_weights(initial)
            with scope():
                record = run_cell(spec, encoders[pooling], pooling, task, data,
                                  raw_vectors[pooling], protocol, seed, method,
                                  plot_dir=plot_dir)
            key = cell_key(spec.name, pooling, task, protocol.name, method.name)
            store.add(key, record)
            done += 1
            elapsed = time.time() - start
            eta = elapsed / done * (total - done)
            a, b, c = (record[col]["test"]["spearman"] for col in ("raw", "whitening", "trained"))
            log(f"[{done}/{total}] {key}: a {a:.2f} / b {b:.2f} / c {c:.2f} (test)"
                f"  cell {record['seconds']:.0f}s, elapsed {elapsed:.0f}s, ETA {eta:.0f}s")
    return store


def choose_strategy():
    """MirroredStrategy over all visible GPUs when there are several.

    Returns None (one device) otherwise, and on backends other than
    TensorFlow.
    """
    if keras.config.backend() != "tensorflow":
        return None
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    if len(gpus) < 2:
        return None
    return tf.distribute.MirroredStrategy([gpu.name for gpu in gpus])


def published_reference(tasks):
    """Su's published cells for `tasks`, as lines of text."""
    from kcse.experiments.published import POOLINGS
    from kcse.experiments.published import SU_MODELS

    lines = [f"Su Jianlin's published a / b / c for {', '.join(tasks)}:"]
    for model in SU_MODELS:
        for pooling in POOLINGS:
            cells = [published_cell(model, pooling, task) for task in tasks]
            text = "  ".join(
                f"{task} " + ("-" if cell is None else " / ".join(f"{v:.2f}" for v in cell))
                for task, cell in zip(tasks, cells)
            )
            lines.append(f"  {model}-{pooling}: {text}")
    return "\n".join(lines)
