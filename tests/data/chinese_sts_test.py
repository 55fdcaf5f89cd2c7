"""kcse.data.read_chinese_task: Su's senteval_cn layout and label scales."""

import re
import warnings

import numpy as np
import pytest

from kcse.data import MalformedLineError
from kcse.data import read_pairs
from kcse.data import BUNDLED_CHINESE_STS
from kcse.data import CHINESE_SPLITS
from kcse.data import CHINESE_TASKS
from kcse.data import LabelScaleError
from kcse.data import chinese_task_path
from kcse.data import file_checksum
from kcse.data import read_chinese_task
from kcse.data.chinese import DATA_CARDS
from kcse.data.chinese import LABEL_SCALES

# A few pairs in the style of each task (customer-service questions, PAWS-X
# word-scrambled paraphrases, translated STS-B captions).
SAMPLES = {
    "ATEC": [
        ("怎么更改花呗手机号码", "我的花呗是以前的手机号码，怎么更改成现在的支付宝的号码手机号", 1),
        ("也开不了花呗，就这样了？完事了", "真的嘛？就是花呗付款", 0),
        ("花呗冻结以后还能开通吗", "我的条件可以开通花呗借款吗", 0),
    ],
    "BQ": [
        ("用微信都6年，微信没有微粒贷功能", "4。号码来微粒贷", 0),
        ("微信消费算吗", "还有多少钱没还", 0),
        ("交易密码忘记了找回密码绑定的手机卡也掉了", "怎么最近安全老是要改密码呢好麻烦", 0),
        ("你好我昨天晚上申请的没有打电话给我今天之内一定会打吗？", "什么时候可以到账", 1),
    ],
    "LCQMC": [
        ("喜欢打篮球的男生喜欢什么样的女生", "爱打篮球的男生喜欢什么样的女生", 1),
        ("我手机丢了，我想换个手机", "我想买个新手机，求推荐", 1),
        ("大家觉得她好看吗", "大家觉得跑男好看吗？", 0),
    ],
    "PAWSX": [
        ("1975年的NBA赛季 - 76赛季是全美篮球协会的第30个赛季。", "1975-76赛季的全国篮球协会是NBA的第30个赛季。", 1),
        ("当可以保持相当的流速时，结果很高。", "当可以保持可比较的流速时，结果很高。", 1),
        ("他在佐治亚州出生，在亚特兰大长大。", "他在亚特兰大出生，在佐治亚州长大。", 0),
    ],
    "STS-B": [
        ("一架飞机要起飞了。", "一架飞机正在起飞。", 5),
        ("一个男人在吹一支大笛子。", "一个人在吹长笛。", 3),
        ("一个女人在切洋葱。", "一个男人在弹吉他。", 0),
        ("一个人正在骑马。", "一个人骑着一匹马。", 4),
    ],
}


def write_task(root, task, pairs_by_split=None, lines_by_split=None):
    """`<root>/<TASK>/<TASK>.<split>.data` in the real layout (UTF-8, tabs)."""
    folder = root / task
    folder.mkdir(parents=True, exist_ok=True)
    for split in CHINESE_SPLITS:
        if lines_by_split is not None:
            lines = lines_by_split[split]
        else:
            pairs = (pairs_by_split or {}).get(split, SAMPLES[task])
            lines = [f"{a}\t{b}\t{label}" for a, b, label in pairs]
        (folder / f"{task}.{split}.data").write_text(
            "\n".join(lines) + "\n", encoding="utf-8"
        )
    return root


@pytest.mark.parametrize("task", CHINESE_TASKS)
def test_every_task_reads_its_real_layout_and_scale(tmp_path, task):
    root = write_task(tmp_path / "senteval_cn", task)
    for split in CHINESE_SPLITS:
        pairs = read_chinese_task(root, task, split)
        expected = SAMPLES[task]
        assert len(pairs) == len(expected)
        assert pairs.sentences1 == [a for a, _, _ in expected]
        assert pairs.sentences2 == [b for _, b, _ in expected]
        np.testing.assert_array_equal(pairs.scores, [label for *_, label in expected])
        assert pairs.source == str(root / task / f"{task}.{split}.data")
        assert pairs.skipped == []
    # The folder holding senteval_cn/ works too (as ../shared/data does).
    assert len(read_chinese_task(tmp_path, task, "test")) == len(SAMPLES[task])


