"""kcse.data: English STS12–16 / STS-B / SICK-R and stsb-multi-mt readers."""

import re
import warnings

import numpy as np
import pytest

from kcse.data import read_pairs
from kcse.data import ENGLISH_STS
from kcse.data import STS_YEARS
from kcse.data import STSB_MULTI_MT_LANGUAGES
from kcse.data import LabelScaleError
from kcse.data import PooledSentencePairs
from kcse.data import read_english_sts
from kcse.data.english import read_sts_files
from kcse.data import read_stsb_multi_mt
from kcse.data.english import STS_SUBCORPORA
from kcse.data.english import sts_file_urls
from kcse.data.english import stsb_multi_mt_url

# Pairs with a gold score in the brmson/dataset-sts test files (SentEval's
# counts where the sub-corpora are the same: STS13 without SMT 1,500,
# STS14 3,750, STS15 3,000, STS16 1,186; STS12 lacks MSRvid's 750).
STS_COUNTS = {"STS12": 2358, "STS13": 1500, "STS14": 3750, "STS15": 3000, "STS16": 1186}


def test_names():
    assert ENGLISH_STS == ("STS12", "STS13", "STS14", "STS15", "STS16", "STS-B", "SICK-R")
    assert len(STSB_MULTI_MT_LANGUAGES) == 11


@pytest.mark.parametrize("name", STS_YEARS)
def test_sts_years_pool_every_subcorpus(shared_data, name):
    pooled = read_english_sts(shared_data, name)
    assert isinstance(pooled, PooledSentencePairs)
    assert len(pooled) == STS_COUNTS[name]
    files = sorted((shared_data / "sts_en" / name).glob("*.test.tsv"))
    assert list(pooled.parts) == [f.name.removesuffix(".test.tsv") for f in files]
    assert list(pooled.parts) == sorted(STS_SUBCORPORA[name])
    # The pooled set is the files' pairs concatenated in file-name order.
    singles = [read_pairs(f) for f in files]
    assert pooled.sentences1 == [s for p in singles for s in p.sentences1]
    assert pooled.sentences2 == [s for p in singles for s in p.sentences2]
    np.testing.assert_array_equal(pooled.scores, np.concatenate([p.scores for p in singles]))
    assert [len(p) for p in pooled.parts.values()] == [len(p) for p in singles]
    assert len(pooled.skipped) == sum(len(p.skipped) for p in singles)
    assert pooled.scores.min() >= 0 and pooled.scores.max() <= 5
    # The `sts_en` folder itself works as data_dir too.
    assert len(read_english_sts(shared_data / "sts_en", name)) == STS_COUNTS[name]


def test_sts15_16_pairs_without_gold_are_counted(shared_data):
    sts16 = read_english_sts(shared_data, "STS16")
    assert len(sts16.skipped) == 7997
    name, line = sts16.skipped[0]
    assert name == "answer-answer" and isinstance(line, int)
    raw = (shared_data / "sts_en" / "STS16" / "answer-answer.test.tsv").read_text(
        encoding="utf-8").split("\n")
    assert raw[line - 1].split("\t")[0] == ""


def test_stsb_and_sick(shared_data):
    assert len(read_english_sts(shared_data, "STS-B")) == 1379
    assert len(read_english_sts(shared_data, "stsb", split="dev")) == 1500
    assert len(read_english_sts(shared_data, "STS-B", split="validation")) == 1500
    assert len(read_english_sts(shared_data, "STS-B", split="train")) == 5749
    sick = read_english_sts(shared_data, "SICK-R")
    assert len(sick) == 4927
    assert sick.scores.min() >= 1 and sick.scores.max() <= 5
    assert len(read_english_sts(shared_data, "sick")) == 4927
    assert read_english_sts(shared_data, "STS-B").sentences1[0] == "A girl is styling her hair."


def test_sick_train_and_trial_when_present(tmp_path):
    folder = tmp_path / "sts_en" / "SICK"
    folder.mkdir(parents=True)
    header = "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
    (folder / "SICK_train.txt").write_text(
        header + "1\tA dog runs.\tA dog is running.\t4.9\tENTAILMENT\n", encoding="utf-8")
    (folder / "SICK_trial.txt").write_text(
        header + "2\tA man eats.\tA cat sleeps.\t1.1\tNEUTRAL\n", encoding="utf-8")
    assert read_english_sts(tmp_path, "SICK-R", "train").scores.tolist() == [4.9]
    assert read_english_sts(tmp_path, "SICK-R", "dev").scores.tolist() == [1.1]
    with pytest.raises(FileNotFoundError, match="SICK_test_annotated.txt"):
        read_english_sts(tmp_path, "SICK-R")
    (folder / "SICK_test_annotated.txt").write_text(
        header + "3\tA b.\tC d.\t0.5\tNEUTRAL\n", encoding="utf-8")
    with pytest.raises(LabelScaleError, match=r"SICK_test_annotated.txt:2: label 0.5 "
                       r"is outside the SICK relatedness scale \(1..5\)"):
        read_english_sts(tmp_path, "SICK-R")


