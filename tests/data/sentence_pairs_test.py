"""Tests for kcse.data.read_pairs on the real layouts and on malformed input."""

import csv
import re
import warnings

import numpy as np
import pytest

from kcse.data import MalformedLineError
from kcse.data import SentencePairs
from kcse.data import read_pairs


def _raw_tab_rows(path):
    """Independent parse: (1-based line number, fields) of non-blank lines."""
    with open(path, encoding="utf-8") as file:  # universal newlines
        lines = file.read().split("\n")
    return [
        (number, line.split("\t"))
        for number, line in enumerate(lines, start=1)
        if line.strip()
    ]


def _write(path, text, newline="\n"):
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return path


# --------------------------------------------------------------------------
# Real files from shared_data.


@pytest.mark.parametrize(
    "split, rows", [("train", 5231), ("valid", 1458), ("test", 1361)]
)
def test_senteval_cn_stsb(shared_data, split, rows):
    path = shared_data / "senteval_cn" / "STS-B" / f"STS-B.{split}.data"
    pairs = read_pairs(path)
    raw = _raw_tab_rows(path)
    assert len(raw) == rows
    assert isinstance(pairs, SentencePairs)
    assert len(pairs) == rows
    assert len(pairs.sentences1) == len(pairs.sentences2) == rows
    assert pairs.skipped == []
    assert pairs.source == str(path)
    assert pairs.scores.dtype == np.float64
    # Integer labels 0..5.
    np.testing.assert_array_equal(pairs.scores, np.round(pairs.scores))
    assert pairs.scores.min() >= 0 and pairs.scores.max() <= 5
    assert set(pairs.scores) <= set(range(6))
    # First pair and the whole file against an independent parse.
    s1, s2, label = raw[0][1]
    assert (pairs.sentences1[0], pairs.sentences2[0]) == (s1, s2)
    assert pairs.scores[0] == int(label)
    assert pairs.sentences1 == [fields[0] for _, fields in raw]
    assert pairs.sentences2 == [fields[1] for _, fields in raw]
    np.testing.assert_array_equal(
        pairs.scores, [int(fields[2]) for _, fields in raw]
    )


@pytest.mark.parametrize("language", ["en", "zh"])
def test_stsb_multi_mt_csv(shared_data, language):
    path = shared_data / "stsb_multi_mt" / f"stsb-{language}-test.csv"
    pairs = read_pairs(path)
    with open(path, encoding="utf-8", newline="") as file:
        raw = [row for row in csv.reader(file) if row]
    assert len(raw) == 1379
    assert all(len(row) == 3 for row in raw)
    assert len(pairs) == 1379
    assert pairs.skipped == []
    assert pairs.scores.dtype == np.float64
    assert pairs.scores.min() >= 0.0 and pairs.scores.max() <= 5.0
    # Real-valued scores, not just integers.
    assert np.any(pairs.scores != np.round(pairs.scores))
    assert (pairs.sentences1[0], pairs.sentences2[0]) == (raw[0][0], raw[0][1])
    assert pairs.scores[0] == float(raw[0][2])
    assert pairs.sentences1 == [row[0] for row in raw]
    assert pairs.sentences2 == [row[1] for row in raw]
    np.testing.assert_array_equal(pairs.scores, [float(row[2]) for row in raw])
    # No sentence keeps a CR from the CRLF line endings of these files.
    assert not any("\r" in s or "\n" in s for s in pairs.sentences())
    # Quoted sentences come through whole (with their commas / quotes).
    quoted = [
        (index, side, row[side])
        for index, row in enumerate(raw)
        for side in (0, 1)
        if "," in row[side] or '"' in row[side]
    ]
    assert quoted
    for index, side, sentence in quoted:
        read = (pairs.sentences1, pairs.sentences2)[side][index]
        assert read == sentence
    if language == "en":
        assert pairs.sentences1[98] == (
            "Three young men run, jump, and kick off of a Coke machine."
        )
        assert pairs.sentences2[98] == "Three men are jumping off a wall."
        assert pairs.scores[98] == 1.5


