"""The TFDS builders prepare offline from a manual folder (real and small files)."""

import json
import shutil
import zipfile

import numpy as np
import pytest
import tensorflow_datasets as tfds

from kcse.data import CHINESE_TASKS
from kcse.data import LabelScaleError
from kcse.data import read_chinese_task
from kcse.data import read_english_sts
from kcse.data import read_stsb_multi_mt
from kcse.data.english import STS_YEARS
from kcse.data.english import sts_file_urls
from kcse.data.english import stsb_multi_mt_url
from kcse.data.tfds import BUILDERS
from kcse.data.tfds import ChineseSts
from kcse.data.tfds import NliZh
from kcse.data.tfds import Snli
from kcse.data.tfds import StsEn
from kcse.data.tfds import StsbMultiMt
from kcse.data.tfds.snli import SNLI_URL

tfds.disable_progress_bar()


def prepare(builder_class, tmp_path, manual_dir=None, config=None):
    kwargs = {"data_dir": str(tmp_path / "tfds")}
    if config is not None:
        kwargs["config"] = config
    builder = builder_class(**kwargs)
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(
            manual_dir=str(manual_dir) if manual_dir is not None else None
        )
    )
    return builder


def sizes(builder):
    return {name: split.num_examples for name, split in builder.info.splits.items()}


def examples(builder, split):
    return list(tfds.as_numpy(builder.as_dataset(split=split)))


def text(value):
    return value.decode("utf-8")


def assert_same_pairs(rows, pairs, label_key):
    assert [text(r["sentence1"]) for r in rows] == pairs.sentences1
    assert [text(r["sentence2"]) for r in rows] == pairs.sentences2
    np.testing.assert_allclose([r[label_key] for r in rows], pairs.scores, rtol=1e-6)


@pytest.fixture
def fake_downloads(monkeypatch):
    """dl_manager.download served from local files; records the URLs asked."""
    served, asked = {}, []

    def download(self, url_or_urls):
        def one(url):
            asked.append(url)
            if url not in served:
                raise ConnectionError(f"no network in tests ({url})")
            return served[url]

        if isinstance(url_or_urls, dict):
            return {key: one(url) for key, url in url_or_urls.items()}
        return one(url_or_urls)

    monkeypatch.setattr(tfds.download.DownloadManager, "download", download)
    return served, asked


# --------------------------------------------------------------------------
# chinese_sts


def test_chinese_sts_stsb_from_the_shared_folder(shared_data, tmp_path):
    builder = prepare(ChineseSts, tmp_path, shared_data, config="STS-B")
    assert builder.name == "chinese_sts"
    assert str(builder.info.version) == "1.0.0"
    assert sizes(builder) == {"train": 5231, "validation": 1458, "test": 1361}
    test = examples(builder, "test")
    # File order is kept; labels are float32 0..5.
    assert_same_pairs(test, read_chinese_task(shared_data, "STS-B", "test"), "label")
    assert test[0]["label"].dtype == np.float32
    assert builder.info.features["label"].dtype == np.float32
    assert "CNSD" in builder.info.citation and "kexue.fm/archives/8348" in builder.info.citation
    assert builder.info.description and builder.info.homepage
    # The senteval_cn folder itself also works as the manual folder.
    again = prepare(ChineseSts, tmp_path / "2", shared_data / "senteval_cn",
                    config="STS-B")
    assert sizes(again) == sizes(builder)


SMALL = {
    "ATEC": [("怎么更改花呗手机号码", "花呗怎么改手机号", 1), ("花呗冻结以后还能开通吗", "借呗怎么还款", 0)],
    "BQ": [("微信消费算吗", "还有多少钱没还", 0), ("什么时候可以到账", "多久能到账", 1),
           ("为什么借款失败", "借不了款", 1)],
    "LCQMC": [("喜欢打篮球的男生喜欢什么样的女生", "爱打篮球的男生喜欢什么样的女生", 1)],
    "PAWSX": [("他在佐治亚州出生，在亚特兰大长大。", "他在亚特兰大出生，在佐治亚州长大。", 0),
              ("当可以保持相当的流速时，结果很高。", "当可以保持可比较的流速时，结果很高。", 1)],
}


