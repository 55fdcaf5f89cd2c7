"""`kcse evaluate --suite english-sts`: the English table of the SimCSE and
ConSERT papers, on tiny files in its layout and a tiny saved encoder.

Reference: princeton-nlp/SimCSE's evaluation.py through SentEval's
`STSEval.run` (SentEval/senteval/sts.py): STS12-16 report
`spearmanr(all_sys_scores, all_gs_scores)`, one Spearman over the
concatenated pairs of every sub-corpus ("all"), on sentences split at
whitespace and joined by single spaces; STS-B and SICK-R their test sets.
Here recomputed with scipy from the encoder's vectors.
"""

import json

import numpy as np
import pytest
import scipy.stats

from kcse.commands.main import main as kcse_main
from conftest import tiny_encoder_file
from conftest import tiny_vocabulary

YEARS = {"STS12": ("MSRpar", "OnWN"), "STS13": ("FNWN",), "STS14": ("images", "OnWN"),
         "STS15": ("belief",), "STS16": ("headlines", "plagiarism")}
HEADER = "| model | STS12 | STS13 | STS14 | STS15 | STS16 | STS-B | SICK-R | Avg. |"


def random_pairs(rng, count, low=0.0):
    words = tiny_vocabulary()[5:]

    def sentence():
        return " ".join(rng.choice(words, size=rng.integers(2, 7)))

    return [(sentence(), sentence(), round(float(rng.uniform(low, 5.0)), 2))
            for _ in range(count)]


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """A tiny data folder laid out like ../shared/data, a tiny encoder, and
    the pairs of each set as the reference reads them."""
    folder = tmp_path_factory.mktemp("english_sts")
    model, _ = tiny_encoder_file(folder, 1)
    rng = np.random.default_rng(0)
    sets = {}
    for year, corpora in YEARS.items():
        (folder / "data" / "sts_en" / year).mkdir(parents=True)
        sets[year] = []
        for corpus in corpora:
            pairs = random_pairs(rng, 12)
            sets[year] += pairs
            lines = [f"{score}\t{a}\t{b}" for a, b, score in pairs]
            lines.insert(3, "\tno gold score\tleft out")  # SentEval leaves it out too.
            (folder / "data" / "sts_en" / year / f"{corpus}.test.tsv").write_text(
                "\n".join(lines) + "\n", encoding="utf-8")
    # SentEval's batcher joins a sentence's words by single spaces.
    a, b, score = sets["STS12"][0]
    spaced = " " + a.replace(" ", "   ") + "  "
    sets["STS12"][0] = (spaced, b, score)
    first = folder / "data" / "sts_en" / "STS12" / "MSRpar.test.tsv"
    first.write_text(first.read_text().replace(f"\t{a}\t", f"\t{spaced}\t", 1))
    sets["STS-B"] = random_pairs(rng, 20)
    (folder / "data" / "stsb_multi_mt").mkdir()
    (folder / "data" / "stsb_multi_mt" / "stsb-en-test.csv").write_text(
        "".join(f"{a},{b},{score}\n" for a, b, score in sets["STS-B"]), encoding="utf-8")
    sets["SICK-R"] = random_pairs(rng, 20, low=1.0)
    (folder / "data" / "sts_en" / "SICK").mkdir()
    (folder / "data" / "sts_en" / "SICK" / "SICK_test_annotated.txt").write_text(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
        + "".join(f"{i}\t{a}\t{b}\t{score}\tNEUTRAL\n"
                  for i, (a, b, score) in enumerate(sets["SICK-R"])), encoding="utf-8")
    return folder, model, sets


def reference_spearman(encoder, pairs):
    """SentEval's "all": scipy's Spearman of gold vs cosine over every pair."""
    first, second, gold = zip(*pairs)
    vectors1 = encoder.encode([" ".join(s.split()) for s in first]).astype("float64")
    vectors2 = encoder.encode([" ".join(s.split()) for s in second]).astype("float64")
    cosines = (vectors1 * vectors2).sum(1) / (
        np.linalg.norm(vectors1, axis=1) * np.linalg.norm(vectors2, axis=1))
    return 100 * scipy.stats.spearmanr(gold, cosines).correlation


