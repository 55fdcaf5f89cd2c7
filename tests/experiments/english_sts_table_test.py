"""`kcse evaluate --suite english-sts`: the English table of the SimCSE and
ConSERT papers, on tiny files in its layout and a tiny saved encoder.

Reference: princeton-nlp/SimCSE's evaluation.py through SentEval's
`STSEval.run` (SentEval/senteval/sts.py): STS12-16 report
`spearmanr(all_sys_scores, all_gs_scores)`, one Spearman over the
concatenated pairs of every sub-corpus ("all"), on sentences split at
whitespace and joined by single spaces; STS-B and SICK-R their test sets.
Here recomputed with scipy from the encoder's vectors; SentEval's own
aggregates of each year's sub-corpora, "mean" and "wmean", as `STSEval.run`
computes them (`senteval_aggregates`, transcribed), on the same data laid
out as SentEval's download script lays it out.
"""

import json
import shutil

import numpy as np
import pytest
import scipy.stats

from kcse.commands.main import main as kcse_main
from conftest import tiny_encoder_file
from english_suite_files import random_pairs
from english_suite_files import write_english_suite

YEARS = {"STS12": ("MSRpar", "OnWN"), "STS13": ("FNWN",), "STS14": ("images", "OnWN"),
         "STS15": ("belief",), "STS16": ("headlines", "plagiarism")}
HEADER = ("| model | aggregate | STS12 | STS13 | STS14 | STS15 | STS16 | STS-B | SICK-R "
          "| Avg. |")
# SentEval's layout holds a sub-corpus more: every one present is read.
SENTEVAL_EXTRA = ("STS12", "MSRvid")


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """A tiny data folder laid out like ../shared/data, a tiny encoder, and
    the pairs of each set as the reference reads them."""
    folder = tmp_path_factory.mktemp("english_sts")
    model, _ = tiny_encoder_file(folder, 1)
    rng = np.random.default_rng(0)
    sets, corpora_pairs = write_english_suite(folder / "data", YEARS, rng)
    corpora_pairs[SENTEVAL_EXTRA] = random_pairs(rng, 7)
    # SentEval's batcher joins a sentence's words by single spaces.
    a, b, score = sets["STS12"][0]
    spaced = " " + a.replace(" ", "   ") + "  "
    sets["STS12"][0] = (spaced, b, score)
    first = folder / "data" / "sts_en" / "STS12" / "MSRpar.test.tsv"
    first.write_text(first.read_text().replace(f"\t{a}\t", f"\t{spaced}\t", 1))
    write_senteval_layout(folder / "senteval" / "data" / "downstream", corpora_pairs, sets)
    return folder, model, sets, corpora_pairs


def write_senteval_layout(downstream, corpora_pairs, sets):
    """The same pairs as facebookresearch/SentEval's get_transfer_data.bash
    lays them out: STS/<year>-en-test/STS.input.<corpus>.txt (s1<TAB>s2) with
    STS.gs.<corpus>.txt (an empty line: no gold), STS/STSBenchmark/sts-test.csv
    (score and sentences in tab-separated fields 5-7), SICK/ as SICK's own."""
    for (year, corpus), pairs in corpora_pairs.items():
        folder = downstream / "STS" / f"{year}-en-test"
        folder.mkdir(parents=True, exist_ok=True)
        inputs = [f"{a}\t{b}" for a, b, _ in pairs]
        gold = [str(score) for _, _, score in pairs]
        inputs.insert(2, "no gold score\tleft out")
        gold.insert(2, "")
        (folder / f"STS.input.{corpus}.txt").write_text("\n".join(inputs) + "\n")
        (folder / f"STS.gs.{corpus}.txt").write_text("\n".join(gold) + "\n")
    (downstream / "STS" / "STSBenchmark").mkdir()
    (downstream / "STS" / "STSBenchmark" / "sts-test.csv").write_text("".join(
        f"main-captions\tMSRvid\t2012test\t{i:04d}\t{score}\t{a}\t{b}\n"
        for i, (a, b, score) in enumerate(sets["STS-B"])))
    (downstream / "SICK").mkdir()
    shutil.copy(downstream.parents[1].parent / "data" / "sts_en" / "SICK" /
                "SICK_test_annotated.txt", downstream / "SICK")


def senteval_aggregates(encoder, datasets):
    """facebookresearch/SentEval senteval/sts.py `STSEval.run`, transcribed:
    per dataset `spearmanr(sys_scores, gs_scores)` of cosines, then
    `np.average(list_spr)` ("mean") and `np.average(list_spr,
    weights=nsamples)` ("wmean"), ×100."""
    spearmans, weights = [], []
    for pairs in datasets:
        spearmans.append(reference_spearman(encoder, pairs))
        weights.append(len(pairs))
    return np.average(spearmans), np.average(spearmans, weights=weights)