@pytest.mark.parametrize("task", ["ATEC", "BQ", "LCQMC", "PAWSX"])
def test_chinese_sts_binary_tasks_from_small_files(tmp_path, task):
    manual = tmp_path / "manual"
    folder = manual / "senteval_cn" / task
    folder.mkdir(parents=True)
    counts = {"train": 3, "valid": 2, "test": 1}
    for split, repeat in counts.items():
        lines = [f"{a}\t{b}\t{label}" for a, b, label in SMALL[task]] * repeat
        (folder / f"{task}.{split}.data").write_text("\n".join(lines) + "\n", encoding="utf-8")
    builder = prepare(ChineseSts, tmp_path, manual, config=task)
    n = len(SMALL[task])
    assert sizes(builder) == {"train": 3 * n, "validation": 2 * n, "test": n}
    test = examples(builder, "test")
    assert_same_pairs(test, read_chinese_task(manual, task, "test"), "label")
    assert {float(r["label"]) for r in examples(builder, "train")} <= {0.0, 1.0}


def test_chinese_sts_checks_labels_and_files(tmp_path):
    manual = tmp_path / "manual"
    (manual / "ATEC").mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (manual / "ATEC" / f"ATEC.{split}.data").write_text("a\tb\t1\nc\td\t3\n", encoding="utf-8")
    with pytest.raises(LabelScaleError, match=r"ATEC\.train\.data:2: label 3"):
        prepare(ChineseSts, tmp_path, manual, config="ATEC")
    # A task whose files are not in the manual folder: every path is named.
    with pytest.raises(FileNotFoundError, match=r"BQ\.train\.data.*data_cards/bq\.md"):
        prepare(ChineseSts, tmp_path, manual, config="BQ")


def test_chinese_sts_without_manual_folder_gives_the_instructions(tmp_path):
    with pytest.raises(AssertionError, match="senteval_cn"):
        prepare(ChineseSts, tmp_path, tmp_path / "nothing", config="LCQMC")


def test_chinese_sts_configs():
    names = [config.name for config in ChineseSts.BUILDER_CONFIGS]
    assert names == list(CHINESE_TASKS)


# --------------------------------------------------------------------------
# stsb_multi_mt


@pytest.mark.parametrize("language", ["en", "zh"])
def test_stsb_multi_mt_from_the_shared_folder(shared_data, tmp_path, language):
    builder = prepare(StsbMultiMt, tmp_path, shared_data, config=language)
    assert sizes(builder) == {"train": 5749, "validation": 1500, "test": 1379}
    assert_same_pairs(examples(builder, "validation"),
                      read_stsb_multi_mt(shared_data, language, "dev"), "score")
    assert "May, Philip" in builder.info.citation


def test_stsb_multi_mt_downloads_only_missing_files(shared_data, tmp_path, fake_downloads):
    served, asked = fake_downloads
    # German: dev and test are in the manual folder, train is downloaded.
    fake_train = tmp_path / "downloaded-train.csv"
    shutil.copy(shared_data / "stsb_multi_mt" / "stsb-en-train.csv", fake_train)
    served[stsb_multi_mt_url("de", "train")] = str(fake_train)
    builder = prepare(StsbMultiMt, tmp_path, shared_data, config="de")
    assert asked == ["https://raw.githubusercontent.com/PhilipMay/stsb-multi-mt/main/data/"
                     "stsb-de-train.csv"]
    assert sizes(builder) == {"train": 5749, "validation": 1500, "test": 1379}