@pytest.mark.parametrize("language", STSB_MULTI_MT_LANGUAGES)
def test_stsb_multi_mt_every_language(shared_data, language):
    dev = read_stsb_multi_mt(shared_data, language, "dev")
    test = read_stsb_multi_mt(shared_data, language.upper(), "test")
    assert (len(dev), len(test)) == (1500, 1379)
    # Translations keep the English scores pair by pair.
    english = read_stsb_multi_mt(shared_data, "en", "test")
    np.testing.assert_allclose(test.scores, english.scores)
    if language in ("en", "zh"):
        assert len(read_stsb_multi_mt(shared_data, language, "train")) == 5749


def test_stsb_multi_mt_from_a_flat_folder(shared_data):
    folder = shared_data / "stsb_multi_mt"
    assert len(read_stsb_multi_mt(folder, "de", "test")) == 1379


def test_missing_files_name_paths_and_cards(tmp_path):
    with pytest.raises(FileNotFoundError) as error:
        read_stsb_multi_mt(tmp_path, "de", "train")
    message = str(error.value)
    assert str(tmp_path / "stsb_multi_mt" / "stsb-de-train.csv") in message
    assert "data_cards/stsb_multi_mt.md" in message
    assert stsb_multi_mt_url("de", "train") in message
    for name in STS_YEARS:
        with pytest.raises(FileNotFoundError, match=re.escape("data_cards/sts_en.md")):
            read_english_sts(tmp_path, name)


def test_unknown_names_and_splits(shared_data):
    with pytest.raises(ValueError, match="Unknown English STS set 'STS17'") as error:
        read_english_sts(shared_data, "STS17")
    assert all(name in str(error.value) for name in ENGLISH_STS)
    with pytest.raises(ValueError, match="Unknown stsb-multi-mt language 'ko'") as error:
        read_stsb_multi_mt(shared_data, "ko", "test")
    assert all(language in str(error.value) for language in STSB_MULTI_MT_LANGUAGES)
    with pytest.raises(ValueError, match="Unknown split 'valid2'; choose one of: train, dev, test"):
        read_stsb_multi_mt(shared_data, "en", "valid2")
    with pytest.raises(ValueError, match="STS12 has only a 'test' split"):
        read_english_sts(shared_data, "STS12", split="train")


def test_sts_scores_off_scale_and_malformed_lines(tmp_path):
    folder = tmp_path / "sts_en" / "STS14"
    folder.mkdir(parents=True)
    (folder / "a.test.tsv").write_text(
        "3.2\tA b.\tC d.\n\tno\tgold\n4.0\tE f.\tG h.\n", encoding="utf-8")
    (folder / "b.test.tsv").write_text(
        "1.0\tI j.\tK l.\n7.5\tM n.\tO p.\nbad line\n", encoding="utf-8")
    with pytest.raises(Exception, match=r"b\.test\.tsv:3: expected 3"):
        read_english_sts(tmp_path, "STS14")
    (folder / "b.test.tsv").write_text("1.0\tI j.\tK l.\n7.5\tM n.\tO p.\n", encoding="utf-8")
    with pytest.raises(LabelScaleError, match=r"b\.test\.tsv:2: label 7.5 is outside the STS scale"):
        read_english_sts(tmp_path, "STS14")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        pooled = read_english_sts(tmp_path, "STS14", on_error="skip")
    assert pooled.sentences1 == ["A b.", "E f.", "I j."]
    assert pooled.scores.tolist() == [3.2, 4.0, 1.0]
    assert pooled.skipped == [("a", 2), ("b", 2)]
    assert {name: len(part) for name, part in pooled.parts.items()} == {"a": 2, "b": 1}


def test_read_sts_files_names_and_order(shared_data):
    folder = shared_data / "sts_en" / "STS13"
    files = [folder / "headlines.test.tsv", folder / "FNWN.test.tsv"]
    pooled = read_sts_files(files, names=["h", "f"])
    assert list(pooled.parts) == ["h", "f"]
    assert len(pooled) == 750 + 189
    assert pooled.sentences1[0] == read_pairs(files[0]).sentences1[0]
    with pytest.raises(ValueError, match="at least one file"):
        read_sts_files([])


def test_public_urls():
    assert stsb_multi_mt_url("EN", "dev") == (
        "https://raw.githubusercontent.com/PhilipMay/stsb-multi-mt/main/data/stsb-en-dev.csv")
    urls = sts_file_urls("STS12")
    assert sorted(urls) == sorted(f"{p}.test.tsv" for p in STS_SUBCORPORA["STS12"])
    assert urls["MSRpar.test.tsv"] == ("https://raw.githubusercontent.com/brmson/dataset-sts/"
                                       "master/data/sts/semeval-sts/2012/MSRpar.test.tsv")
    assert sts_file_urls("SICK")["SICK_test_annotated.txt"].endswith(
        "/data/sts/sick2014/SICK_test_annotated.txt")


def test_shared_files_are_the_listed_subcorpora(shared_data):
    for name, parts in STS_SUBCORPORA.items():
        present = sorted(f.name for f in (shared_data / "sts_en" / name).glob("*.test.tsv"))
        assert present == sorted(f"{p}.test.tsv" for p in parts)


