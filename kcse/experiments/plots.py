"""The cells' figures: the "collapse" (gold score vs cosine, raw beside
trained) and the anisotropy diagnostics, each titled with the cell and the
data it plots: `e5-small / P1 / STS-B test (STS-B.test.data), n = 1361 pairs`."""

import pathlib

import numpy as np


def plot_cell(path, gold, raw_cosine, simcse_cosine, model, pooling, task,
              raw_spearman, simcse_spearman, split="test", method="SimCSE", source=""):
    """Write a PNG of one cell: gold score (x) vs cosine (y), raw | SimCSE.

    The right panel is titled `method`, the training method of column c;
    the figure by the cell, the data set (`task`, `split` and the name of
    `source`, the file the pairs were read from) and n, the pairs plotted.

    Raw BERT-style cosines bunch near 1 whatever the gold score (anisotropy);
    after SimCSE they spread out and follow the gold score. Both panels share
    the y axis so the difference shows. Discrete gold scores (binary or 0..5
    labels) get a horizontal jitter so the points do not overlap, and a red
    bar at each label's median cosine.
    Spearmans are ×100, as `kcse.evaluation.evaluate_sts` reports them.
    Needs matplotlib (`pip install kcse[plot]`); renders with Agg and
    returns `path`.

    Example:
    ```python
    plot_cell("bert_p1_stsb.png", gold, raw_cos, simcse_cos, "BERT", "P1",
              "STS-B", raw_spearman=34.65, simcse_spearman=69.04,
              source="senteval_cn/STS-B/STS-B.test.data")
    ```
    """
    figure = _build_figure(gold, raw_cosine, simcse_cosine, model, pooling,
                           task, raw_spearman, simcse_spearman, split, method, source)
    figure.savefig(path, dpi=120)
    figure.clear()  # no pyplot: nothing else holds the figure
    return path


def _build_figure(gold, raw_cosine, simcse_cosine, model, pooling, task,
                  raw_spearman, simcse_spearman, split="test", method="SimCSE", source=""):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError("plot_cell needs matplotlib: `pip install kcse[plot]` "
                          "(i.e. `pip install matplotlib`).") from error
    gold = np.asarray(gold, dtype=float)
    cosines = [np.asarray(c, dtype=float) for c in (raw_cosine, simcse_cosine)]
    levels = np.unique(gold)
    discrete = len(levels) <= 11
    step = float(np.min(np.diff(levels))) if len(levels) > 1 else 1.0
    x = gold
    if discrete:  # jitter by ±18% of a label step
        x = gold + np.random.default_rng(0).uniform(-0.18, 0.18, len(gold)) * step
    alpha = float(np.clip(20 / np.sqrt(max(len(gold), 1)), 0.05, 0.6))
    low = min(float(np.min(c)) for c in cosines)
    margin = 0.03 * (1.0 - low) + 0.01
    figure = Figure(figsize=(10, 4.6), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.subplots(1, 2, sharey=True)
    for ax, cos, name, rho in zip(axes, cosines, ("raw", method),
                                  (raw_spearman, simcse_spearman)):
        ax.scatter(x, cos, s=9, alpha=alpha, color="tab:blue", linewidths=0)
        if discrete:
            ax.set_xticks(levels)
            for level in levels:
                ax.plot([level - 0.28 * step, level + 0.28 * step],
                        [np.median(cos[gold == level])] * 2, color="tab:red", lw=2)
        ax.set_title(f"{name}: Spearman {rho:.2f}", fontsize=13)
        ax.set_xlabel("gold score", fontsize=12)
        ax.set_ylabel("cosine similarity", fontsize=12)
        ax.set_ylim(low - margin, 1.0 + margin)
        ax.grid(alpha=0.3)
    figure.suptitle(cell_title(model, pooling, task, split, len(gold), source), fontsize=14)
    return figure


def cell_title(model, pooling, task, split, pairs, source=""):
    """A figure's title: the cell, the data set (the name of `source`, the
    file read, where known) and n, the number of `pairs` plotted."""
    data_set = f"{task} {split}" + (f" ({pathlib.Path(source).name})" if source else "")
    return f"{model} / {pooling} / {data_set}, n = {pairs} pairs"


def plot_diagnostics(path, diagnostics, model, pooling, task, pairs, method="SimCSE",
                     split="test"):
    """Write a PNG of a cell's anisotropy diagnostics, raw beside trained.

    `diagnostics` is a cell's `{"raw": report, "trained": report or None}`
    (`kcse.evaluation.anisotropy_report`) of `pairs`, the
    `kcse.data.SentencePairs` of `task`'s `split` (the title names them and
    their number). Left: Spearman ×100 of average
    pooling as the top-k most frequent tokens are removed (ConSERT's
    Table 1); middle: the mean L2 norm of the token embeddings and right:
    the mean distance to their k nearest neighbours, by frequency-rank bin
    (BERT-flow's Table 2, ConSERT's Figure 4). Needs matplotlib; returns
    `path`.

    Example:
    ```python
    plot_diagnostics("e5_p3_stsb_diagnostics.png", cell["diagnostics"],
                     "e5-small", "P3", "STS-B", data["test"])
    ```
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as error:
        raise ImportError("plot_diagnostics needs matplotlib: `pip install "
                          "kcse[plot]` (i.e. `pip install matplotlib`).") from error
    figure = Figure(figsize=(14, 4.2), layout="constrained")
    FigureCanvasAgg(figure)
    curve, norms, distances = figure.subplots(1, 3)
    for name, report in (("raw", diagnostics["raw"]), (method, diagnostics.get("trained"))):
        if report is None:
            continue
        points = [(p["k"], p["spearman"]) for p in report["top_k_removal"]
                  if p["spearman"] is not None]
        curve.plot(*zip(*points), marker="o", label=name)
        bins = [b for b in report["token_embeddings"]["bins"] if b["tokens"]]
        labels = [f"{b['ranks'][0]}-{b['ranks'][1]}" for b in bins]
        norms.plot(labels, [b["mean_norm"] for b in bins], marker="o", label=name)
        distances.plot(labels, [b["mean_knn_distance"] for b in bins], marker="o",
                       label=name)
    k = diagnostics["raw"]["token_embeddings"]["k"]
    for axes, title, ylabel in (
        (curve, "top-k frequent tokens removed", "Spearman ×100"),
        (norms, "token-embedding norm", "mean L2 norm"),
        (distances, f"distance to {k} nearest neighbours", "mean L2 distance"),
    ):
        axes.set_title(title, fontsize=12)
        axes.set_ylabel(ylabel)
        axes.grid(alpha=0.3)
        axes.legend()
    curve.set_xlabel("k")
    norms.set_xlabel("frequency rank")
    distances.set_xlabel("frequency rank")
    figure.suptitle(cell_title(model, pooling, task, split, len(pairs), pairs.source),
                    fontsize=14)
    figure.savefig(path, dpi=110)
    figure.clear()
    return path
