"""The comparison grid: models × poolings × tasks, raw / whitening / trained."""

import contextlib
import gc
import itertools
import pathlib
import time

import keras
import numpy as np

from kcse.foundation import atomic_files
from kcse.foundation import interrupts
from kcse.foundation.digests import content_digest
from kcse.evaluation.sts import cosine_scores
from kcse.evaluation.sts import sts_correlations
from kcse.experiments.methods import SimCSEMethod
from kcse.experiments.protocols import SPLITS
from kcse.experiments.protocols import TRAIN_FILE
from kcse.experiments.protocols import protocol_settings
from kcse.experiments.training import train_once
from kcse.experiments.published import published_cell
from kcse.experiments.provenance import run_provenance
from kcse.models.weight_snapshot import WeightSnapshot
from kcse.experiments import results
from kcse.layers.pooling_rules import unavailable_pooling
from kcse.layers.sentence_pooling import resolve_pooling
from kcse.evaluation.mteb_results import encoder_meta
from kcse.layers.whitening import null_directions
from kcse.layers.whitening import whitening_kernel
from kcse.layers.whitening import whitening_statistics
from kcse.models.model_sources import ModelSpec
from kcse.models.model_sources import load_model
from kcse.models.model_sources import resolve_model
from kcse.foundation.training_stops import NonFiniteLossError
from kcse.foundation.precision import precision_of
from kcse.sentence_encoder import SentenceEncoder
from kcse.batched_prediction import predict_in_length_order

def has_pooler(backbone):
    """Whether P2 can run: a pooler with pretrained (non-zero) weights."""
    try:
        kernel = backbone.get_layer("pooled_dense").kernel
    except ValueError:
        return False
    return bool(np.any(keras.ops.convert_to_numpy(kernel)))


def skipped_pooling(backbone, pooling):
    """Why the grid leaves out `pooling` on `backbone` (its cell is not run,
    as the "-" of Su's table), or None when the pooling can run.

    P2 needs a pretrained pooler; WK pooling, with the authors' defaults, a
    backbone of at least 6 transformer blocks: the rule of
    `pooling_rules.unavailable_pooling`, which the commands apply to a
    model's files before it loads.
    """
    mode = resolve_pooling(pooling)
    reason = unavailable_pooling(
        pooling,
        blocks=len(backbone.transformer_layers) if mode == "wk" else None,
        pooler=has_pooler(backbone) if mode == "pooler" else None,
    )
    if reason is None:
        return None
    return f"{reason}, {pooling} skipped" + (" ('-' in Su's table)" if mode == "pooler" else "")


def encode_splits(model, preprocessor, data, prefix, batch_size, splits=SPLITS):
    """Vectors of both sides of every pair of `splits`: `{split: (v1, v2)}`.

    A split the task does not have (`data[split]` is None) is left out.
    All sentences go through `predict_in_length_order` at once, so one
    sentence shared by several pairs or splits is encoded once. A model with
    a dict of outputs gives `{output: {split: (v1, v2)}}`.
    """
    texts, spans = [], {}
    for split in splits:
        pairs = data[split]
        if pairs is None:
            continue
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


def trained_summary(runs, scores="scores"):
    """Column c over seeds: per split, the mean and sample std of each score.

    The std is numpy's with `ddof=1` (None for a single run); `runs` is how
    many seeds it is over. `scores` names the runs' field summarised:
    `"scores"` (c) or `"whitened_scores"` (c+w).
    """
    summary = {}
    for split in runs[0][scores]:
        entry = {"n": runs[0][scores][split]["n"], "runs": len(runs)}
        for score in ("spearman", "pearson"):
            values = np.array([run[scores][split][score] for run in runs], "float64")
            entry[score] = float(values.mean())
            entry[f"{score}_std"] = float(values.std(ddof=1)) if len(runs) > 1 else None
        summary[split] = entry
    return summary


def positive_threshold(scores):
    """Gold above which a pair is a positive for alignment: 0.5 for 0/1
    labels, else 4.0 (of 0–5, as SimCSE's analysis)."""
    return 0.5 if set(np.unique(scores)) <= {0.0, 1.0} else 4.0


