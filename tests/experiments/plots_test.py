"""plot_cell writes the two-panel raw | SimCSE "collapse" figure, and
plot_diagnostics the anisotropy diagnostics; each title gives the data set and n."""

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
        gold, raw, simcse, "RoBERTa", "P4", "LCQMC", 68.4312, 72.7, split="dev",
        source="/data/senteval_cn/LCQMC/LCQMC.valid.data",
    )
    axes = figure.get_axes()
    assert len(axes) == 2
    left, right = sorted(axes, key=lambda ax: ax.get_position().x0)
    assert left.get_title() == "raw: Spearman 68.43"
    assert right.get_title() == "SimCSE: Spearman 72.70"
    for ax in (left, right):
        assert ax.get_xlabel() == "gold score"
        assert ax.get_ylabel() == "cosine similarity"
    # The data set (the file's name, not its folders) and n, the pairs plotted.
    assert figure.get_suptitle() == ("RoBERTa / P4 / LCQMC dev (LCQMC.valid.data), "
                                     "n = 300 pairs")
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


def test_diagnostics_title_names_the_data_set_and_its_pairs(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    import kcse

    titles = []
    save = Figure.savefig

    def saving(figure, *args, **kwargs):
        titles.append(figure.get_suptitle())
        return save(figure, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", saving)
    report = {"top_k_removal": [{"k": 0, "spearman": 60.0}, {"k": 10, "spearman": 65.0}],
              "token_embeddings": {"k": 5, "bins": [
                  {"tokens": 3, "ranks": [0, 100], "mean_norm": 1.2, "mean_knn_distance": 0.4},
                  {"tokens": 2, "ranks": [100, 1000], "mean_norm": 0.9,
                   "mean_knn_distance": 0.7}]}}
    gold, _, _ = synthetic_cell(n=42)
    pairs = kcse.data.SentencePairs(["a"] * 42, ["b"] * 42, gold,
                                    source="/data/stsb_multi_mt/stsb-de-test.csv")
    path = plots.plot_diagnostics(tmp_path / "d.png", {"raw": report, "trained": report},
                                  "e5-small", "P3", "STS-B-de", pairs, "ConSERT")
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert titles == ["e5-small / P3 / STS-B-de test (stsb-de-test.csv), n = 42 pairs"]
