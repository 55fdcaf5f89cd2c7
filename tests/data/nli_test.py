"""kcse.data.read_nli / nli_triplets on small SNLI- and CNSD-style files."""

import json
import warnings

import numpy as np
import pytest

from kcse.data import MalformedLineError
from kcse.data import NLI_LABELS
from kcse.data import NLIPairs
from kcse.data import nli_triplets
from kcse.data import read_nli


def snli_record(premise, hypothesis, gold, pair_id="1"):
    """A line with every field of snli_1.0_*.jsonl."""
    return {
        "annotator_labels": [gold if gold != "-" else "neutral", "entailment"],
        "captionID": "3416050480.jpg#4",
        "gold_label": gold,
        "pairID": pair_id,
        "sentence1": premise,
        "sentence1_binary_parse": "( ( A person ) . )",
        "sentence1_parse": "(ROOT (S (NP (DT A) (NN person)) (. .)))",
        "sentence2": hypothesis,
        "sentence2_binary_parse": "( ( A person ) . )",
        "sentence2_parse": "(ROOT (S (NP (DT A) (NN person)) (. .)))",
    }


SNLI_ROWS = [
    ("A person on a horse jumps over a broken down airplane.",
     "A person is training his horse for a competition.", "neutral"),
    ("A person on a horse jumps over a broken down airplane.",
     "A person is at a diner, ordering an omelette.", "contradiction"),
    ("A person on a horse jumps over a broken down airplane.",
     "A person is outdoors, on a horse.", "entailment"),
    ("Children smiling and waving at camera", "They are smiling at their parents", "-"),
    ("Children smiling and waving at camera", "There are children present", "entailment"),
    ("Children smiling and waving at camera", "The kids are frowning", "contradiction"),
    ("A boy is jumping on skateboard.", "The boy skates down the sidewalk.", "contradiction"),
    ("A boy is jumping on skateboard.", "The boy does a skateboarding trick.", "entailment"),
    ("A man in a blue shirt.", "A man wears blue.", "entailment"),
]

CNSD_ROWS = [
    ("一个骑马的人跳过一架坏掉的飞机。", "一个人正在为比赛训练他的马。", "neutral"),
    ("一个骑马的人跳过一架坏掉的飞机。", "一个人正在餐馆点煎蛋卷。", "contradiction"),
    ("一个骑马的人跳过一架坏掉的飞机。", "一个人在户外，骑着马。", "entailment"),
    ("孩子们对着镜头微笑和挥手", "他们在对父母微笑", "-"),
]


