import base64
import contextlib
import io
import json

import numpy as np
import pytest
import scipy.stats

import kcse
from kcse.experiments import cell_scoring
from kcse.experiments import grid
from kcse.experiments.results.identity import NUMERICS
from kcse.experiments.columns import named_columns
from kcse.experiments.columns import postprocessing_list
from kcse.experiments.protocols import PROTOCOLS
from kcse.experiments.protocols import SPLITS
from kcse.experiments.protocols import with_overrides
from kcse.experiments.results.store import ResultStore
from authors_references import bojone_whitened_cosines
from authors_references import torch_cosine_similarity
from tiny_grid import SPLIT_PAIRS
from tiny_grid import cell_of
from tiny_grid import plant_sentinels
from tiny_grid import recipe
from tiny_grid import stsb_sample
from tiny_grid import tiny_checkpoint
from tiny_grid import tiny_setup  # noqa: F401 (a fixture)
from tiny_grid import tiny_task_and_model
from tiny_grid import write_task

chinese_simcse = recipe("chinese_simcse")


def run_recipe(tmp_path, model, *extra):
    return chinese_simcse.main(
        [
            "--models", model, "--tasks", "STS-B", "--poolings", "P1,P4",
            "--data-dir", str(tmp_path / "data"), "--output",
            str(tmp_path / "out"), "--sentences", "300", "--batch-size", "16",
            *extra,
        ]
    )


@pytest.fixture(scope="module")
def default_grid(tmp_path_factory, shared_data):
    """`tiny_setup` after one `run_recipe` with `--plot` only (a PNG per
    cell, drawn from vectors already scored: no number changes, and not
    part of a cell's identity), and what that run printed: the same run of
    the same grid, shared by the tests that read it (each used to repeat
    it, ~30 s)."""
    tmp_path = tmp_path_factory.mktemp("default_grid")
    model = tiny_task_and_model(tmp_path, shared_data)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        run_recipe(tmp_path, model, "--plot")
    return tmp_path, model, printed.getvalue()


def test_smoke_results_schema_and_resume(default_grid, capsys):
    tmp_path, model, first = default_grid
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["schema"] == "kcse.comparison/3"
    assert sorted(key.rsplit("|", 1)[0] for key in results["cells"]) == [
        "tiny_bert|P1|STS-B|su|simcse", "tiny_bert|P4|STS-B|su|simcse"
    ]
    for cell in results["cells"].values():
        assert cell["status"] == "done" and cell["error"] is None
        assert cell["reported_split"] == "test"
        assert cell["training_samples"] == 300
        assert cell["method"] == "simcse"
        assert cell["whitening_sentences"] == 300
        assert cell["whitening_null_directions"] == {"P1": 1, "P4": 0}[cell["pooling"]]
        assert cell["numerics"] == NUMERICS
        assert cell["published"] is None
        assert cell["model_source"]["source"] == model.rsplit(":", 1)[0]
        assert cell["settings"]["max_sentences"] == 300 and cell["settings"]["seeds"] == 1
        # c+w only when asked for: not in the cell, nor in its identity.
        assert "trained_whitening" not in cell and "trained_whitening" not in cell["settings"]
        for column in ("raw", "whitening", "trained"):
            splits = {"test"} if column == "trained" else {"train", "valid", "test"}
            assert set(cell[column]) == splits
            assert cell[column]["test"]["n"] == 37
            assert np.isfinite(cell[column]["test"]["spearman"])
    markdown = (tmp_path / "out" / "results.md").read_text()
    assert "| tiny_bert | P1 | STS-B | simcse | S1 |" in markdown
    assert "| tiny_bert | P4 | STS-B | simcse | S1 |" in markdown
    # Provenance: numerics revision, whitening vectors and null directions.
    assert "| numerics | whitening vectors | whitening null dirs |" in markdown
    assert f"| {NUMERICS} | 300 | 1 |" in markdown and f"| {NUMERICS} | 300 | 0 |" in markdown
    assert "[2/2] tiny_bert|P4|STS-B|su|simcse|" in first and "ETA" in first
    assert f"model tiny_bert: original bert checkpoint {model.rsplit(':', 1)[0]}" in first
    assert "c trained" in first and "Su Jianlin's published" not in first
    su_table = (tmp_path / "out" / "su_table.md").read_text()
    for pooling in ("P1", "P4"):
        cell = cell_of(results["cells"], f"tiny_bert|{pooling}|STS-B|su|simcse")
        b, c = cell["whitening"]["test"]["spearman"], cell["trained"]["test"]["spearman"]
        mark = "▲" if c > b else "▼"  # Su's colour of c beside b.
        assert (f"| tiny_bert-{pooling} | {cell['raw']['test']['spearman']:.2f} / "
                f"{b:.2f} / {c:.2f} {mark} |") in su_table
    assert "su_table.md" in first

    run_recipe(tmp_path, model)  # Without --plot: the same cells.
    second = capsys.readouterr().out
    assert "2 cell(s) with these settings already in" in second and "[1/" not in second
    assert json.loads((tmp_path / "out" / "results.json").read_text()) == results


