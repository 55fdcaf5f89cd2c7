"""su_table.md: the cells of a grid in the layout of Su's published table,
one table per split and bojone/SimCSE eval.py's avg and w-avg, on made-up
cells (`results_cells.made_up`)."""

import numpy as np
import pytest

import kcse

from kcse.experiments.cell_record import FAILED
from kcse.experiments.results.store import ResultStore
from kcse.experiments.results.tables import MARKS_LEGEND
from kcse.experiments.results.tables import P2_WHITENING_LEGEND
from kcse.experiments.results.tables import su_markdown
from results_cells import SPLIT_PAIRS
from results_cells import made_up


@pytest.fixture(scope="module")
def tiny_pooled_vectors():
    """P1 (cls) and P2 (pooler, linear) vectors of a tiny BERT of 64
    sentences, and its pooler Dense's kernel and bias."""
    from conftest import tiny_bert
    from conftest import tiny_preprocessor

    generator = np.random.default_rng(0)
    words = "the cat sat on a mat dog ran slow red blue".split()
    sentences = [" ".join(generator.choice(words, size=5)) for _ in range(64)]
    backbone, preprocessor = tiny_bert(), tiny_preprocessor()
    vectors = tuple(
        kcse.SentenceEncoder(backbone, preprocessor, pooling=pooling).encode(sentences)
        for pooling in ("cls", "pooler"))
    dense = backbone.get_layer("pooled_dense")
    return vectors, (np.array(dense.kernel), np.array(dense.bias))


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
    # c marked as Su colours it: ▲ (green) where it beats b; Su's c too.
    assert rows["BERT-P1"] == ["22.50 / 24.50 / 26.50 ▲", "62.50 / 64.50 / 66.50 ▲"]
    assert rows["Su"] == ["16.59 / 20.61 / 33.14 ▲", "16.59 / 20.61 / 33.14 ▲"]
    assert rows["BERT-P3"] == ["32.50 / n/a / -", ""]  # No b, no c; no STS-B cell.
    assert rows["BERT-P4"] == ["24.50 / 26.50 / failed", "64.50 / 66.50 / 68.50 ▲"]
    # c is shown on the splits it was scored on only.
    _, rows, _ = table(text, section, "train")
    assert rows["BERT-P1"] == ["20.00 / 22.00 / -", "60.00 / 62.00 / -"]
    assert rows["BERT-P4"][1] == "62.00 / 64.00 / 66.00 ▲"
    # avg and w-avg as bojone/SimCSE's eval.py: np.average of the three
    # splits' correlations, unweighted and weighted by their pairs.
    for name, weights in (("avg", None), ("w-avg", list(SPLIT_PAIRS.values()))):
        _, rows, _ = table(text, section, name)

        def average(base):
            return f"{np.average([base, base + 1.25, base + 2.5], weights=weights):.2f}"

        assert rows["BERT-P1"][1] == f"{average(60)} / {average(62)} / -"
        assert rows["BERT-P4"][1] == f"{average(62)} / {average(64)} / {average(66)} ▲"
        assert rows["Su"][1] == "16.59 / 20.61 / 33.14 ▲"

    # c+w, when a cell has it, is a fourth entry; another method's cells,
    # or other settings, get a section of their own.
    with_whitening = made_up(6, "P1", "STS-B", 50.0, method="consert", trained_whitening={
        "test": {"spearman": 57.0, "pearson": 50.0, "n": 300}}, published=None)
    text = su_markdown(cells | with_whitening)
    header, rows, _ = table(text, "consert, protocol su", "test")
    assert header == ["a / b / c / c+w (test)", "STS-B"]
    assert rows["BERT-P1"] == ["52.50 / 54.50 / 56.50 ▲ / 57.00"]
    assert table(text, section, "test")[0][0] == "a / b / c (test)"


def test_su_table_is_written_beside_results_md(tmp_path):
    store = ResultStore(tmp_path)
    ((key, cell),) = made_up(1, "P1", "STS-B", 60.0).items()
    store.add(key, cell)
    text = (tmp_path / "su_table.md").read_text(encoding="utf-8")
    assert text == su_markdown(store.cells)
    assert "| BERT-P1 | 62.50 / 64.50 / 66.50 ▲ |" in text
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        ".results.json.lock", "report.html", "results.json", "results.md",
        "su_table.md"]  # No temporaries.


def test_c_is_marked_where_it_does_not_beat_b_and_p2s_b_is_explained_once(tmp_path):
    # c below b (44.50): ▼, Su's red. The P2 note appears only with a P2 b.
    worse = made_up(1, "P1", "STS-B", 40.0, published=None)
    for cell in worse.values():
        cell["trained"]["test"]["spearman"] = 41.0
    header, rows, _ = table(su_markdown(worse), "simcse", "test")
    assert rows["BERT-P1"] == ["42.50 / 44.50 / 41.00 ▼"]
    store = ResultStore(tmp_path)
    for key, cell in worse.items():
        store.add(key, cell)
    results = (tmp_path / "results.md").read_text(encoding="utf-8")
    assert "| 42.50 | 44.50 | 41.00 ▼ |" in results
    for text in (results, (tmp_path / "su_table.md").read_text(encoding="utf-8")):
        assert text.count(MARKS_LEGEND) == 1 and P2_WHITENING_LEGEND not in text
    for key, cell in made_up(2, "P2", "STS-B", 40.0).items():
        store.add(key, cell)
    for name in ("results.md", "su_table.md"):
        assert (tmp_path / name).read_text(encoding="utf-8").count(P2_WHITENING_LEGEND) == 1


def test_p2s_b_equals_p1s_b_as_the_note_says(tiny_pooled_vectors):
    # The note's claim in two steps, against the formula (for y = Ax + c,
    # (y - μy) Σy^-1 (y' - μy)^T = (x - μx) Σx^-1 (x' - μx)^T): P2's vectors
    # are P1's through the pooler's Dense, linear; whitening x and Ax + c,
    # every dimension kept, gives the same cosines.
    (cls, pooler), (kernel, bias) = tiny_pooled_vectors
    np.testing.assert_allclose(pooler, cls @ kernel + bias, atol=1e-6)
    # The random tiny BERT's [CLS] vectors hardly vary (covariance
    # eigenvalues 1e-6 to 1e-15): whiten well-spread vectors through its Dense.
    spread = np.random.default_rng(1).normal(size=(64, cls.shape[1])).astype("float32")
    cosines = []
    for vectors in (spread, spread @ kernel + bias):
        whitening = kcse.layers.Whitening()
        whitening.adapt(vectors)
        white = np.array(whitening(vectors))
        white /= np.linalg.norm(white, axis=1, keepdims=True)
        cosines.append(np.sum(white[0::2] * white[1::2], axis=1))
    np.testing.assert_allclose(cosines[0], cosines[1], atol=1e-4)