def write_jsonl(path, rows, snli_fields=True):
    lines = []
    for i, (premise, hypothesis, gold) in enumerate(rows):
        record = (snli_record(premise, hypothesis, gold, str(i)) if snli_fields
                  else {"sentence1": premise, "sentence2": hypothesis, "gold_label": gold})
        lines.append(json.dumps(record, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_snli_lines(tmp_path):
    path = write_jsonl(tmp_path / "snli_1.0_dev.jsonl", SNLI_ROWS)
    pairs = read_nli(path)
    assert isinstance(pairs, NLIPairs)
    kept = [row for row in SNLI_ROWS if row[2] != "-"]
    assert len(pairs) == len(kept) == 8
    assert pairs.sentences1 == [p for p, _, _ in kept]
    assert pairs.sentences2 == [h for _, h, _ in kept]
    assert pairs.labels.dtype == np.int64
    assert pairs.labels.tolist() == [NLI_LABELS.index(g) for _, _, g in kept]
    assert pairs.label_names() == [g for _, _, g in kept]
    assert NLI_LABELS == ("entailment", "neutral", "contradiction")
    # The "-" line (line 4) is skipped and counted.
    assert pairs.no_gold == [4] and pairs.skipped == [4]
    assert pairs.source == str(path)


def test_cnsd_lines(tmp_path):
    path = write_jsonl(tmp_path / "cnsd_snli_v1.0.dev.jsonl", CNSD_ROWS, snli_fields=False)
    pairs = read_nli(path)
    assert pairs.sentences2 == ["一个人正在为比赛训练他的马。", "一个人正在餐馆点煎蛋卷。", "一个人在户外，骑着马。"]
    assert pairs.labels.tolist() == [1, 2, 0]
    assert pairs.no_gold == [4]


def test_blank_lines_crlf_and_label_case(tmp_path):
    path = tmp_path / "x.jsonl"
    rows = [json.dumps({"sentence1": "a", "sentence2": "b", "gold_label": "Entailment"}),
            "", json.dumps({"sentence1": "c", "sentence2": "d", "gold_label": "neutral"})]
    path.write_bytes(("\r\n".join(rows) + "\r\n").encode("utf-8"))
    pairs = read_nli(path)
    assert pairs.labels.tolist() == [0, 1] and pairs.skipped == []


@pytest.mark.parametrize(
    "line, reason",
    [
        ('{"sentence1": "a", "sentence2": "b"', "not valid JSON"),
        ('["a", "b", "entailment"]', "expected a JSON object"),
        ('{"sentence1": "a", "gold_label": "entailment"}', "missing field 'sentence2'"),
        ('{"sentence1": "a", "sentence2": "b"}', "missing field 'gold_label'"),
        ('{"sentence1": "a", "sentence2": null, "gold_label": "neutral"}',
         "field 'sentence2' should be a string"),
        ('{"sentence1": "a", "sentence2": "b", "gold_label": "paraphrase"}',
         "gold_label 'paraphrase' is not one of entailment, neutral, contradiction or '-'"),
        ('{"sentence1": "a", "sentence2": "b", "gold_label": ""}', "gold_label ''"),
    ],
)
def test_bad_line_names_file_and_line(tmp_path, line, reason):
    good = json.dumps({"sentence1": "x", "sentence2": "y", "gold_label": "entailment"})
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([good, good, line, good]) + "\n", encoding="utf-8")
    with pytest.raises(MalformedLineError) as error:
        read_nli(path)
    assert str(error.value).startswith(f"{path}:3: ")
    assert reason in str(error.value)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pairs = read_nli(path, on_error="skip")
    assert len(pairs) == 3 and pairs.skipped == [3] and pairs.no_gold == []
    assert any("skipped 1 malformed line(s)" in str(w.message) for w in caught)


def test_on_error_is_checked_and_bad_encoding(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"sentence1": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(ValueError, match="on_error"):
        read_nli(path, on_error="warn")
    with pytest.raises(MalformedLineError, match="not valid utf-8"):
        read_nli(path)


def test_triplets_one_per_entailment_with_a_contradiction(tmp_path):
    path = write_jsonl(tmp_path / "train.jsonl", SNLI_ROWS)
    triplets = nli_triplets(read_nli(path))
    assert list(triplets) == [
        ("A person on a horse jumps over a broken down airplane.",
         "A person is outdoors, on a horse.",
         "A person is at a diner, ordering an omelette."),
        ("Children smiling and waving at camera", "There are children present",
         "The kids are frowning"),
        # The contradiction may come before the entailment in the file.
        ("A boy is jumping on skateboard.", "The boy does a skateboarding trick.",
         "The boy skates down the sidewalk."),
    ]  # "A man in a blue shirt." has no contradiction: dropped.
    assert len(triplets) == 3
    assert triplets.anchors[0] == SNLI_ROWS[0][0]
    # A path works too.
    assert list(nli_triplets(path)) == list(triplets)


def test_triplets_cycle_contradictions_of_a_premise():
    pairs = NLIPairs(
        ["P"] * 5 + ["Q"],
        ["e1", "c1", "e2", "e3", "c2", "q"],
        np.array([0, 2, 0, 0, 2, 2]),
    )
    assert list(nli_triplets(pairs)) == [
        ("P", "e1", "c1"), ("P", "e2", "c2"), ("P", "e3", "c1")
    ]
    neutral_only = NLIPairs(["P"], ["n"], np.array([1]))
    assert len(nli_triplets(neutral_only)) == 0
