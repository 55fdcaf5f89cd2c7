"""The stored copy of Su Jianlin's Chinese SimCSE table matches the seed."""

import pathlib
import re

import pytest

from kcse.data.chinese import CHINESE_TASKS as TASKS
from kcse.experiments.cell_record import C_BEATS_B
from kcse.experiments.cell_record import C_DOES_NOT_BEAT_B
from kcse.experiments.cell_record import published_text
from kcse.experiments.published import SU_SIMCSE_TABLE
from kcse.experiments.published import published_cell
from kcse.layers.pooling_rules import SU_POOLINGS as POOLINGS
from kcse.models.model_sources import SU_MODELS

SEED = (
    pathlib.Path(__file__).resolve().parents[3]
    / "shared"
    / "seeds"
    / "002_906612e03e7990b4.txt"
)

# One LaTeX row: \text{SimBERT}_{\text{small}}\text{-P3} & cell & ... \\
ROW = re.compile(
    r"^\\text\{(?P<model>[A-Za-z]+)\}"
    r"(?:_\{\\text\{(?P<size>[a-z]+)\}\})?"
    r"\\text\{-(?P<pooling>P[1-4])\}"
    r"(?P<cells>(?:\s*&[^&\\]*(?:\\color\{\w+\}\{[\d.]+\}|\\text\{-\})\s*){5})"
    r"\\\\\s*$"
)
CELL = re.compile(
    r"^(?P<a>\d+\.\d+)\s*/\s*(?P<b>\d+\.\d+)\s*/\s*"
    r"\\color\{(?P<color>green|red)\}\{(?P<c>\d+\.\d+)\}$"
)
HEADER = re.compile(r"^&\s*((?:\\text\{[A-Z-]+\}\s*&?\s*)+)\\\\\s*$")


def parse_seed_table(text):
    """Return ({(model, pooling, task): (a, b, c) or None}, {key: colour})."""
    start = text.index(r"\begin{array}")
    end = text.index(r"\end{array}", start)
    table, colors, tasks = {}, {}, None
    for line in text[start:end].splitlines()[1:]:
        line = line.strip()
        if not line or line == r"\hline":
            continue
        header = HEADER.match(line)
        if header:
            tasks = re.findall(r"\\text\{([A-Z-]+)\}", header.group(1))
            continue
        row = ROW.match(line)
        assert row, f"unparsed table row: {line!r}"
        model = row["model"] + (f"-{row['size']}" if row["size"] else "")
        cells = [c.strip() for c in row["cells"].split("&")[1:]]
        assert tasks is not None and len(cells) == len(tasks)
        for task, cell in zip(tasks, cells):
            key = (model, row["pooling"], task)
            assert key not in table, f"duplicate cell {key}"
            if cell == r"\text{-}":
                table[key] = None
                continue
            match = CELL.match(cell)
            assert match, f"unparsed cell {key}: {cell!r}"
            table[key] = tuple(float(match[k]) for k in "abc")
            colors[key] = match["color"]
    return table, colors


@pytest.fixture(scope="module")
def seed_table():
    if not SEED.is_file():
        pytest.skip(f"seed not found at {SEED}")
    return parse_seed_table(SEED.read_text(encoding="utf-8"))


def test_stored_table_equals_seed(seed_table):
    table, _ = seed_table
    assert len(table) == 160
    assert sum(v is None for v in table.values()) == 10
    assert table == SU_SIMCSE_TABLE


def test_missing_cells_are_wobert_and_roformer_p2(seed_table):
    table, _ = seed_table
    missing = {k for k, v in table.items() if v is None}
    assert missing == {
        (m, "P2", t) for m in ("WoBERT", "RoFormer") for t in TASKS
    }


def test_green_exactly_when_simcse_beats_whitening(seed_table):
    # The article: "If c > b, then c is shown in green, otherwise in red."
    table, colors = seed_table
    assert len(colors) == 150
    wrong = {
        key: (table[key], color)
        for key, color in colors.items()
        if (color == "green") != (table[key][2] > table[key][1])
    }
    assert not wrong, f"colour disagrees with c > b in the seed: {wrong}"


def test_tables_mark_su_cells_as_he_colours_them(seed_table):
    # su_table.md and results.md print his c with ▲ where his table has it
    # green and ▼ where red, for all 150 cells.
    table, colors = seed_table
    marks = {key: published_text(table[key]).rsplit(" ", 1)[1] for key in colors}
    assert marks == {key: C_BEATS_B if color == "green" else C_DOES_NOT_BEAT_B
                     for key, color in colors.items()}
    assert set(marks.values()) == {C_BEATS_B, C_DOES_NOT_BEAT_B}


def test_table_shape_and_keys():
    assert SU_MODELS == (
        "BERT",
        "RoBERTa",
        "NEZHA",
        "WoBERT",
        "RoFormer",
        "SimBERT",
        "SimBERT-small",
        "SimBERT-tiny",
    )
    assert POOLINGS == ("P1", "P2", "P3", "P4")
    assert TASKS == ("ATEC", "BQ", "LCQMC", "PAWSX", "STS-B")
    assert set(SU_SIMCSE_TABLE) == {
        (m, p, t) for m in SU_MODELS for p in POOLINGS for t in TASKS
    }
    for value in SU_SIMCSE_TABLE.values():
        if value is not None:
            assert len(value) == 3
            assert all(0.0 < x < 100.0 for x in value)


def test_published_cell():
    assert published_cell("BERT", "P1", "ATEC") == (16.59, 20.61, 33.14)
    assert published_cell("SimBERT-tiny", "P4", "STS-B") == (62.92, 66.77, 60.80)
    assert published_cell("RoFormer", "P2", "LCQMC") is None
    assert published_cell("multilingual-e5-small", "P1", "ATEC") is None
    assert published_cell("SimBERT_small", "P1", "ATEC") is None
    assert published_cell("BERT", "P5", "ATEC") is None
    assert published_cell("BERT", "P1", "SICK-R") is None