def diagnose(encoder, data, split, prefix):
    """`kcse.evaluation.anisotropy_report` of `encoder` on `data[split]`,
    with token frequencies counted on the sentences of all the task's splits.

    Every sentence gets the model's `prefix`, as the cell encodes it (e5's
    `"query: "`), so the removal curve at k = 0 is the cell's P3 score and
    the prefix's tokens are counted among the frequent ones.
    """
    from kcse.evaluation.anisotropy import anisotropy_report

    corpus = [prefix + s for name in SPLITS if data.get(name) is not None
              for s in data[name].sentences()]
    pairs = data[split]
    prefixed = ([prefix + s for s in pairs.sentences1],
                [prefix + s for s in pairs.sentences2], pairs.scores)
    return anisotropy_report(
        encoder, prefixed, corpus_sentences=corpus,
        threshold=positive_threshold(pairs.scores),
    )


# The revision of the diagnostics a cell holds: its "diagnostics" setting,
# so part of its identity. Bumped whenever a change in kcse's code changes
# their numbers, so that older diagnostics are never reused.
#   True: the first (no model prefix on the sentences).
#   2: the sentences carry the model's prefix, as the cell encodes them.
DIAGNOSTICS_REVISION = 2

FLOW_ARCHITECTURE = ("n_levels", "depth", "coupling_width", "coupling", "permutation", "seed")


def flow_settings(seed):
    """BERT-flow's settings in the grid: `kcse.layers.BertFlow`'s defaults
    (the authors' `config_l3_d3_w32` and training), its weights seeded."""
    from kcse.layers import bert_flow

    config = bert_flow.BertFlow(seed=seed).get_config()
    return {name: config[name] for name in FLOW_ARCHITECTURE} | {
        "epochs": bert_flow.EPOCHS, "batch_size": bert_flow.BATCH_SIZE,
        "learning_rate": bert_flow.LEARNING_RATE}


def flow_scores(data, raw_vectors, fit_vectors, seed):
    """BERT-flow's scores: a flow trained by maximum likelihood on
    `fit_vectors` (the raw vectors b whitens with; the backbone is not
    touched), every split's pairs scored by the cosine of their latent
    vectors."""
    from kcse.layers.bert_flow import BertFlow

    settings = flow_settings(seed)
    flow = BertFlow(**{name: settings[name] for name in FLOW_ARCHITECTURE})
    flow.adapt(fit_vectors, epochs=settings["epochs"],
               batch_size=settings["batch_size"],
               learning_rate=settings["learning_rate"], seed=seed)
    return score_splits(data, raw_vectors,
                        lambda v: keras.ops.convert_to_numpy(flow(v)))


def whitening_vectors(vectors, splits):
    """Both sides of `splits` of `vectors` (`{split: (v1, v2)}`) in one
    array, the vectors a whitening is adapted on; None when `vectors` has
    none of the splits."""
    parts = [np.concatenate(vectors[split]) for split in splits if split in vectors]
    return np.concatenate(parts) if parts else None


def adapted_whitening(vectors):
    """BERT-whitening fitted on `vectors`, `(mean, kernel)`: `Whitening`'s
    statistics and kernel, in float64 with numpy as bojone's, on every
    backend (`whitened` applies them, also in numpy).

    LayerNorm'd vectors (P1, P3) have a direction of float-noise variance,
    which `Whitening` zeroes instead of scaling the noise up (its
    docstring), so the scores do not move with float precision or batch
    order; `null_directions(kernel)` says how many there were.
    """
    mean, covariance, _, _ = whitening_statistics(vectors)
    return mean, whitening_kernel(covariance)


def whitened(whitening):
    """A `score_splits` transform: `(v - mean) @ kernel` in float64."""
    mean, kernel = whitening
    return lambda v: (np.asarray(v, "float64") - mean) @ kernel