def test_label_scales_are_sus():
    assert CHINESE_TASKS == ("ATEC", "BQ", "LCQMC", "PAWSX", "STS-B")
    for task in ("ATEC", "BQ", "LCQMC", "PAWSX"):
        assert LABEL_SCALES[task] == (0, 1, True)
    assert LABEL_SCALES["STS-B"] == (0, 5, False)


@pytest.mark.parametrize(
    "name, task",
    [("sts-b", "STS-B"), ("STSB", "STS-B"), ("sts_b", "STS-B"), ("pawsx", "PAWSX"),
     ("PAWS-X", "PAWSX"), ("Lcqmc", "LCQMC"), ("atec", "ATEC"), ("bq", "BQ")],
)
def test_task_names_ignore_case_and_dashes(tmp_path, name, task):
    write_task(tmp_path, task)
    assert chinese_task_path(tmp_path, name, "valid") == (
        tmp_path / task / f"{task}.valid.data"
    )


@pytest.mark.parametrize("task", ["QQP", "STS", "", None, "ATEC2"])
def test_unknown_task_lists_the_valid_ones(tmp_path, task):
    with pytest.raises(ValueError, match="Unknown task") as error:
        read_chinese_task(tmp_path, task, "test")
    for name in CHINESE_TASKS:
        assert name in str(error.value)


@pytest.mark.parametrize("split", ["dev", "validation", "eval", "TRAINING"])
def test_unknown_split_lists_the_valid_ones(tmp_path, split):
    write_task(tmp_path, "ATEC")
    with pytest.raises(ValueError, match="Unknown split") as error:
        read_chinese_task(tmp_path, "ATEC", split)
    assert "train, valid, test" in str(error.value)


@pytest.mark.parametrize("task", CHINESE_TASKS)
def test_missing_file_names_path_and_data_card(tmp_path, task):
    with pytest.raises(FileNotFoundError) as error:
        read_chinese_task(tmp_path, task, "train")
    message = str(error.value)
    assert str(tmp_path / task / f"{task}.train.data") in message
    assert str(tmp_path / "senteval_cn" / task / f"{task}.train.data") in message
    assert f"data_cards/{DATA_CARDS[task]}" in message


def test_missing_split_of_a_present_task(tmp_path):
    write_task(tmp_path, "BQ")
    (tmp_path / "BQ" / "BQ.valid.data").unlink()
    with pytest.raises(FileNotFoundError, match=r"BQ\.valid\.data"):
        read_chinese_task(tmp_path, "BQ", "valid")
    assert len(read_chinese_task(tmp_path, "BQ", "test")) == 4


@pytest.mark.parametrize("task", ["ATEC", "BQ", "LCQMC", "PAWSX"])
@pytest.mark.parametrize("label", ["2", "0.5", "-1", "5"])
def test_binary_task_rejects_labels_off_0_1(tmp_path, task, label):
    lines = ["甲\t乙\t1", "", "丙\t丁\t0", f"戊\t己\t{label}", "庚\t辛\t1"]
    write_task(tmp_path, task, lines_by_split={s: lines for s in CHINESE_SPLITS})
    path = tmp_path / task / f"{task}.test.data"
    with pytest.raises(LabelScaleError) as error:
        read_chinese_task(tmp_path, task, "test")
    message = str(error.value)
    assert isinstance(error.value, MalformedLineError)
    # File, line (the blank line 2 counts) and value are named.
    assert message.startswith(f"{path}:4: label {float(label):g} ")
    assert f"{task} scale (0 or 1)" in message


@pytest.mark.parametrize("label, ok", [("6", False), ("-1", False), ("5.5", False),
                                       ("5", True), ("0", True), ("2.5", True)])
def test_stsb_accepts_0_to_5_only(tmp_path, label, ok):
    lines = ["一个人在弹吉他。\t一个男人在弹吉他。\t4", f"甲\t乙\t{label}"]
    write_task(tmp_path, "STS-B", lines_by_split={s: lines for s in CHINESE_SPLITS})
    if ok:
        pairs = read_chinese_task(tmp_path, "STS-B", "train")
        assert pairs.scores.tolist() == [4.0, float(label)]
    else:
        with pytest.raises(LabelScaleError, match=re.escape(
            f"STS-B.train.data:2: label {float(label):g} is outside the STS-B scale (0..5)"
        )):
            read_chinese_task(tmp_path, "STS-B", "train")


