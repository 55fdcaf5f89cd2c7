import json
import math

import pytest

from kcse.foundation import arguments
from kcse.experiments import cell_scoring
from kcse.experiments.sweeps import SWEEPS
from kcse.experiments.sweeps import heatmap_matrix
from kcse.experiments.sweeps import sweep_runs
from kcse.experiments.sweeps import sweep_values
from tiny_grid import recipe
from tiny_grid import tiny_task_and_model

consert_ablations = recipe("consert_ablations")


@pytest.fixture(scope="module")
def views_sweep(tmp_path_factory, shared_data):
    """A views sweep of two views (three pairs) on the tiny grid, run once."""
    tmp_path = tmp_path_factory.mktemp("views_sweep")
    model = tiny_task_and_model(tmp_path, shared_data)
    argv = ["--sweep", "views", "--values", "none,feature_cutoff:0.2",
            "--models", model, "--tasks", "STS-B", "--poolings", "P1",
            "--data-dir", str(tmp_path / "data"), "--output", str(tmp_path / "out"),
            "--sentences", "64", "--batch-size", "16", "--learning-rate", "1e-3"]
    raw_encodings = []
    encode_splits = cell_scoring.encode_splits
    with pytest.MonkeyPatch.context() as patch:
        def counting(model, preprocessor, data, prefix, batch_size, *splits):
            if not splits:  # The raw vectors: every split.
                raw_encodings.append(model)
            return encode_splits(model, preprocessor, data, prefix, batch_size, *splits)

        patch.setattr(cell_scoring, "encode_splits", counting)
        consert_ablations.main(argv)
    return tmp_path, argv, raw_encodings


def table_rows(text):
    return [[value.strip() for value in line.strip("|").split("|")]
            for line in text.splitlines() if line.startswith("| ")]


def test_views_sweep_writes_each_pairs_trained_cell(views_sweep):
    tmp_path, _, raw_encodings = views_sweep
    assert len(raw_encodings) == 1  # The three values share the raw vectors.
    cells = json.loads((tmp_path / "out" / "results.json").read_text())["cells"].values()
    # The grid's own cells, one per unordered pair, told apart by their settings.
    by_pair = {tuple(cell["settings"]["views"]["unsup"]): cell for cell in cells}
    assert sorted(by_pair) == [("feature_cutoff:0.2", "feature_cutoff:0.2"),
                               ("none", "feature_cutoff:0.2"), ("none", "none")]
    rows = table_rows((tmp_path / "out" / "ablation_views.md").read_text())
    assert rows[0] == ["views", "STS-B", "avg"]
    assert [row[0] for row in rows[1:3]] == ["a raw", "b whitening"]
    some_cell = next(iter(by_pair.values()))
    assert float(rows[1][1]) == pytest.approx(some_cell["raw"]["test"]["spearman"], abs=0.005)
    for label, score, average in rows[3:]:
        cell = by_pair[tuple(label.split(" + "))]
        assert float(score) == pytest.approx(cell["trained"]["test"]["spearman"], abs=0.005)
        assert average == score  # One task: its average is itself.
    assert len(rows) == 3 + 3
    assert (tmp_path / "out" / "ablation_views_tiny_bert_P1_STS-B.png").stat().st_size > 0


def test_a_rerun_of_the_sweep_trains_nothing(views_sweep, capsys):
    _, argv, _ = views_sweep
    consert_ablations.main(argv)
    printed = capsys.readouterr().out
    assert printed.count("already in") == 3 and "[1/" not in printed


def test_heatmap_fills_both_places_of_a_pair():
    def cell(task, value):
        return {"task": task, "status": "done", "reported_split": "test",
                "trained": {"test": {"spearman": value}}}

    matrix = heatmap_matrix(
        ["none", "shuffle"],
        {("none", "none"): [cell("STS-B", 1.0)], ("none", "shuffle"):
         [cell("STS-B", 2.0), cell("BQ", 9.0)]},
        "STS-B")
    assert matrix[0, 0] == 1.0 and matrix[0, 1] == matrix[1, 0] == 2.0
    assert math.isnan(matrix[1, 1])


def test_values_parse_as_the_swept_flag():
    assert sweep_values(SWEEPS["consert"]["views"], "none,shuffle") == [
        ["none", "none"], ["none", "shuffle"], ["shuffle", "shuffle"]]
    assert len(sweep_values(SWEEPS["consert"]["views"])) == 15  # Figure 5: 5 views, 15 pairs.
    assert sweep_values(SWEEPS["consert"]["batch-size"]) == [16, 48, 96, 192, 288]
    with pytest.raises(Exception, match=">= 2"):
        sweep_values(SWEEPS["consert"]["batch-size"], "1,16")


