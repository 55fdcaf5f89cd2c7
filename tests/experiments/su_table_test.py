"""su_table.md: the cells of a grid in the layout of Su's published table,
one table per split and bojone/SimCSE eval.py's avg and w-avg, on made-up
cells (`results_cells.made_up`)."""

import numpy as np

from kcse.experiments.cell_record import FAILED
from kcse.experiments.results.store import ResultStore
from kcse.experiments.results.tables import su_markdown
from results_cells import SPLIT_PAIRS
from results_cells import made_up

def table(text, section, split):
    """`{row: [entries]}` of the table of `split` in `section` (its heading's
    start), and its header."""
    text = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    lines = text.split(f"### {split}\n\n", 1)[1].split("\n\n", 1)[0].splitlines()
    rows = [[value.strip() for value in line.strip("|").split(" | ")] for line in lines]
    return rows[0], {row[0]: row[1:] for row in rows[2:]}, [row[0] for row in rows[2:]]


def test_su_layout_splits_averages_published_and_c_plus_w():
    cells = (made_up(1, "P1", "STS-B", 60.0) | made_up(2, "P1", "ATEC", 20.0)
             | made_up(3, "P4", "STS-B", 62.0, trained=("train", "valid", "test"))
             | made_up(4, "P4", "ATEC", 22.0, status=FAILED,
                       error="seed 0: loss nan", trained=None)
             | made_up(5, "P3", "ATEC", 30.0, whitening=None, trained=None,
                       untrained="no training data", published=None))
    text = su_markdown(cells)
    section = "simcse, protocol su, settings S1"
    header, rows, order = table(text, section, "test")
    # Su's task order and row order (model-pooling), his published cell under ours.
    assert header == ["a / b / c (test)", "ATEC", "STS-B"]
    assert order == ["BERT-P1", "Su", "BERT-P3", "BERT-P4", "Su"]
    assert rows["BERT-P1"] == ["22.50 / 24.50 / 26.50", "62.50 / 64.50 / 66.50"]
    assert rows["Su"] == ["16.59 / 20.61 / 33.14", "16.59 / 20.61 / 33.14"]
    assert rows["BERT-P3"] == ["32.50 / n/a / -", ""]  # No b, no c; no STS-B cell.
    assert rows["BERT-P4"] == ["24.50 / 26.50 / failed", "64.50 / 66.50 / 68.50"]
    # c is shown on the splits it was scored on only.
    _, rows, _ = table(text, section, "train")
    assert rows["BERT-P1"] == ["20.00 / 22.00 / -", "60.00 / 62.00 / -"]
    assert rows["BERT-P4"][1] == "62.00 / 64.00 / 66.00"
    # avg and w-avg as bojone/SimCSE's eval.py: np.average of the three
    # splits' correlations, unweighted and weighted by their pairs.
    for name, weights in (("avg", None), ("w-avg", list(SPLIT_PAIRS.values()))):
        _, rows, _ = table(text, section, name)

        def average(base):
            return f"{np.average([base, base + 1.25, base + 2.5], weights=weights):.2f}"

        assert rows["BERT-P1"][1] == f"{average(60)} / {average(62)} / -"
        assert rows["BERT-P4"][1] == f"{average(62)} / {average(64)} / {average(66)}"
        assert rows["Su"][1] == "16.59 / 20.61 / 33.14"

    # c+w, when a cell has it, is a fourth entry; another method's cells,
    # or other settings, get a section of their own.
    with_whitening = made_up(6, "P1", "STS-B", 50.0, method="consert", trained_whitening={
        "test": {"spearman": 57.0, "pearson": 50.0, "n": 300}}, published=None)
    text = su_markdown(cells | with_whitening)
    header, rows, _ = table(text, "consert, protocol su", "test")
    assert header == ["a / b / c / c+w (test)", "STS-B"]
    assert rows["BERT-P1"] == ["52.50 / 54.50 / 56.50 / 57.00"]
    assert table(text, section, "test")[0][0] == "a / b / c (test)"


def test_su_table_is_written_beside_results_md(tmp_path):
    store = ResultStore(tmp_path)
    ((key, cell),) = made_up(1, "P1", "STS-B", 60.0).items()
    store.add(key, cell)
    text = (tmp_path / "su_table.md").read_text(encoding="utf-8")
    assert text == su_markdown(store.cells)
    assert "| BERT-P1 | 62.50 / 64.50 / 66.50 |" in text
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        ".results.json.lock", "report.html", "results.json", "results.md",
        "su_table.md"]  # No temporaries.