def test_stsb_multi_mt_failed_download_says_how_to_go_offline(tmp_path, fake_downloads):
    with pytest.raises(FileNotFoundError, match=r"stsb-multi-mt fr train, dev, test.*"
                       r"no manual folder.*ConnectionError.*manual_dir"):
        prepare(StsbMultiMt, tmp_path, None, config="fr")


# --------------------------------------------------------------------------
# sts_en


@pytest.mark.parametrize("name", STS_YEARS + ("SICK",))
def test_sts_en_from_the_shared_folder(shared_data, tmp_path, name):
    builder = prepare(StsEn, tmp_path, shared_data, config=name)
    expected = read_english_sts(shared_data, "SICK-R" if name == "SICK" else name)
    assert sizes(builder) == {"test": len(expected)}
    rows = examples(builder, "test")
    assert_same_pairs(rows, expected, "score")
    corpora = [text(r["subcorpus"]) for r in rows]
    if name == "SICK":
        assert len(rows) == 4927 and set(corpora) == {"SICK"}
    else:
        assert corpora == [part for part, pairs in expected.parts.items() for _ in pairs.scores]


def test_sts_en_split_sizes(shared_data, tmp_path):
    got = {
        name: sizes(prepare(StsEn, tmp_path, shared_data, config=name))["test"]
        for name in STS_YEARS + ("SICK",)
    }
    assert got == {"STS12": 2358, "STS13": 1500, "STS14": 3750, "STS15": 3000,
                   "STS16": 1186, "SICK": 4927}


def test_sts_en_downloads_from_brmson_without_manual_folder(shared_data, tmp_path, fake_downloads):
    served, asked = fake_downloads
    for file, url in sts_file_urls("STS13").items():
        served[url] = str(shared_data / "sts_en" / "STS13" / file)
    sick = sts_file_urls("SICK-R")["SICK_test_annotated.txt"]
    served[sick] = str(shared_data / "sts_en" / "SICK" / "SICK_test_annotated.txt")
    builder = prepare(StsEn, tmp_path, None, config="STS13")
    assert sorted(asked) == sorted(sts_file_urls("STS13").values())
    assert sizes(builder) == {"test": 1500}
    assert_same_pairs(examples(builder, "test"), read_english_sts(shared_data, "STS13"), "score")
    assert sizes(prepare(StsEn, tmp_path, None, config="SICK")) == {"test": 4927}


# --------------------------------------------------------------------------
# nli_zh (CNSD) and snli


def nli_lines(rows):
    return "\n".join(
        json.dumps({"sentence1": a, "sentence2": b, "gold_label": g, "pairID": str(i)},
                   ensure_ascii=False)
        for i, (a, b, g) in enumerate(rows)
    ) + "\n"


CNSD = [
    ("一个骑马的人跳过一架坏掉的飞机。", "一个人正在为比赛训练他的马。", "neutral"),
    ("一个骑马的人跳过一架坏掉的飞机。", "一个人正在餐馆点煎蛋卷。", "contradiction"),
    ("一个骑马的人跳过一架坏掉的飞机。", "一个人在户外，骑着马。", "entailment"),
    ("孩子们对着镜头微笑和挥手", "他们在对父母微笑", "-"),
]
SNLI = [
    ("A person on a horse jumps over a broken down airplane.",
     "A person is training his horse for a competition.", "neutral"),
    ("A person on a horse jumps over a broken down airplane.",
     "A person is at a diner, ordering an omelette.", "contradiction"),
    ("Children smiling and waving at camera", "They are smiling at their parents", "-"),
    ("Children smiling and waving at camera", "There are children present", "entailment"),
]