def write_senteval_corpus(folder, name, inputs, gold):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"STS.input.{name}.txt").write_text("".join(f"{line}\n" for line in inputs),
                                                  encoding="utf-8")
    if gold is not None:
        (folder / f"STS.gs.{name}.txt").write_text("".join(f"{line}\n" for line in gold),
                                                   encoding="utf-8")


@pytest.mark.parametrize("parent", ["", "downstream", "data/downstream"])
def test_senteval_layout_pools_every_sub_corpus_present(tmp_path, parent):
    """SentEval's get_transfer_data.bash layout, from the folder holding
    STS/, SentEval's data/downstream or its data: every STS.input.X.txt with
    its STS.gs.X.txt, in name order; an empty gold line is a pair without
    gold, left out as `STSEval.loadFile` leaves it (`raw_scores != ''`)."""
    folder = tmp_path / parent / "STS" / "STS12-en-test"
    write_senteval_corpus(folder, "surprise.OnWN", ["a b\tc d", "e f\tg h"], ["4.2", "1"])
    write_senteval_corpus(folder, "MSRvid", ["i j\tk l", "m\tn", "o p\tq r"], ["0.5", "", "5"])
    pooled = read_english_sts(tmp_path, "STS12")
    assert list(pooled.parts) == ["MSRvid", "surprise.OnWN"]
    assert pooled.sentences1 == ["i j", "o p", "a b", "e f"]
    assert pooled.sentences2 == ["k l", "q r", "c d", "g h"]
    assert pooled.scores.tolist() == [0.5, 5.0, 4.2, 1.0]
    assert pooled.skipped == [("MSRvid", 2)]


def test_senteval_layout_errors_name_the_file_and_line(tmp_path):
    folder = tmp_path / "STS" / "STS15-en-test"
    write_senteval_corpus(folder, "belief", ["a\tb", "c\td"], None)
    with pytest.raises(FileNotFoundError, match=re.escape(
            f"{folder / 'STS.input.belief.txt'}: its gold scores are missing: no "
            "STS.gs.belief.txt beside it")):
        read_english_sts(tmp_path, "STS15")
    write_senteval_corpus(folder, "belief", ["a\tb", "c\td"], ["3"])
    with pytest.raises(ValueError, match=r"STS\.input\.belief\.txt: 2 lines, but .*"
                       r"STS\.gs\.belief\.txt: 1; SentEval pairs them line for line"):
        read_english_sts(tmp_path, "STS15")
    write_senteval_corpus(folder, "belief", ["a\tb", "c d"], ["3", "2"])
    with pytest.raises(ValueError, match=r"STS\.input\.belief\.txt:2: expected 2 "
                       r"tab-separated sentences \(s1, s2\); got 1\."):
        read_english_sts(tmp_path, "STS15")
    write_senteval_corpus(folder, "belief", ["a\tb", "c\td"], ["3", "x"])
    with pytest.raises(ValueError, match=r"STS\.input\.belief\.txt:2: gold score in "
                       r"STS\.gs\.belief\.txt 'x' is not a number\."):
        read_english_sts(tmp_path, "STS15")
    write_senteval_corpus(folder, "belief", ["a\tb", "c\td"], ["3", "7.5"])
    with pytest.raises(LabelScaleError, match=r"STS\.input\.belief\.txt:2: label 7.5 is "
                       "outside the STS scale"):
        read_english_sts(tmp_path, "STS15")


def test_senteval_stsbenchmark_and_sick(tmp_path, shared_data):
    """STS-B from SentEval's STS/STSBenchmark/sts-<split>.csv (score and
    sentences in tab-separated fields 5-7, `STSBenchmarkEval.loadFile`; some
    lines carry more) when stsb-multi-mt's is absent; SICK from SentEval's
    SICK/ folder."""
    benchmark = tmp_path / "downstream" / "STS" / "STSBenchmark"
    benchmark.mkdir(parents=True)
    (benchmark / "sts-dev.csv").write_text(
        "main-captions\tMSRvid\t2012test\t0000\t5.000\ta man plays .\ta man is playing .\n"
        "main-news\theadlines\t2015\t0011\t0.5\tstocks fall\tit rains\tsource\textra\n",
        encoding="utf-8")
    pairs = read_english_sts(tmp_path, "STS-B", split="dev")
    assert pairs.sentences2 == ["a man is playing .", "it rains"]
    assert pairs.scores.tolist() == [5.0, 0.5]
    with pytest.raises(FileNotFoundError) as error:
        read_english_sts(tmp_path, "STS-B", split="test")
    message = str(error.value)
    assert str(tmp_path / "stsb_multi_mt" / "stsb-en-test.csv") in message
    assert str(benchmark / "sts-test.csv") in message and "data_cards/stsb_multi_mt.md" in message
    sick = tmp_path / "downstream" / "SICK"
    sick.mkdir()
    (sick / "SICK_test_annotated.txt").write_bytes(
        (shared_data / "sts_en" / "SICK" / "SICK_test_annotated.txt").read_bytes())
    assert len(read_english_sts(tmp_path, "SICK-R")) == 4927