def reference_spearman(encoder, pairs):
    """SentEval's "all": scipy's Spearman of gold vs cosine over every pair."""
    first, second, gold = zip(*pairs)
    vectors1 = encoder.encode([" ".join(s.split()) for s in first]).astype("float64")
    vectors2 = encoder.encode([" ".join(s.split()) for s in second]).astype("float64")
    cosines = (vectors1 * vectors2).sum(1) / (
        np.linalg.norm(vectors1, axis=1) * np.linalg.norm(vectors2, axis=1))
    return 100 * scipy.stats.spearmanr(gold, cosines).correlation


@pytest.fixture(scope="module")
def suite_run(suite):
    """`kcse evaluate --suite english-sts` of the suite in kcse's layout:
    its code, standard output and results.json."""
    import contextlib
    import io

    folder, model, _, _ = suite
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = kcse_main(["evaluate", "--model", str(model), "--suite", "english-sts",
                          "--data-dir", str(folder / "data"),
                          "--json", str(folder / "table.json"),
                          "--markdown", str(folder / "table.md")])
    return code, printed.getvalue(), json.loads((folder / "table.json").read_text())


def test_the_table_pools_each_year_and_scores_sts_b_as_evaluate_does(suite, suite_run):
    import keras

    folder, model, sets, corpora_pairs = suite
    data = folder / "data"
    code, out, record = suite_run
    assert code == 0
    encoder = keras.saving.load_model(model)
    for name, pairs in sets.items():
        result = record["sets"][name]
        assert result["n"] == len(pairs)
        assert abs(result["spearman"] - reference_spearman(encoder, pairs)) <= 1e-5, name
    for year, corpora in YEARS.items():
        mean, wmean = senteval_aggregates(
            encoder, [corpora_pairs[year, corpus] for corpus in corpora])
        result = record["sets"][year]
        assert list(result["parts"]) == result["files"] == sorted(corpora)
        assert abs(result["mean"] - mean) <= 1e-5 and abs(result["wmean"] - wmean) <= 1e-5
    spearmans = [record["sets"][name]["spearman"] for name in sets]
    wmeans = [record["sets"][name].get("wmean", record["sets"][name]["spearman"])
              for name in sets]
    assert record["average"] == pytest.approx(np.mean(spearmans), abs=1e-9)
    assert record["average_wmean"] == pytest.approx(np.mean(wmeans), abs=1e-9)

    table = (folder / "table.md").read_text()
    lines = table.splitlines()
    assert lines[0] == HEADER and lines[1] == "|" + "---|" * 10
    assert lines[2] == (f"| {model} | all | " + " | ".join(f"{s:.2f}" for s in spearmans)
                        + f" | {record['average']:.2f} |")
    assert lines[3] == (f"| {model} | wmean | " + " | ".join(f"{s:.2f}" for s in wmeans)
                        + f" | {record['average_wmean']:.2f} |")
    assert lines[4] == "| pairs |  | 24 | 12 | 24 | 12 | 24 | 20 | 20 |  |"
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
                         f"STS14 not found: no file at "
                         f"{folder / 'no_sts14' / 'sts_en' / 'STS14'}/*.test.tsv or "),
        "missing SICK file": (suite + ["--data-dir", str(folder / "no_sick")],
                              "SICK test file"),
    }


@pytest.mark.parametrize("case", ["missing folder", "no data dir", "both", "neither",
                                  "data dir without suite", "missing year",
                                  "missing SICK file"])
def test_bad_suite_inputs_are_one_line_before_the_model_loads(suite, case, capsys):
    import shutil

    folder, model, _, _ = suite
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


def test_senteval_layout_reads_every_sub_corpus_it_holds(suite, suite_run, capsys):
    """The same sets as SentEval's download script lays them out, found from
    SentEval's `data` folder: STS12 with the sub-corpus brmson/dataset-sts
    does not carry (MSRvid), pairs without gold left out as `STSEval.loadFile`
    leaves them; the other years, STS-B and SICK-R score as from kcse's layout."""
    import keras

    folder, model, sets, corpora_pairs = suite
    assert kcse_main(["evaluate", "--model", str(model), "--suite", "english-sts",
                      "--data-dir", str(folder / "senteval"),
                      "--json", str(folder / "senteval.json")]) == 0
    capsys.readouterr()
    record = json.loads((folder / "senteval.json").read_text())
    brmson = suite_run[2]
    encoder = keras.saving.load_model(model)
    sts12 = record["sets"]["STS12"]
    assert sts12["files"] == ["MSRpar", "MSRvid", "OnWN"]
    corpora = [corpora_pairs["STS12", corpus] for corpus in sts12["files"]]
    assert sts12["n"] == sum(map(len, corpora))
    assert abs(sts12["spearman"] - reference_spearman(encoder, sum(corpora, []))) <= 1e-5
    mean, wmean = senteval_aggregates(encoder, corpora)
    assert abs(sts12["mean"] - mean) <= 1e-5 and abs(sts12["wmean"] - wmean) <= 1e-5
    for name in sets:
        if name != "STS12":
            for key in ("spearman", "n", "wmean"):
                assert record["sets"][name].get(key) == pytest.approx(
                    brmson["sets"][name].get(key), abs=1e-9), (name, key)