def test_several_bad_labels_are_counted(tmp_path):
    lines = ["a\tb\t0", "c\td\t3", "e\tf\t1", "g\th\t7"]
    write_task(tmp_path, "LCQMC", lines_by_split={s: lines for s in CHINESE_SPLITS})
    with pytest.raises(LabelScaleError, match=r":2: label 3 .*; 2 such lines"):
        read_chinese_task(tmp_path, "LCQMC", "valid")


def test_skip_drops_bad_labels_and_malformed_lines_with_a_count(tmp_path):
    lines = [
        "a\tb\t1",
        "only two\tfields",  # Su's loader skips this silently.
        "c\td\t2",  # off scale
        "e\tf\tnot a number",
        "g\th\t0",
        "",
        "i\tj\t9",  # off scale
    ]
    write_task(tmp_path, "ATEC", lines_by_split={s: lines for s in CHINESE_SPLITS})
    with pytest.raises(MalformedLineError, match=r"ATEC\.test\.data:2: expected 3"):
        read_chinese_task(tmp_path, "ATEC", "test")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pairs = read_chinese_task(tmp_path, "ATEC", "test", on_error="skip")
    assert pairs.sentences1 == ["a", "g"]
    assert pairs.sentences2 == ["b", "h"]
    assert pairs.scores.tolist() == [1.0, 0.0]
    assert pairs.skipped == [2, 3, 4, 7]
    messages = [str(w.message) for w in caught]
    assert any("skipped 2 malformed line(s)" in m and "[2, 4]" in m for m in messages)
    assert any("skipped 2 line(s) with a label outside the ATEC scale" in m
               and "[3, 7]" in m for m in messages)


def test_on_error_must_be_raise_or_skip(tmp_path):
    write_task(tmp_path, "BQ")
    with pytest.raises(ValueError, match="on_error"):
        read_chinese_task(tmp_path, "BQ", "test", on_error="ignore")


def test_crlf_and_byte_order_mark(tmp_path):
    folder = tmp_path / "PAWSX"
    folder.mkdir()
    for split in CHINESE_SPLITS:
        (folder / f"PAWSX.{split}.data").write_bytes(
            "\ufeff甲\t乙\t1\r\n丙\t丁\t0\r\n".encode("utf-8")
        )
    pairs = read_chinese_task(tmp_path, "PAWSX", "test")
    assert pairs.sentences1 == ["甲", "丙"] and pairs.scores.tolist() == [1.0, 0.0]


# --------------------------------------------------------------------------
# The real Chinese STS-B.


@pytest.mark.parametrize("split, rows", [("train", 5231), ("valid", 1458), ("test", 1361)])
def test_real_stsb(shared_data, split, rows):
    for data_dir in (shared_data, shared_data / "senteval_cn"):
        pairs = read_chinese_task(data_dir, "STS-B", split)
        assert len(pairs) == rows
        assert pairs.skipped == []
        assert set(np.unique(pairs.scores)) <= set(range(6))
        assert set(np.unique(pairs.scores)) == set(range(6))
    raw = read_pairs(shared_data / "senteval_cn" / "STS-B" / f"STS-B.{split}.data")
    assert pairs.sentences1 == raw.sentences1 and pairs.sentences2 == raw.sentences2
    np.testing.assert_array_equal(pairs.scores, raw.scores)


@pytest.mark.parametrize("split", CHINESE_SPLITS)
def test_bundled_stsb_is_the_shared_copy(shared_data, split):
    bundled = chinese_task_path(BUNDLED_CHINESE_STS, "STS-B", split)
    shared = chinese_task_path(shared_data, "STS-B", split)
    assert file_checksum(bundled) == file_checksum(shared)
    assert len(read_chinese_task(BUNDLED_CHINESE_STS, "STS-B", split)) == len(
        read_chinese_task(shared_data, "STS-B", split)
    )