def run_cell(spec, encoder, pooling, task, data, raw_vectors, protocol, seeds,
             method, restore_weights, encode_batch_size=64, plot_path=None,
             diagnostics=False, flow=False, trained_whitening=False):
    """One cell: a raw, b whitened and c `method`-trained scores per split.

    `encoder` pools as `pooling` (the grid's name for it, e.g. "P1");
    `raw_vectors` are its un-tuned `{split: (v1, v2)}` of every split.
    Column c is trained once per seed of `seeds`, each time from the
    model's initial weights (`restore_weights()` puts them back) with all
    randomness drawn from that seed. A loss that turns NaN/Inf makes the
    cell `"failed"` (with the reason) instead of a number. With
    `trained_whitening`, the cell also holds c+w: each seed's trained
    encoder whitened on its own vectors of the protocol's whitening splits
    (`adapted_whitening`, as b on the raw vectors), scored on the splits c is
    scored on (an encoding pass of the whitening splits per seed). With `flow`,
    the cell also holds BERT-flow's scores (`flow_scores`, trained on the
    protocol's whitening splits, seeded with the first seed). With
    `diagnostics`, the cell also holds `kcse.evaluation.anisotropy_report`
    of the raw and of the trained encoder on the reported split (a PNG of
    them beside the cell's plot). Returns the record of the cell (see
    `kcse.experiments.results.ResultStore`).
    """
    start = time.time()
    raw = score_splits(data, raw_vectors)

    # The cell records how many null directions the whitening zeroed. A
    # task without the protocol's whitening splits has no b (nor c+w).
    fit = whitening_vectors(raw_vectors, protocol.whitening_splits)
    whitening = whitened_raw = flowed = None
    if fit is not None:
        whitening = adapted_whitening(fit)
        whitened_raw = score_splits(data, raw_vectors, whitened(whitening))
        if flow:
            flowed = flow_scores(data, raw_vectors, fit, seeds[0])
    # c+w needs the trained vectors of the whitening splits too: one
    # encoding of both sets of splits (a sentence in both is encoded once).
    whiten_trained = trained_whitening and whitening is not None
    encoded_splits = protocol.trained_splits
    if whiten_trained:
        encoded_splits = tuple(split for split in SPLITS
                               if split in protocol.trained_splits + protocol.whitening_splits)

    runs, error, trained_vectors = [], None, None
    # A task without the data the method trains on (stsb-multi-mt languages
    # without a train split), or a model the method cannot train (SG-OPT's
    # --pivot-layers beyond its layers), has no c.
    untrained = (method.missing_training_data(data, protocol)
                 or method.encoder_problem(encoder))
    reports = None
    if diagnostics:
        restore_weights()
        reports = {"raw": diagnose(encoder, data, "test", spec.prefix), "trained": None}
    for seed in () if untrained else seeds:
        restore_weights()
        try:
            run = train_once(method, encoder, data, protocol, task, seed, spec.prefix,
                             encode_batch_size)
        except NonFiniteLossError as failure:
            error = f"seed {seed}: {failure}"
            break
        trained = run.encoder
        # The objective, its optimizer state and traced training steps sit
        # in reference cycles: free them now, not at some later collection
        # while the next run trains beside them.
        gc.collect()
        trained_vectors = encode_splits(
            trained, trained.preprocessor, data, spec.prefix, encode_batch_size,
            encoded_splits,
        )
        scored = {split: trained_vectors[split] for split in protocol.trained_splits
                  if split in trained_vectors}
        runs.append({
            "seed": seed,
            "scores": score_splits(data, scored),
            "kept_step": run.kept_step,
            "training_seconds": run.seconds,
            "training_samples": run.samples,
        })
        if whiten_trained:
            seed_whitening = adapted_whitening(
                whitening_vectors(trained_vectors, protocol.whitening_splits))
            runs[-1]["whitened_scores"] = score_splits(
                data, scored, whitened(seed_whitening))
            runs[-1]["whitening_null_directions"] = null_directions(seed_whitening[1])

    if reports is not None and runs and not error:
        reports["trained"] = diagnose(trained, data, "test", spec.prefix)
    record = {
        "model": spec.name,
        "model_source": spec.record(),
        # Its size for MTEB's model_meta.json (`--mteb-output`).
        "encoder": encoder_meta(encoder),
        "pooling": pooling,
        "task": task,
        "protocol": protocol.name,
        "method": method.name,
        "status": results.FAILED if error else results.DONE,
        "error": error,
        "reported_split": "test",
        "raw": raw,
        "whitening": whitened_raw,
        "trained": trained_summary(runs) if runs and not error else None,
        "untrained": untrained,
        "runs": runs,
        # Su's table is of unsupervised SimCSE on his releases.
        "published": published_cell(spec.published_as, pooling, task)
        if method.name == SimCSEMethod.name and spec.published_as else None,
        "training_samples": runs[0]["training_samples"] if runs else None,
        "whitening_sentences": 0 if fit is None else len(fit),
        "whitening_null_directions": None if whitening is None else null_directions(whitening[1]),
        "seconds": time.time() - start,
    }
    if flow:
        record["flow"] = flowed
    if trained_whitening:  # None: no b (nothing to whiten on), or no c.
        record["trained_whitening"] = (
            trained_summary(runs, "whitened_scores")
            if runs and not error and whiten_trained else None)
    if reports is not None:
        record["diagnostics"] = reports
    if plot_path is not None and reports is not None:
        from kcse.experiments.plots import plot_diagnostics

        with atomic_files.replacing(plot_path.with_name(
                plot_path.stem + "_diagnostics.png")) as temporary:
            plot_diagnostics(temporary, reports, spec.name, pooling, task, method.title)
    if plot_path is not None and runs and not error:
        from kcse.experiments.plots import plot_cell

        split = record["reported_split"]
        with atomic_files.replacing(plot_path) as temporary:
            plot_cell(
                temporary,
                data[split].scores,
                cosine_scores(*raw_vectors[split]),
                cosine_scores(*trained_vectors[split]),
                spec.name, pooling, task,
                raw[split]["spearman"], runs[-1]["scores"][split]["spearman"],
                split, method.title,
            )
    return record