def test_the_table_pools_each_year_and_scores_sts_b_as_evaluate_does(suite, capsys):
    import keras

    folder, model, sets = suite
    data = folder / "data"
    code = kcse_main(["evaluate", "--model", str(model), "--suite", "english-sts",
                     "--data-dir", str(data), "--json", str(folder / "table.json"),
                     "--markdown", str(folder / "table.md")])
    out = capsys.readouterr().out
    assert code == 0
    record = json.loads((folder / "table.json").read_text())
    encoder = keras.saving.load_model(model)
    for name, pairs in sets.items():
        result = record["sets"][name]
        assert result["n"] == len(pairs)
        assert abs(result["spearman"] - reference_spearman(encoder, pairs)) <= 1e-5, name
    assert record["sets"]["STS12"]["files"] == ["MSRpar", "OnWN"]
    spearmans = [record["sets"][name]["spearman"] for name in sets]
    assert record["average"] == pytest.approx(np.mean(spearmans), abs=1e-9)

    table = (folder / "table.md").read_text()
    lines = table.splitlines()
    assert lines[0] == HEADER and lines[1] == "|" + "---|" * 9
    assert lines[2] == (f"| {model} | " + " | ".join(f"{s:.2f}" for s in spearmans)
                        + f" | {record['average']:.2f} |")
    assert lines[3] == "| pairs | 24 | 12 | 24 | 12 | 24 | 20 | 20 |  |"
    assert "STS12 MSRpar, OnWN; STS13 FNWN;" in table
    assert table in out  # Printed as written.

    # The STS-B column is `kcse evaluate` of the same file.
    stsb = data / "stsb_multi_mt" / "stsb-en-test.csv"
    assert kcse_main(["evaluate", "--model", str(model), "--data", str(stsb),
                     "--json", str(folder / "stsb.json")]) == 0
    [row] = json.loads((folder / "stsb.json").read_text())
    assert abs(row["spearman"] - record["sets"]["STS-B"]["spearman"]) <= 1e-5
    assert not [path.name for path in folder.iterdir() if ".tmp" in path.name]


def bad_suites(folder, model):
    data = folder / "data"
    suite = ["evaluate", "--model", str(model), "--suite", "english-sts"]
    return {
        "missing folder": (suite + ["--data-dir", str(folder / "nope")],
                           f"--data-dir {folder / 'nope'}: no such folder"),
        "no data dir": (suite, "--suite english-sts needs --data-dir"),
        "both": (suite + ["--data-dir", str(data), "--data", str(data)],
                 "give either --data FILE... or --suite english-sts"),
        "neither": (["evaluate", "--model", str(model)],
                    "give either --data FILE... or --suite english-sts"),
        "data dir without suite": (
            ["evaluate", "--model", str(model), "--data-dir", str(data),
             "--data", str(data / "stsb_multi_mt" / "stsb-en-test.csv")],
            "--data-dir is for --suite english-sts"),
        "missing year": (suite + ["--data-dir", str(folder / "no_sts14")],
                         f"STS14 not found: no *.test.tsv file in "
                         f"{folder / 'no_sts14' / 'sts_en' / 'STS14'}"),
        "missing SICK file": (suite + ["--data-dir", str(folder / "no_sick")],
                              "SICK test file"),
    }


@pytest.mark.parametrize("case", ["missing folder", "no data dir", "both", "neither",
                                  "data dir without suite", "missing year",
                                  "missing SICK file"])
def test_bad_suite_inputs_are_one_line_before_the_model_loads(suite, case, capsys):
    import shutil

    folder, model, _ = suite
    for name, left_out in (("no_sts14", "sts_en/STS14"), ("no_sick", "sts_en/SICK")):
        if not (folder / name).exists():
            shutil.copytree(folder / "data", folder / name)
            shutil.rmtree(folder / name / left_out)
    argv, expected = bad_suites(folder, model)[case]
    assert kcse_main(argv) == 2
    captured = capsys.readouterr()
    assert "model:" not in captured.out  # Nothing loaded.
    [line] = captured.err.splitlines()
    assert line.startswith("kcse evaluate: error: ") and expected in line, line