def _check_sts_file(path, pairs):
    raw = _raw_tab_rows(path)
    unscored = [number for number, fields in raw if not fields[0].strip()]
    scored = [(number, fields) for number, fields in raw if fields[0].strip()]
    assert unscored, "test needs a file with some empty scores"
    assert len(pairs) == len(scored) == len(raw) - len(unscored)
    assert pairs.skipped == unscored
    number, (score, s1, s2) = scored[0]
    assert (pairs.sentences1[0], pairs.sentences2[0]) == (s1, s2)
    assert pairs.scores[0] == float(score)
    assert pairs.sentences1 == [fields[1] for _, fields in scored]
    assert pairs.sentences2 == [fields[2] for _, fields in scored]
    np.testing.assert_array_equal(
        pairs.scores, [float(fields[0]) for _, fields in scored]
    )
    assert pairs.scores.min() >= 0.0 and pairs.scores.max() <= 5.0


def test_sts_tsv_with_empty_scores_auto(shared_data):
    # First line has a score, so auto-detection has something to go on.
    path = shared_data / "sts_en" / "STS15" / "answers-forums.test.tsv"
    pairs = read_pairs(path)
    _check_sts_file(path, pairs)
    assert len(pairs) == 375 and len(pairs.skipped) == 1625


def test_sts_tsv_with_empty_scores_explicit_format(shared_data):
    # Here the very first line has an empty score.
    path = shared_data / "sts_en" / "STS16" / "headlines.test.tsv"
    pairs = read_pairs(path, format="sts_tsv")
    _check_sts_file(path, pairs)
    assert 1 in pairs.skipped


def test_sts_tsv_auto_detected_when_first_score_is_empty(shared_data):
    # 8 of the STS15/16 files start with a pair that has no gold score.
    path = shared_data / "sts_en" / "STS16" / "headlines.test.tsv"
    pairs = read_pairs(path)
    _check_sts_file(path, pairs)


def test_sick(shared_data):
    path = shared_data / "sts_en" / "SICK" / "SICK_test_annotated.txt"
    pairs = read_pairs(path)
    raw = _raw_tab_rows(path)
    assert raw[0][1][:4] == [
        "pair_ID", "sentence_A", "sentence_B", "relatedness_score"
    ]
    rows = [fields for _, fields in raw[1:]]
    assert len(rows) == 4927
    assert len(pairs) == 4927
    assert pairs.skipped == []
    assert "sentence_A" not in pairs.sentences1
    assert pairs.scores.min() >= 1.0 and pairs.scores.max() <= 5.0
    assert (pairs.sentences1[0], pairs.sentences2[0]) == (rows[0][1], rows[0][2])
    assert pairs.scores[0] == float(rows[0][3])
    assert pairs.sentences1 == [row[1] for row in rows]
    assert pairs.sentences2 == [row[2] for row in rows]
    np.testing.assert_array_equal(pairs.scores, [float(row[3]) for row in rows])


# --------------------------------------------------------------------------
# Malformed input.

GOOD = ["猫坐着\t一只猫坐着\t4", "a dog\tthe dog\t3", "x y\tz\t0"]
BAD_LINES = {
    "two_fields": "only two\tfields",
    "four_fields": "one\ttwo\t3\textra",
    "non_numeric_label": "one\ttwo\thigh",
}


@pytest.mark.parametrize("kind", sorted(BAD_LINES))
@pytest.mark.parametrize("position", [0, 2, 3])
def test_malformed_line_raises_with_path_and_line(tmp_path, kind, position):
    lines = list(GOOD)
    lines.insert(position, BAD_LINES[kind])
    path = _write(tmp_path / "task.test.data", "\n".join(lines) + "\n")
    with pytest.raises(MalformedLineError) as info:
        read_pairs(path)
    message = str(info.value)
    assert str(path) in message
    assert re.search(re.escape(str(path)) + f":{position + 1}\\b", message)
    assert isinstance(info.value, ValueError)