def resolve_models(models, checkpoint_root=None):
    """`ModelSpec`s of `models` (names or specs), each model once."""
    specs = {}
    for name in models:
        spec = name if isinstance(name, ModelSpec) else resolve_model(name, checkpoint_root)
        specs.setdefault(content_digest(spec.identity()), spec)
    return list(specs.values())


def run_grid(models, poolings, tasks, read_task, protocol, store, seed=0,
             strategy=None, checkpoint_root=None, plot_dir=None, log=print,
             method=None, seeds=1, diagnostics=False, postprocess=("whitening",),
             raw_cache=None, train_file=None):
    """Runs every cell not already in `store`, printing a line per cell.

    `models` are names for `resolve_model` or `ModelSpec`s;
    `read_task(task, split)` gives the `SentencePairs` of a split, or None
    for a split the task does not have (its cells then lack what needs it:
    b without the protocol's whitening splits, c without the method's
    training data, said in the cell's `"untrained"`). A cell is
    skipped only when `store` holds it with the same identity: the same
    model source and weights, data, protocol, method, settings, seeds and
    revision of kcse's numerics (`kcse.experiments.results.cell_identity`,
    `results.NUMERICS`); cells of other settings or older numerics stay
    beside the new ones, and a line says what differs. Models are
    loaded once (inside `strategy.scope()` when a strategy is given) and
    reset to their initial weights before each training; the raw vectors
    of all poolings of a model and task come from one encoding pass. Cells
    whose pooling the model cannot do (`skipped_pooling`: P2 without a
    pretrained pooler, WK with fewer than 6 blocks) are skipped, as the "-"
    of Su's table. `method` trains column c
    (`kcse.experiments.methods`; default: unsupervised SimCSE) `seeds`
    times, with seeds `seed, seed + 1, ...`. `diagnostics` adds the
    anisotropy diagnostics of the raw and trained encoder to each cell.
    `postprocess` names what is scored beside the raw vectors without
    training: `"whitening"` (column b, always) and `"flow"` (BERT-flow);
    and `"trained-whitening"`, column c+w: the trained encoder whitened on
    its own vectors (`run_cell`). Each but whitening enters the cells'
    settings only when asked for, so that the cells of runs without it
    keep their identity.
    The models are built under Keras' global dtype policy (the recipes'
    `--precision`), whose precision is a setting of every cell unless it
    is float32 (`kcse.foundation.precision.precision_of()`). `raw_cache`, a dict the
    caller keeps across grids of other settings (a sweep's values), holds
    the raw vectors by model, data, pooling, length and precision, so each
    is encoded once. `train_file`: the
    `kcse.data.SentenceFile` of `--train-file`, which trains column c of
    every task when `protocol` says so (`protocols.with_train_file`; its
    digest is then a setting of every cell).

    Returns the keys of this grid's cells (in `store.cells`), in order.
    """
    method = method or SimCSEMethod()
    if "test" not in protocol.trained_splits:
        raise ValueError(
            "The comparison reports the test split: trained_splits must "
            f"include 'test'; got {protocol.trained_splits}."
        )
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1; got {seeds}.")
    specs = resolve_models(models, checkpoint_root)
    for spec in specs:
        log(f"model {spec.name}: {spec.description}")
    data = {task: {split: read_task(task, split) for split in SPLITS} for task in tasks}
    settings = results.run_settings(
        protocol_settings(protocol), method.settings(), seed, seeds
    )
    if diagnostics:  # A cell without them does not answer a run that asks.
        settings["diagnostics"] = DIAGNOSTICS_REVISION
    # The models compute in the global policy's precision. float32, kcse's
    # only precision before there was a choice, is left out, so that its
    # cells keep the identity they always had (`results.IMPLIED_SETTINGS`).
    precision = precision_of()
    if precision != "float32":
        settings["precision"] = precision
    flow = "flow" in postprocess
    if flow:
        settings["flow"] = flow_settings(seed)
    trained_whitening = "trained-whitening" in postprocess
    if trained_whitening:
        settings["trained_whitening"] = True
    data_digests = {
        task: content_digest([None if pairs is None else
                              [pairs.sentences1, pairs.sentences2, pairs.scores]
                              for pairs in splits.values()])
        for task, splits in data.items()
    }
    raw_cache = {} if raw_cache is None else raw_cache
    if train_file is not None:  # Keyed by its digest, in the settings.
        for splits in data.values():
            splits[TRAIN_FILE] = train_file
    cells = {}
    for spec in specs:
        for task in tasks:
            for pooling in poolings:
                identity = results.cell_identity(
                    spec.identity(), pooling, task, data_digests[task], settings
                )
                key = results.cell_key(spec.name, pooling, task, protocol.name,
                                       method.name, identity)
                cells[key] = (spec, pooling, task, data_digests[task])
    report_other_settings(store, cells, settings, log)
    todo = [(key, *cell) for key, cell in cells.items() if not store.finished(key)]
    if len(todo) < len(cells):
        log(f"{len(cells) - len(todo)} cell(s) with these settings already in "
            f"{store.json_path}: skipped")
    start, done, total = time.time(), 0, len(todo)
    loaded = {}

    def scope():
        return strategy.scope() if strategy else contextlib.nullcontext()

    for (spec, task), group in itertools.groupby(todo, lambda c: (c[1], c[3])):
        group = list(group)
        if spec not in loaded:
            close_snapshots(loaded)
            loaded.clear()  # One model in memory at a time.
            with scope():
                backbone, preprocessor = load_model(
                    spec, protocol.sequence_length(task)
                )
                # Its initial weights on disk, not a second copy in memory.
                loaded[spec] = (backbone, preprocessor, WeightSnapshot(backbone.weights))
            interrupts.check()  # A Ctrl-C during the loading stops here.
        backbone, preprocessor, initial = loaded[spec]
        runnable = []
        for key, _, pooling, _, data_digest in group:
            reason = skipped_pooling(backbone, pooling)
            if reason:
                log(f"{key}: {reason}")
                total -= 1
                del cells[key]
            else:
                runnable.append((key, pooling, data_digest))
        if not runnable:
            continue
        initial.restore()
        preprocessor.sequence_length = protocol.sequence_length(task)
        with scope():
            encoders = {
                pooling: SentenceEncoder(backbone, preprocessor, pooling=pooling)
                for _, pooling, _ in runnable
            }
            # What the raw vectors depend on: weights, data, pooling, length
            # and precision (the method and its settings do not touch them).
            raw_keys = {pooling: (content_digest(spec.identity()), data_digest, pooling,
                                  preprocessor.sequence_length, precision)
                        for _, pooling, data_digest in runnable}
            missing = [pooling for pooling, raw_key in raw_keys.items()
                       if raw_key not in raw_cache]
            if missing:
                encoded = encode_splits(
                    EveryPooling({pooling: encoders[pooling] for pooling in missing}),
                    preprocessor, data[task], spec.prefix, 64,
                )
                raw_cache.update({raw_keys[pooling]: encoded[pooling] for pooling in missing})
            raw_vectors = {pooling: raw_cache[raw_key] for pooling, raw_key in raw_keys.items()}
        for key, pooling, data_digest in runnable:
            if not store.claim(key):  # Another run computes it, or did.
                log(f"{key}: {'finished' if store.finished(key) else 'being computed'} "
                    f"by another run sharing {store.json_path}: skipped here")
                total -= 1
                continue
            with scope():
                record = run_cell(
                    spec, encoders[pooling], pooling, task, data[task],
                    raw_vectors[pooling], protocol, range(seed, seed + seeds),
                    method, initial.restore,
                    plot_path=None if plot_dir is None else
                    pathlib.Path(plot_dir) / plot_name(key),
                    diagnostics=diagnostics, flow=flow,
                    trained_whitening=trained_whitening,
                )
            record |= {"settings": settings,
                       "settings_id": results.settings_id(settings),
                       "numerics": results.NUMERICS,
                       "data_digest": data_digest,
                       "provenance": run_provenance()}
            store.add(key, record)
            done += 1
            elapsed = time.time() - start
            eta = elapsed / done * (total - done)
            a, b, c, std, runs = results.cell_columns(record)[:5]
            spread = "" if std == "-" else f" ± {std} over {runs} seeds"
            if "flow" in record:
                b += f" / flow {results.number(results.reported(record, 'flow')[0])}"
            if "trained_whitening" in record:
                spread += f" / c+w {results.number(results.reported(record, 'trained_whitening')[0])}"
            log(f"[{done}/{total}] {key}: a {a} / b {b} / c {c}{spread} (test)"
                f"  cell {record['seconds']:.0f}s, elapsed {elapsed:.0f}s, ETA {eta:.0f}s")
    close_snapshots(loaded)
    return [key for key in cells if key in store.cells]