@pytest.mark.parametrize("argv, message", [
    (["--sweep", "temperature", "--temperature", "0.2"],
     "--sweep temperature sets --temperature per value"),
    (["--sweep", "views", "--values", "none,none"], "a view is named twice"),
    (["--sweep", "views", "--values", "none,bogus"], "unknown view 'bogus'"),
    (["--sweep", "sentences", "--tasks", "PAWSX"], "leave PAWSX out of --tasks"),
    (["--sweep", "nli-max-square"], "give --mode sup, joint"),
    (["--sweep", "nli-max-square", "--mode", "joint", "--values", "yes,maybe"],
     "yes or no; got maybe"),
    (["--sweep", "mode=unsup,bogus"], "--sweep mode: bogus not among unsup, sup"),
    (["--sweep", "learning-rate"], "--sweep learning-rate is no preset of --method consert"),
    (["--sweep", "output=a,b"], "--sweep output: no flag --output to sweep"),
    (["--sweep", "temperature=0.1", "--values", "0.2"], "give the values once"),
])
def test_bad_sweeps_stop_with_one_line(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        consert_ablations.main(argv + ["--output", str(tmp_path / "out")])
    assert stop.value.code == 2
    error = capsys.readouterr().err.strip()
    assert message in error and "\n" not in error
    assert not (tmp_path / "out").exists()


def test_runs_set_the_swept_flag_only():
    class Args:
        temperature = None
        tasks = ["STS-B"]

    runs = sweep_runs(Args(), SWEEPS["consert"]["temperature"], [0.05, 0.1], {})
    assert [run.temperature for run in runs] == [0.05, 0.1]
    assert all(run.tasks == ["STS-B"] for run in runs)
    given = Args()
    given.temperature = 0.3
    with pytest.raises(arguments.UsageError):
        sweep_runs(given, SWEEPS["consert"]["temperature"], [0.05], {})


def sweep_cells(tmp_path, shared_data, method, sweep, extra=()):
    """`recipes/sweep.py --method method --sweep sweep` on the tiny grid:
    the cells by their label in the table, and the table's rows."""
    model = tiny_task_and_model(tmp_path, shared_data)
    out = tmp_path / "out"
    recipe("sweep").main(["--method", method, "--sweep", sweep, "--models", model,
                          "--tasks", "STS-B", "--poolings", "P1", "--data-dir",
                          str(tmp_path / "data"), "--output", str(out), "--sentences", "32",
                          "--batch-size", "16", *extra])
    cells = list(json.loads((out / "results.json").read_text())["cells"].values())
    return cells, table_rows((out / f"ablation_{sweep.split('=')[0]}.md").read_text())


def test_simcse_dropout_sweep_runs_fixed_dropout_as_one_mask(tmp_path, shared_data):
    """"fixed 0.1" is --dropout 0.1 with --same-dropout-mask; 0.1 is without."""
    cells, rows = sweep_cells(tmp_path, shared_data, "simcse", "dropout=0.1,fixed:0.1")
    by_mask = {cell["settings"].get("same_dropout_mask", False): cell for cell in cells}
    assert sorted(by_mask) == [False, True]
    assert {cell["settings"]["hidden_dropout"] for cell in cells} == {0.1}
    assert [row[0] for row in rows] == ["dropout", "a raw", "b whitening", "0.1", "fixed 0.1"]
    for label, mask in (("0.1", False), ("fixed 0.1", True)):
        score = next(row[1] for row in rows if row[0] == label)
        trained = by_mask[mask]["trained"]["test"]["spearman"]
        assert float(score) == pytest.approx(trained, abs=0.005)


def test_any_flag_of_a_method_sweeps_as_the_flag_reads_it(tmp_path, shared_data):
    """SG-OPT without and with the projection head (a switch: yes / no),
    and a setting that is no preset, its values given."""
    cells, rows = sweep_cells(tmp_path, shared_data, "sg_opt", "projection-head",
                              ["--projection-dim", "8"])
    assert sorted(cell["settings"].get("projection_head", True) for cell in cells) == [
        False, True]
    assert [row[0] for row in rows[3:]] == ["yes", "no"]
    cells, rows = sweep_cells(tmp_path / "rate", shared_data, "simcse",
                              "learning-rate=0.001,0.01")
    assert sorted(cell["settings"]["learning_rate"] for cell in cells) == [0.001, 0.01]
    assert [row[0] for row in rows[3:]] == ["0.001", "0.01"]