def test_malformed_lines_skipped_with_warning(tmp_path):
    lines = [
        GOOD[0],
        BAD_LINES["two_fields"],  # line 2
        GOOD[1],
        BAD_LINES["four_fields"],  # line 4
        BAD_LINES["non_numeric_label"],  # line 5
        GOOD[2],
    ]
    path = _write(tmp_path / "task.test.data", "\n".join(lines) + "\n")
    with pytest.warns(UserWarning) as record:
        pairs = read_pairs(path, on_error="skip")
    messages = [str(w.message) for w in record]
    assert any(re.search(r"\b3\b", m) and str(path) in m for m in messages)
    assert pairs.skipped == [2, 4, 5]
    assert len(pairs) == 3
    assert pairs.sentences1 == [line.split("\t")[0] for line in GOOD]
    assert pairs.sentences2 == [line.split("\t")[1] for line in GOOD]
    np.testing.assert_array_equal(pairs.scores, [4.0, 3.0, 0.0])


def test_no_warning_when_nothing_skipped(tmp_path):
    path = _write(tmp_path / "task.test.data", "\n".join(GOOD) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pairs = read_pairs(path, on_error="skip")
    assert len(pairs) == 3 and pairs.skipped == []


def test_malformed_line_in_sts_tsv_and_csv(tmp_path):
    tsv = _write(tmp_path / "x.test.tsv", "4.0\ta\tb\n\tc\td\nabc\te\tf\n")
    with pytest.raises(MalformedLineError, match=re.escape(f"{tsv}:3")):
        read_pairs(tsv)
    with pytest.warns(UserWarning, match="1 malformed"):
        pairs = read_pairs(tsv, on_error="skip")
    assert pairs.sentences1 == ["a"] and pairs.skipped == [2, 3]
    data = _write(tmp_path / "x.csv", 'a,b,1.5\n"c, d",e\nf,g,2\n')
    with pytest.raises(MalformedLineError, match=re.escape(f"{data}:2")):
        read_pairs(data)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"format": "tsv"}, "format"),
        ({"format": "SICK"}, "format"),
        ({"on_error": "ignore"}, "on_error"),
        ({"on_error": None}, "on_error"),
    ],
)
def test_bad_arguments(tmp_path, kwargs, match):
    path = _write(tmp_path / "task.test.data", "\n".join(GOOD) + "\n")
    with pytest.raises(ValueError, match=match) as info:
        read_pairs(path, **kwargs)
    assert not isinstance(info.value, MalformedLineError)


def test_blank_lines_ignored_and_line_numbers_kept(tmp_path):
    text = "\n" + GOOD[0] + "\n\n   \n" + GOOD[1] + "\n\n" + GOOD[2] + "\n\n\n"
    path = _write(tmp_path / "task.test.data", text)
    pairs = read_pairs(path)
    assert len(pairs) == 3 and pairs.skipped == []
    np.testing.assert_array_equal(pairs.scores, [4.0, 3.0, 0.0])
    # A bad line after blank lines is reported at its physical line number.
    bad = _write(tmp_path / "bad.data", text + BAD_LINES["two_fields"] + "\n")
    with pytest.raises(MalformedLineError, match=re.escape(f"{bad}:10")):
        read_pairs(bad)


def test_empty_file(tmp_path):
    path = _write(tmp_path / "empty.data", "")
    pairs = read_pairs(path)
    assert len(pairs) == 0 and pairs.scores.dtype == np.float64


