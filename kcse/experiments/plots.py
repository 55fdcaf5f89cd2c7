"""The "collapse" figure: gold score vs cosine, raw encoder beside trained."""

import numpy as np


def plot_cell(path, gold, raw_cosine, simcse_cosine, model, pooling, task,
              raw_spearman, simcse_spearman, split="test", method="SimCSE"):
    """Write a PNG of one cell: gold score (x) vs cosine (y), raw | SimCSE.

    The right panel is titled `method`, the training method of column c.

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
              "STS-B", raw_spearman=34.65, simcse_spearman=69.04)
    ```
    """
    figure = _build_figure(gold, raw_cosine, simcse_cosine, model, pooling,
                           task, raw_spearman, simcse_spearman, split, method)
    figure.savefig(path, dpi=120)
    figure.clear()  # no pyplot: nothing else holds the figure
    return path


def _build_figure(gold, raw_cosine, simcse_cosine, model, pooling, task,
                  raw_spearman, simcse_spearman, split="test", method="SimCSE"):
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
    figure.suptitle(f"{model} / {pooling} / {task} / {split}", fontsize=14)
    return figure