def test_plot_writes_a_png_per_cell(default_grid):
    matplotlib_image = pytest.importorskip("matplotlib.image")
    tmp_path = default_grid[0]
    report = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    for pooling in ("P1", "P4"):
        plots = list((tmp_path / "out" / "plots").glob(f"tiny_bert_{pooling}_STS-B_simcse_*.png"))
        assert len(plots) == 1
        image = matplotlib_image.imread(plots[0])
        assert image.shape[0] > 300 and image.shape[1] > 600
        # report.html, written after the cell's plot, embeds it.
        encoded = base64.b64encode(plots[0].read_bytes()).decode("ascii")
        assert f"data:image/png;base64,{encoded}" in report
    assert not list((tmp_path / "out" / "plots").glob(".*"))  # No temporaries.


def test_raw_and_whitening_columns_equal_independent_computations(default_grid):
    tmp_path, model, _ = default_grid
    cells = json.loads((tmp_path / "out" / "results.json").read_text())["cells"]
    backbone, preprocessor = kcse.models.from_checkpoint(
        model.rsplit(":", 1)[0], "bert", 64
    )
    data = {
        split: kcse.data.read_pairs(tmp_path / "data" / "STS-B" / f"STS-B.{split}.data")
        for split in SPLIT_PAIRS
    }
    # P1 (cls) vectors are LayerNorm outputs: on a hyperplane, one null
    # direction; P4 averages two LayerNorms of other scales: none.
    for pooling, null_directions in (("P1", 1), ("P4", 0)):
        cell = cell_of(cells, f"tiny_bert|{pooling}|STS-B|su|simcse")
        encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling=pooling)
        raw = kcse.evaluation.evaluate_sts(encoder, data["test"])["spearman"]
        assert abs(cell["raw"]["test"]["spearman"] - raw) <= 0.01

        # bojone/BERT-whitening's compute_kernel_bias on the vectors of all
        # splits, both sides, with the null directions (standard deviation
        # <= dim * eps(float32) of the largest) given a zero column.
        vectors = {split: encoder.encode(pairs.sentences1 + pairs.sentences2)
                   for split, pairs in data.items()}
        cosine, null = bojone_whitened_cosines(
            np.concatenate(list(vectors.values())), vectors["test"][:37],
            vectors["test"][37:])
        assert null == null_directions == cell["whitening_null_directions"]
        whitened = 100 * scipy.stats.spearmanr(data["test"].scores, cosine)[0]
        assert abs(cell["whitening"]["test"]["spearman"] - whitened) <= 0.01


def test_clean_protocol_never_trains_or_whitens_on_valid_or_test(
    tiny_setup, monkeypatch
):
    tmp_path, model = tiny_setup
    task_dir = tmp_path / "data" / "STS-B"
    plant_sentinels(task_dir, "STS-B", [3])
    trained, whitened = [], []
    original_fit = kcse.SimCSE.fit
    original_whitening = cell_scoring.adapted_whitening
    monkeypatch.setattr(
        kcse.SimCSE, "fit",
        lambda self, x, **kw: trained.extend(x) or original_fit(self, x, **kw),
    )
    monkeypatch.setattr(
        cell_scoring, "adapted_whitening",
        lambda data: whitened.append(np.array(data)) or original_whitening(data),
    )
    run_recipe(tmp_path, model, "--protocol", "clean", "--poolings", "P1",
               "--eval-every", "2")
    train = kcse.data.read_pairs(task_dir / "STS-B.train.data")
    assert sorted(trained) == sorted(train.sentences())
    assert not any("哨兵" in sentence for sentence in trained)
    # Whitening saw exactly the vectors of the train split.
    backbone, preprocessor = kcse.models.from_checkpoint(
        model.rsplit(":", 1)[0], "bert", 64
    )
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="P1")
    expected = encoder.encode(train.sentences1 + train.sentences2)
    assert len(whitened) == 1 and whitened[0].shape == expected.shape
    np.testing.assert_allclose(whitened[0], expected, atol=1e-5)
    cell = cell_of(json.loads((tmp_path / "out" / "results.json").read_text())["cells"],
                   "tiny_bert|P1|STS-B|clean|simcse")
    assert cell["trained"]["test"]["n"] == 38  # The sentinel pair is scored.
    # The step valid selection kept: one of the scored steps (0 = before
    # training): 152 train sentences, batches of 16, scored every 2 steps.
    assert cell["runs"][0]["kept_step"] in {0, 2, 4, 6, 8, 10}


@pytest.mark.parametrize("task", kcse.data.CHINESE_TASKS)
def test_every_task_name_runs_on_its_real_layout(tmp_path, shared_data, task):
    sample = stsb_sample(shared_data)
    binary = task != "STS-B"
    write_task(tmp_path / "data", task, sample,
               (lambda label: int(label >= 3)) if binary else (lambda label: int(label)))
    checkpoint = tiny_checkpoint(tmp_path / "tiny_bert", sample)
    chinese_simcse.main([
        "--models", f"{checkpoint}:bert", "--tasks", task, "--poolings", "P3",
        "--data-dir", str(tmp_path / "data"), "--output", str(tmp_path / "out"),
        "--sentences", "64", "--batch-size", "32", "--max-length", "32",
    ])
    cells = json.loads((tmp_path / "out" / "results.json").read_text())["cells"]
    cell = cell_of(cells, f"tiny_bert|P3|{task}|su|simcse")
    assert cell["settings"]["max_length"] == 32
    # PAWSX trains on every sentence, the others on --sentences.
    assert cell["training_samples"] == (300 if task == "PAWSX" else 64)


