"""plot_cell writes the two-panel raw | SimCSE "collapse" figure."""

import builtins

import numpy as np
import pytest

from kcse.experiments import plots


def synthetic_cell(n=300, seed=0):
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 6, n).astype(float)
    raw = np.clip(0.92 + 0.01 * gold / 5 + 0.03 * rng.standard_normal(n), 0.85, 1.0)
    simcse = np.clip(0.2 + 0.14 * gold + 0.1 * rng.standard_normal(n), 0.2, 0.95)
    return gold, raw, simcse


def test_plot_cell_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib.image

    gold, raw, simcse = synthetic_cell()
    path = tmp_path / "cell.png"
    returned = plots.plot_cell(
        path, gold, raw, simcse, "BERT", "P1", "STS-B", 34.65, 69.04
    )
    assert returned == path
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(path)
    height, width = image.shape[:2]
    assert 300 <= height <= 2000 and 600 <= width <= 3000
    assert width > height  # two panels side by side
    assert image.std() > 0.05  # something was drawn


def test_figure_panels_labels_and_titles():
    pytest.importorskip("matplotlib")
    gold, raw, simcse = synthetic_cell()
    figure = plots._build_figure(
        gold, raw, simcse, "RoBERTa", "P4", "LCQMC", 68.4312, 72.7, split="dev"
    )
    axes = figure.get_axes()
    assert len(axes) == 2
    left, right = sorted(axes, key=lambda ax: ax.get_position().x0)
    assert left.get_title() == "raw: Spearman 68.43"
    assert right.get_title() == "SimCSE: Spearman 72.70"
    for ax in (left, right):
        assert ax.get_xlabel() == "gold score"
        assert ax.get_ylabel() == "cosine similarity"
    assert figure.get_suptitle() == "RoBERTa / P4 / LCQMC / dev"
    # Shared y axis: the raw cosines' bunching near 1 is visible against SimCSE.
    assert left.get_ylim() == right.get_ylim()
    low, high = left.get_ylim()
    assert low < simcse.min() and high >= 1.0
    # Scatter x = gold (jittered within a label step), y = the cosines as given.
    offsets = left.collections[0].get_offsets()
    np.testing.assert_allclose(offsets[:, 1], raw)
    assert np.all(np.abs(offsets[:, 0] - gold) < 0.5)
    np.testing.assert_allclose(right.collections[0].get_offsets()[:, 1], simcse)


def test_continuous_gold_is_not_jittered():
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(1)
    gold = rng.uniform(0, 5, 200)
    figure = plots._build_figure(
        gold, np.full(200, 0.95), gold / 5, "BERT", "P3", "STS-B", 10.0, 100.0
    )
    offsets = figure.get_axes()[0].collections[0].get_offsets()
    np.testing.assert_allclose(offsets[:, 0], gold)


def test_missing_matplotlib_names_the_extra(monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    gold, raw, simcse = synthetic_cell(n=10)
    with pytest.raises(ImportError, match=r"pip install kcse\[plot\]"):
        plots.plot_cell("unused.png", gold, raw, simcse, "BERT", "P1", "BQ", 1, 2)