LAYOUTS = {
    "senteval_cn": ("t.test.data", "猫\t一只猫\t4\nb c\td\t0\n"),
    "stsb_csv": ("t.csv", 'A girl,"A boy, smiling",2.5\nx,y,0\n'),
    "sts_tsv": ("t.test.tsv", "4.2\tA girl\tA boy\n\tno\tgold\n0\tx\ty\n"),
    "sick": (
        "SICK_t.txt",
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\t"
        "entailment_judgment\n1\tA girl\tA boy\t3.3\tNEUTRAL\n"
        "2\tx\ty\t1\tCONTRADICTION\n",
    ),
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_crlf_reads_like_lf(tmp_path, layout):
    name, text = LAYOUTS[layout]
    (tmp_path / "lf").mkdir()
    (tmp_path / "crlf").mkdir()
    lf = read_pairs(_write(tmp_path / "lf" / name, text))
    crlf = read_pairs(_write(tmp_path / "crlf" / name, text, "\r\n"))
    explicit = read_pairs(tmp_path / "crlf" / name, format=layout)
    for pairs in (crlf, explicit):
        assert pairs.sentences1 == lf.sentences1
        assert pairs.sentences2 == lf.sentences2
        np.testing.assert_array_equal(pairs.scores, lf.scores)
        assert pairs.skipped == lf.skipped
    assert len(lf) == 2
    assert not any("\r" in s for s in crlf.sentences())


def test_auto_detection(tmp_path):
    # "1\t2\t3" means (s1="1", s2="2", label 3) in senteval_cn but
    # (score 1, s1="2", s2="3") in sts_tsv: the extension decides.
    data = read_pairs(_write(tmp_path / "t.test.data", "1\t2\t3\n"))
    assert (data.sentences1, data.sentences2) == (["1"], ["2"])
    np.testing.assert_array_equal(data.scores, [3.0])
    # .csv: comma separated.
    csv_pairs = read_pairs(_write(tmp_path / "t.csv", '"a, b",c,1.5\n'))
    assert (csv_pairs.sentences1, csv_pairs.sentences2) == (["a, b"], ["c"])
    np.testing.assert_array_equal(csv_pairs.scores, [1.5])
    # .tsv whose first field is a number: score first.
    tsv = read_pairs(_write(tmp_path / "t.test.tsv", "3.8\ta b\tc d\n\te\tf\n"))
    assert (tsv.sentences1, tsv.sentences2, tsv.skipped) == (["a b"], ["c d"], [2])
    np.testing.assert_array_equal(tsv.scores, [3.8])
    # SICK header, whatever the extension.
    _, sick_text = LAYOUTS["sick"]
    sick = read_pairs(_write(tmp_path / "sick.tsv", sick_text))
    assert sick.sentences1 == ["A girl", "x"]
    np.testing.assert_array_equal(sick.scores, [3.3, 1.0])
    # Anything else with the label last is senteval_cn.
    other = read_pairs(_write(tmp_path / "pairs.txt", "a\tb\t1\n"))
    assert (other.sentences1, other.sentences2) == (["a"], ["b"])
    # Auto-detection agrees with the explicit format for each layout.
    for layout, (name, text) in LAYOUTS.items():
        path = _write(tmp_path / f"auto_{name}", text)
        auto, explicit = read_pairs(path), read_pairs(path, format=layout)
        assert auto.sentences1 == explicit.sentences1, layout
        np.testing.assert_array_equal(auto.scores, explicit.scores)


def test_auto_detection_sts_tsv_first_score_empty(tmp_path):
    pairs = read_pairs(_write(tmp_path / "t.test.tsv", "\ta\tb\n2.0\tc\td\n"))
    assert pairs.sentences1 == ["c"] and pairs.skipped == [1]


@pytest.mark.parametrize("char", ["\u2028", "\x85", "\x0c"])
def test_unicode_line_separator_inside_sentence(tmp_path, char):
    text = f"a{char}b\tc\t1\nd\te\t2\n"
    pairs = read_pairs(_write(tmp_path / "t.test.data", text))
    assert pairs.sentences1 == [f"a{char}b", "d"]


def test_sentences_interleaves():
    pairs = SentencePairs(["a1", "b1", "c1"], ["a2", "b2", "c2"], np.zeros(3))
    assert pairs.sentences() == ["a1", "a2", "b1", "b2", "c1", "c2"]
    assert SentencePairs([], [], np.zeros(0)).sentences() == []


def test_sentences_interleaves_read_file(tmp_path):
    pairs = read_pairs(_write(tmp_path / "t.data", "\n".join(GOOD) + "\n"))
    expected = []
    for line in GOOD:
        expected += line.split("\t")[:2]
    assert pairs.sentences() == expected


def test_byte_order_mark_is_dropped(tmp_path):
    path = tmp_path / "SICK_bom.txt"
    path.write_bytes(
        "\ufeffpair_ID\tsentence_A\tsentence_B\trelatedness_score\t"
        "entailment_judgment\n1\ta\tb\t4.5\tNEUTRAL\n".encode("utf-8")
    )
    pairs = read_pairs(path)
    assert pairs.sentences1 == ["a"] and pairs.scores.tolist() == [4.5]


# The line actually misread is the one named, whatever the layout, the first
# line included (it once decided the layout: a bad first line of a SemEval
# .tsv made the file senteval_cn, and line 2 was blamed).
@pytest.mark.parametrize("name, text, message", [
    ("STS12.test.tsv", "4.5\tA cat sits. A cat sat.\n3.0\tA dog\tA dog runs\n",
     ":1: expected 3 tab-separated fields (score, s1, s2); got 2."),
    ("STS12.test.tsv", "x\tA cat\tA cat sits\n3.0\tA dog\tA dog runs\n",
     ":1: score 'x' is not a number."),
    ("STS12.test.tsv", "4,5\tA cat\t3\n3.0\tA dog\tA dog runs\n",
     ":1: score '4,5' is not a number."),
    ("task.test.data", "一只猫\t一只狗\n猫\t狗\t1\n",
     ":1: expected 3 tab-separated fields (s1, s2, label); got 2."),
    ("task.test.data", "一只猫\t一只狗\tx\n猫\t狗\t1\n", ":1: label 'x' is not a number."),
    ("stsb-en-test.csv", "a cat,a dog,x\nb,c,1\n", ":1: score 'x' is not a number."),
    ("stsb-en-test.csv", 'a,b,1\n"c,d,2\ne,f,3\ng,h,4\n',
     ":2: expected 3 comma-separated fields (sentence1, sentence2, score); got 1 "
     "(a quoted field runs from this line to line 4)."),
    ("stsb-en-test.csv", 'a,b,1\n"c\nx",d\ne,f,3\n',
     ":2: expected 3 comma-separated fields (sentence1, sentence2, score); got 2 "
     "(a quoted field runs from this line to line 3)."),
    ("SICK_test_annotated.txt", "pair_ID\tsentence_A\tsentence_B\trelatedness_score\n"
     "1\tA girl\tA boy\n2\tx\ty\t1.0\n",
     ":2: expected at least 4 tab-separated fields (pair_ID, sentence_A, sentence_B, "
     "relatedness_score); got 3."),
    ("SICK_test_annotated.txt", "pair_ID\tsentence_A\tsentence_B\trelatedness_score\n"
     "1\tA girl\tA boy\thigh\n", ":2: relatedness_score 'high' is not a number."),
    ("SICK_test_annotated.txt", "pair_ID sentence_A sentence_B relatedness_score\n"
     "1\tA girl\tA boy\t4.5\n", ":1: expected SICK's header starting with "
     "'pair_ID\\tsentence_A\\tsentence_B\\trelatedness_score'."),
])
def test_the_line_misread_is_the_one_named(tmp_path, name, text, message):
    path = _write(tmp_path / name, text)
    with pytest.raises(MalformedLineError) as info:
        read_pairs(path)
    assert str(info.value) == f"{path}{message}"


def test_text_that_is_not_utf8_names_its_line(tmp_path):
    path = tmp_path / "task.test.data"
    path.write_bytes("好\t好的\t1\n".encode("utf-8") + b"bad \xff\xfe\tx\t2\n")
    with pytest.raises(MalformedLineError) as info:
        read_pairs(path)
    assert str(info.value) == (f"{path}:2: not valid utf-8-sig text (invalid start byte "
                               "at byte 4 of the line).")