@pytest.mark.parametrize("subfolder", ["cnsd", "nli_zh", "."])
def test_nli_zh_from_small_files(tmp_path, subfolder):
    folder = tmp_path / "manual" / subfolder
    folder.mkdir(parents=True, exist_ok=True)
    for split, repeat in (("train", 3), ("dev", 2), ("test", 1)):
        (folder / f"cnsd_snli_v1.0.{split}.jsonl").write_text(nli_lines(CNSD * repeat),
                                                             encoding="utf-8")
    builder = prepare(NliZh, tmp_path, tmp_path / "manual")
    assert builder.name == "nli_zh"
    assert sizes(builder) == {"train": 9, "validation": 6, "test": 3}  # "-" left out
    label = builder.info.features["label"]
    assert isinstance(label, tfds.features.ClassLabel)
    assert label.names == ["entailment", "neutral", "contradiction"]
    rows = examples(builder, "test")
    assert [int(r["label"]) for r in rows] == [1, 2, 0]
    assert text(rows[2]["sentence2"]) == "一个人在户外，骑着马。"


def test_nli_zh_missing_files(tmp_path):
    (tmp_path / "manual").mkdir()
    (tmp_path / "manual" / "cnsd_snli_v1.0.train.jsonl").write_text(nli_lines(CNSD))
    with pytest.raises(FileNotFoundError, match=r"(?s)cnsd_snli_v1\.0\.dev\.jsonl.*Baidu.*data_cards/nli_zh\.md"):
        prepare(NliZh, tmp_path, tmp_path / "manual")


def write_snli(folder):
    folder.mkdir(parents=True, exist_ok=True)
    for split, repeat in (("train", 4), ("dev", 2), ("test", 1)):
        (folder / f"snli_1.0_{split}.jsonl").write_text(nli_lines(SNLI * repeat))
    return folder


def check_snli(builder):
    assert builder.name == "snli" and str(builder.info.version) == "1.0.0"
    assert sizes(builder) == {"train": 12, "validation": 6, "test": 3}
    rows = examples(builder, "test")
    assert [int(r["label"]) for r in rows] == [1, 2, 0]
    assert text(rows[0]["sentence1"]).startswith("A person on a horse")


def test_snli_from_an_extracted_manual_folder(tmp_path):
    write_snli(tmp_path / "manual" / "snli_1.0")
    check_snli(prepare(Snli, tmp_path, tmp_path / "manual"))


def test_snli_from_the_zip_in_the_manual_folder(tmp_path):
    source = write_snli(tmp_path / "src" / "snli_1.0")
    (tmp_path / "manual").mkdir()
    with zipfile.ZipFile(tmp_path / "manual" / "snli_1.0.zip", "w") as archive:
        for file in sorted(source.iterdir()):
            archive.write(file, f"snli_1.0/{file.name}")
    check_snli(prepare(Snli, tmp_path, tmp_path / "manual"))


def test_snli_downloads_the_stanford_zip(tmp_path, fake_downloads):
    served, asked = fake_downloads
    source = write_snli(tmp_path / "src" / "snli_1.0")
    archive_path = tmp_path / "snli_1.0.zip"
    with zipfile.ZipFile(archive_path, "w") as archive:
        for file in sorted(source.iterdir()):
            archive.write(file, f"snli_1.0/{file.name}")
    served[SNLI_URL] = str(archive_path)
    check_snli(prepare(Snli, tmp_path, None))
    assert asked == ["https://nlp.stanford.edu/projects/snli/snli_1.0.zip"]


# --------------------------------------------------------------------------
# Registration


def test_registered_names_and_tfds_own_snli(shared_data, tmp_path):
    for name in ("chinese_sts", "stsb_multi_mt", "sts_en", "nli_zh"):
        assert name in tfds.list_builders(with_community_datasets=False)
    builder = tfds.builder("sts_en/STS13", data_dir=str(tmp_path / "tfds"))
    assert isinstance(builder, StsEn)
    # kcse's snli is not registered, so TFDS's own still loads by name.
    assert tfds.builder_cls("snli") is not Snli
    assert Snli.name == "snli"
    for builder_class in BUILDERS:
        assert str(builder_class.VERSION) == "1.0.0"