def close_snapshots(loaded):
    """Deletes the weight snapshots of `loaded` `(backbone, preprocessor, snapshot)`s."""
    for _, _, snapshot in loaded.values():
        snapshot.close()


def plot_name(key):
    """A file name for a cell's plot: its key, made safe for file systems."""
    name, pooling, task, _, method, digest = key.split("|")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return f"{safe}_{pooling}_{task}_{method}_{digest[:8]}.png"


def report_other_settings(store, cells, settings, log):
    """Says what differs in stored cells of this grid's places.

    A place is a model, pooling, task, protocol and method; a stored cell
    there with another identity (other settings, seeds, data, or numbers
    computed by older kcse code: `results.NUMERICS`) stays in the
    store and in results.md beside the new one, and the line names each
    difference, so that nobody takes one for the other.
    """
    places = {}
    for key, (spec, pooling, task, data_digest) in cells.items():
        protocol, method = key.split("|")[3:5]
        places[(content_digest(spec.identity()), pooling, task, protocol, method)] = data_digest
    differences, count = set(), 0
    for key, cell in store.cells.items():
        model = {name: cell["model_source"][name] for name in ModelSpec.IDENTITY}
        place = (content_digest(model), cell["pooling"], cell["task"],
                 cell["protocol"], cell["method"])
        if key in cells or place not in places:
            continue
        count += 1
        differences.update(results.setting_differences(cell["settings"], settings))
        numerics = cell.get("numerics", 1)
        if numerics != results.NUMERICS:
            differences.add(f"kcse numerics {numerics} → {results.NUMERICS}")
        if cell["data_digest"] != places[place]:
            differences.add("the task's data")
    if count:
        log(f"{store.json_path} also holds {count} cell(s) of these models, "
            f"poolings and tasks with other settings ({'; '.join(sorted(differences))}): "
            "they stay beside the new ones")