def test_grid_runs_under_mirrored_strategy(tiny_setup, two_cpu_strategy):
    tmp_path, model = tiny_setup
    protocol = with_overrides(PROTOCOLS["su"], max_sentences=64, batch_size=16)
    store = ResultStore(tmp_path / "mirrored")
    grid.run_grid(grid.Grid(
        [model], ["P1"], ["STS-B"],
        lambda task, split: kcse.data.read_chinese_task(tmp_path / "data", task, split),
        protocol, strategy=two_cpu_strategy,
    ), store)
    cell = cell_of(store.cells, "tiny_bert|P1|STS-B|su|simcse")
    assert np.isfinite(cell["trained"]["test"]["spearman"])


def test_trained_whitening_column_equals_bojone_whitening_of_the_trained_vectors(
    tiny_setup, shared_data, monkeypatch
):
    """c+w (`--postprocess whitening,trained-whitening`): bojone/BERT-whitening's
    compute_kernel_bias (numpy SVD: `authors_references.bojone_whitened_cosines`)
    on the trained encoder's vectors of the su protocol's whitening splits
    (all three, both sides), each split's pairs scored by scipy's Spearman.

    Pairs of one sentence twice are left out of the task: their cosine is 1
    in exact arithmetic, so float rounding alone decides how two
    implementations rank them against each other (0.09 Spearman points on
    this valid split), which says nothing about the whitening."""
    assert postprocessing_list("trained-whitening") == ["whitening", "trained-whitening"]
    tmp_path, model = tiny_setup
    sample = {split: [pair for pair in pairs if pair[0] != pair[1]]
              for split, pairs in stsb_sample(shared_data).items()}
    write_task(tmp_path / "data", "STS-B", sample, lambda label: int(label))
    # A learning rate at which 4 steps move the tiny model: c+w is not b.
    protocol = with_overrides(PROTOCOLS["su"], max_sentences=64, batch_size=16,
                              learning_rate=1e-3, trained_splits=SPLITS)
    trained_vectors = []
    encode_splits = cell_scoring.encode_splits

    def recording(encoder, *args, **kwargs):
        vectors = encode_splits(encoder, *args, **kwargs)
        if not isinstance(encoder, cell_scoring.EveryPooling):  # The trained encoder's.
            trained_vectors.append(vectors)
        return vectors

    monkeypatch.setattr(cell_scoring, "encode_splits", recording)

    def read(task, split):
        return kcse.data.read_chinese_task(tmp_path / "data", task, split)

    store = ResultStore(tmp_path / "out")
    grid.run_grid(grid.Grid([model], ["P1"], ["STS-B"], read, protocol,
                            columns=named_columns("trained-whitening")), store)
    cell = cell_of(store.cells, "tiny_bert|P1|STS-B|su|simcse")
    assert cell["settings"]["trained_whitening"] is True
    (vectors,) = trained_vectors
    fit = np.concatenate([np.concatenate(vectors[split]) for split in SPLITS])
    for split in SPLITS:
        gold = read("STS-B", split).scores
        plain = 100 * scipy.stats.spearmanr(gold, torch_cosine_similarity(*vectors[split]))[0]
        assert abs(cell["trained"][split]["spearman"] - plain) <= 1e-5
        cosine, null = bojone_whitened_cosines(fit, *vectors[split])
        expected = 100 * scipy.stats.spearmanr(gold, cosine)[0]
        assert abs(cell["trained_whitening"][split]["spearman"] - expected) <= 1e-5
        assert abs(expected - plain) > 1e-3  # Whitening changed the number.
    assert cell["runs"][0]["whitening_null_directions"] == null
    # Its statistics are the trained vectors', not the raw ones' (b).
    assert abs(cell["trained_whitening"]["test"]["spearman"]
               - cell["whitening"]["test"]["spearman"]) > 1e-3
    # Both tables show it: results.md a c+w column, su_table.md a / b / c / c+w
    # on each split and on their average (all three scored here).
    assert "| c trained | c std | c+w |" in (tmp_path / "out" / "results.md").read_text()
    table = (tmp_path / "out" / "su_table.md").read_text()
    averages = {column: np.average([cell[column][split]["spearman"] for split in SPLITS])
                for column in ("raw", "whitening", "trained", "trained_whitening")}
    texts = {column: f"{value:.2f}" for column, value in averages.items()}
    texts["trained"] += " ▲" if averages["trained"] > averages["whitening"] else " ▼"
    average = " / ".join(texts.values())
    assert f"### avg\n\n| a / b / c / c+w (avg) | STS-B |\n|---|---|\n| tiny_bert-P1 | {average} |" in table
