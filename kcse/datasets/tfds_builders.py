"""TensorFlow Datasets builders for kcse's evaluation and training data.

| builder | configs | splits | source |
|---|---|---|---|
| `chinese_sts` | ATEC, BQ, LCQMC, PAWSX, STS-B | train, validation, test | manual (Su's senteval_cn) |
| `stsb_multi_mt` | de en es fr it ja nl pl pt ru zh | train, validation, test | manual folder, else GitHub |
| `sts_en` | STS12 … STS16, SICK | test | manual folder, else GitHub (brmson/dataset-sts) |
| `nli_zh` | (CNSD SNLI) | train, validation, test | manual |
| `snli` | | train, validation, test | manual folder, else nlp.stanford.edu |

Every builder prepares offline from a manual folder laid out like
`../shared/data` (`DownloadConfig(manual_dir=...)`); builders with a public
source download only the files the manual folder lacks. Reading goes through
the plain readers of `kcse.datasets` (same checks, same counts), and the
examples keep their file order (`disable_shuffling=True`).

`chinese_sts`, `stsb_multi_mt`, `sts_en` and `nli_zh` are registered with
TFDS when this module is imported (`tfds.builder("sts_en/STS12", ...)`);
TFDS has its own `snli`, so kcse's (`kcse.datasets.Snli`, no "-" labels,
`sentence1`/`sentence2` fields) is used through its class only.

Example:
```python
import tensorflow_datasets as tfds
import kcse.datasets

builder = kcse.datasets.ChineseSts(config="STS-B", data_dir="/tmp/tfds")
builder.download_and_prepare(
    download_config=tfds.download.DownloadConfig(manual_dir="../shared/data"))
test = builder.as_dataset(split="test")  # sentence1, sentence2, label
```
"""

import dataclasses
import inspect
import os
import pathlib
import textwrap

import numpy as np
import tensorflow_datasets as tfds
from etils import epath

from kcse.datasets import chinese
from kcse.datasets import english
from kcse.datasets import nli

VERSION = tfds.core.Version("1.0.0")
RELEASE_NOTES = {"1.0.0": "First release."}

_SPLITS = {"train": "train", "validation": "valid", "test": "test"}


class _Builder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Base of kcse's builders.

    `code_path` is the builder's source file. TFDS 4.9.10's own lookup
    touches `importlib_resources`, which it only declares for Python < 3.9
    (tensorflow/datasets#11212), so builders outside TFDS fail without it.
    """

    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls):
        return epath.Path(inspect.getfile(cls))


def _manual_dir_or_none(dl_manager):
    """The manual folder if one was given and is not empty, else None."""
    try:
        return pathlib.Path(os.fspath(dl_manager.manual_dir))
    except AssertionError:
        return None


def _local_file(root, candidates):
    if root is None:
        return None
    for candidate in candidates:
        if (root / candidate).is_file():
            return root / candidate
    return None


def _download(dl_manager, urls, root, what):
    """dl_manager.download(urls), with an error that says how to go offline."""
    try:
        return dl_manager.download(urls)
    except Exception as error:  # noqa: BLE001 (any network/IO failure)
        where = f"the manual folder {root}" if root else "no manual folder was given"
        raise FileNotFoundError(
            f"{what}: not found locally ({where}) and the download failed "
            f"({type(error).__name__}: {error}). To prepare offline, put the "
            f"files in the manual folder (DownloadConfig(manual_dir=...)) in "
            f"the layout of ../shared/data."
        ) from error


def _pair_features(label_feature, extra=None):
    features = {
        "sentence1": tfds.features.Text(),
        "sentence2": tfds.features.Text(),
    }
    features.update(label_feature)
    features.update(extra or {})
    return tfds.features.FeaturesDict(features)


def _similarity_examples(pairs, label_key, extra=None):
    for index, (s1, s2, score) in enumerate(
        zip(pairs.sentences1, pairs.sentences2, pairs.scores)
    ):
        example = {"sentence1": s1, "sentence2": s2, label_key: np.float32(score)}
        if extra:
            example.update(extra(index))
        yield index, example


def _nli_examples(pairs):
    for index, (s1, s2, label) in enumerate(
        zip(pairs.sentences1, pairs.sentences2, pairs.labels)
    ):
        yield index, {"sentence1": s1, "sentence2": s2, "label": int(label)}


# ----------------------------------------------------------------------------
# chinese_sts

_SU_CITATION = """\
@misc{su2021simcse_zh,
  author = {Su, Jianlin},
  title = {SimCSE in Chinese: an evaluation (Chinese title: 中文任务还是SOTA吗？我们给SimCSE补充了一些实验)},
  year = {2021},
  howpublished = {\\url{https://kexue.fm/archives/8348}},
  note = {Code and data bundle: https://github.com/bojone/SimCSE}
}"""

_TASK_CITATIONS = {
    "ATEC": """\
@misc{atec2018,
  title = {ATEC 2018 NLP competition: question matching (Ant Financial)},
  year = {2018},
  howpublished = {\\url{https://github.com/IceFlameWorm/NLP_Datasets/tree/master/ATEC}}
}""",
    "BQ": """\
@inproceedings{chen2018bq,
  title = {The {BQ} Corpus: A Large-scale Domain-specific {C}hinese Corpus For Sentence Semantic Equivalence Identification},
  author = {Chen, Jing and Chen, Qingcai and Liu, Xin and Yang, Haijun and Lu, Daohe and Tang, Buzhou},
  booktitle = {Proceedings of EMNLP},
  year = {2018}
}""",
    "LCQMC": """\
@inproceedings{liu2018lcqmc,
  title = {{LCQMC}: A Large-scale {C}hinese Question Matching Corpus},
  author = {Liu, Xin and Chen, Qingcai and Deng, Chong and Zeng, Huajun and Chen, Jing and Li, Dongfang and Tang, Buzhou},
  booktitle = {Proceedings of COLING},
  year = {2018}
}""",
    "PAWSX": """\
@inproceedings{pawsx2019emnlp,
  title = {{PAWS-X}: A Cross-lingual Adversarial Dataset for Paraphrase Identification},
  author = {Yang, Yinfei and Zhang, Yuan and Tar, Chris and Baldridge, Jason},
  booktitle = {Proc. of EMNLP},
  year = {2019}
}""",
    "STS-B": """\
@misc{cnsd,
  title = {{CNSD}: A large-scale Chinese Nature language inference and Semantic similarity calculation Dataset},
  howpublished = {\\url{https://github.com/pluto-junzeng/CNSD}}
}""",
}

_TASK_DESCRIPTIONS = {
    "ATEC": "ATEC (Ant Financial customer-service question pairs), labels 0/1.",
    "BQ": "BQ Corpus (bank customer-service question pairs), labels 0/1.",
    "LCQMC": "LCQMC (Baidu Zhidao question pairs), labels 0/1.",
    "PAWSX": "PAWS-X Chinese (adversarial paraphrase pairs), labels 0/1.",
    "STS-B": "Chinese STS-B (CNSD's translation of the STS Benchmark), labels 0..5.",
}

_CHINESE_LICENSES = {
    "ATEC": "ATEC competition data; no licence published (research use).",
    "BQ": "BQ Corpus: research use, by application to HIT Shenzhen.",
    "LCQMC": "LCQMC: research use, by application to HIT Shenzhen.",
    "PAWSX": "PAWS-X: free for any use; acknowledge Google LLC as the source.",
    "STS-B": "CNSD: academic research only, no commercial use.",
}


@dataclasses.dataclass(eq=False)
class ChineseStsConfig(tfds.core.BuilderConfig):
    """One of Su's Chinese tasks."""

    task: str = ""
    data_card: str = ""


class ChineseSts(_Builder):
    """Su Jianlin's Chinese sentence-similarity tasks (senteval_cn layout).

    Example:
    ```python
    builder = ChineseSts(config="ATEC", data_dir="/tmp/tfds")
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
        manual_dir="~/senteval_cn"))  # holds ATEC/ATEC.{train,valid,test}.data
    ```
    """

    VERSION = VERSION
    RELEASE_NOTES = RELEASE_NOTES
    DATA_CARD = "chinese_sts.md"
    BUILDER_CONFIGS = [
        ChineseStsConfig(
            name=task,
            description=_TASK_DESCRIPTIONS[task],
            task=task,
            data_card=chinese.DATA_CARDS[task],
        )
        for task in chinese.CHINESE_TASKS
    ]
    MANUAL_DOWNLOAD_INSTRUCTIONS = textwrap.dedent("""\
        These files have no stable public URL. Download Su Jianlin's senteval_cn
        bundle (link in the README of https://github.com/bojone/SimCSE) or the
        original releases (data_cards/chinese_sts.md), and put them in the manual
        folder as

            <manual_dir>/senteval_cn/<TASK>/<TASK>.{train,valid,test}.data

        (or <manual_dir>/<TASK>/...), TASK in ATEC, BQ, LCQMC, PAWSX, STS-B:
        UTF-8, one `sentence1<TAB>sentence2<TAB>label` pair a line.
        """)

    def _info(self):
        task = self.builder_config.task
        return tfds.core.DatasetInfo(
            builder=self,
            description=(
                "The five Chinese tasks of Su Jianlin's SimCSE / BERT-whitening "
                "comparison, in the layout of his senteval_cn bundle. "
                + _TASK_DESCRIPTIONS[task]
                + f" Data card: data_cards/{self.builder_config.data_card}."
            ),
            features=_pair_features({"label": np.float32}),
            homepage=chinese.SOURCE_URLS[task],
            citation=_TASK_CITATIONS[task] + "\n" + _SU_CITATION,
            license=_CHINESE_LICENSES[task],
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        root = pathlib.Path(os.fspath(dl_manager.manual_dir))
        task = self.builder_config.task
        for split in chinese.CHINESE_SPLITS:  # All files, before any is read.
            chinese.chinese_task_path(root, task, split)
        return {
            name: self._generate_examples(root, split)
            for name, split in _SPLITS.items()
        }

    def _generate_examples(self, root, split):
        pairs = chinese.read_chinese_task(root, self.builder_config.task, split)
        yield from _similarity_examples(pairs, "label")


# ----------------------------------------------------------------------------
# stsb_multi_mt

_STSB_CITATION = """\
@misc{may2021stsbmultimt,
  title = {Machine translated multilingual {STS} benchmark dataset},
  author = {May, Philip},
  year = {2021},
  howpublished = {\\url{https://github.com/PhilipMay/stsb-multi-mt}}
}
@inproceedings{cer-etal-2017-semeval,
  title = {{S}em{E}val-2017 Task 1: Semantic Textual Similarity Multilingual and Crosslingual Focused Evaluation},
  author = {Cer, Daniel and Diab, Mona and Agirre, Eneko and Lopez-Gazpio, I{\\~n}igo and Specia, Lucia},
  booktitle = {Proceedings of the 11th International Workshop on Semantic Evaluation (SemEval-2017)},
  year = {2017}
}"""

_LANGUAGE_NAMES = {
    "de": "German", "en": "English (the original)", "es": "Spanish",
    "fr": "French", "it": "Italian", "ja": "Japanese", "nl": "Dutch",
    "pl": "Polish", "pt": "Portuguese", "ru": "Russian",
    "zh": "Chinese (simplified)",
}


class StsbMultiMt(_Builder):
    """STS Benchmark in English and DeepL translations (PhilipMay/stsb-multi-mt).

    Files missing from the manual folder are downloaded from GitHub.

    Example:
    ```python
    builder = StsbMultiMt(config="en", data_dir="/tmp/tfds")
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
        manual_dir="../shared/data"))  # stsb_multi_mt/stsb-en-*.csv inside
    ```
    """

    VERSION = VERSION
    RELEASE_NOTES = RELEASE_NOTES
    DATA_CARD = "stsb_multi_mt.md"
    BUILDER_CONFIGS = [
        tfds.core.BuilderConfig(
            name=language,
            description=f"STS Benchmark, {_LANGUAGE_NAMES[language]}.",
        )
        for language in english.STSB_MULTI_MT_LANGUAGES
    ]
    MANUAL_DOWNLOAD_INSTRUCTIONS = textwrap.dedent("""\
        Optional (the files are downloaded from GitHub otherwise): put the CSVs
        of https://github.com/PhilipMay/stsb-multi-mt/tree/main/data in

            <manual_dir>/stsb_multi_mt/stsb-<language>-{train,dev,test}.csv

        (or directly in <manual_dir>/).
        """)

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description=(
                "The STS Benchmark (English sentence pairs scored 0-5) and its "
                "machine translations (DeepL) by Philip May. "
                + self.builder_config.description
                + " Data card: data_cards/stsb_multi_mt.md."
            ),
            features=_pair_features({"score": np.float32}),
            homepage=english.STSB_MULTI_MT_SOURCE,
            citation=_STSB_CITATION,
            license=(
                "Same as the STS Benchmark: scores CC BY-SA 4.0; the text of each "
                "source corpus has its own licence (see the repository's LICENSE)."
            ),
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        language = self.builder_config.name
        root = _manual_dir_or_none(dl_manager)
        files, missing = {}, {}
        for split in english.STSB_MULTI_MT_SPLITS:
            name = f"stsb-{language}-{split}.csv"
            files[split] = _local_file(root, [f"stsb_multi_mt/{name}", name])
            if files[split] is None:
                missing[split] = english.stsb_multi_mt_url(language, split)
        if missing:
            files.update(
                _download(dl_manager, missing, root, f"stsb-multi-mt {language} "
                          f"{', '.join(missing)}")
            )
        return {
            name: self._generate_examples(files["dev" if split == "valid" else split])
            for name, split in _SPLITS.items()
        }

    def _generate_examples(self, path):
        yield from _similarity_examples(english.read_stsb_csv(path), "score")


# ----------------------------------------------------------------------------
# sts_en

_STS_CITATIONS = {
    "STS12": """\
@inproceedings{agirre-etal-2012-semeval,
  title = {{S}em{E}val-2012 Task 6: A Pilot on Semantic Textual Similarity},
  author = {Agirre, Eneko and Cer, Daniel and Diab, Mona and Gonzalez-Agirre, Aitor},
  booktitle = {*SEM 2012},
  year = {2012}
}""",
    "STS13": """\
@inproceedings{agirre-etal-2013-sem,
  title = {*{SEM} 2013 shared task: Semantic Textual Similarity},
  author = {Agirre, Eneko and Cer, Daniel and Diab, Mona and Gonzalez-Agirre, Aitor and Guo, Weiwei},
  booktitle = {*SEM 2013},
  year = {2013}
}""",
    "STS14": """\
@inproceedings{agirre-etal-2014-semeval,
  title = {{S}em{E}val-2014 Task 10: Multilingual Semantic Textual Similarity},
  author = {Agirre, Eneko and others},
  booktitle = {SemEval 2014},
  year = {2014}
}""",
    "STS15": """\
@inproceedings{agirre-etal-2015-semeval,
  title = {{S}em{E}val-2015 Task 2: Semantic Textual Similarity, {E}nglish, {S}panish and Pilot on Interpretability},
  author = {Agirre, Eneko and others},
  booktitle = {SemEval 2015},
  year = {2015}
}""",
    "STS16": """\
@inproceedings{agirre-etal-2016-semeval,
  title = {{S}em{E}val-2016 Task 1: Semantic Textual Similarity, Monolingual and Cross-Lingual Evaluation},
  author = {Agirre, Eneko and others},
  booktitle = {SemEval 2016},
  year = {2016}
}""",
    "SICK": """\
@inproceedings{marelli-etal-2014-sick,
  title = {A {SICK} cure for the evaluation of compositional distributional semantic models},
  author = {Marelli, Marco and Menini, Stefano and Baroni, Marco and Bentivogli, Luisa and Bernardi, Raffaella and Zamparelli, Roberto},
  booktitle = {Proceedings of LREC 2014},
  year = {2014}
}""",
}


class StsEn(_Builder):
    """English SemEval STS 2012–2016 test sets and SICK-R test.

    STS12–16: every sub-corpus of the year pooled into one `test` split (the
    "all" setting of princeton-nlp/SimCSE), pairs without gold left out, with
    the sub-corpus in `subcorpus`. SICK: the 4,927 test pairs, relatedness
    1–5. Files missing from the manual folder are downloaded from
    brmson/dataset-sts on GitHub.

    Example:
    ```python
    builder = StsEn(config="STS16", data_dir="/tmp/tfds")
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
        manual_dir="../shared/data"))  # sts_en/STS16/*.test.tsv inside
    ```
    """

    VERSION = VERSION
    RELEASE_NOTES = RELEASE_NOTES
    DATA_CARD = "sts_en.md"
    BUILDER_CONFIGS = [
        tfds.core.BuilderConfig(
            name=name,
            description=(
                f"SemEval {name} English test sub-corpora, pooled."
                if name != "SICK" else "SICK test, relatedness 1-5 (SICK-R)."
            ),
        )
        for name in english.STS_YEARS + ("SICK",)
    ]
    MANUAL_DOWNLOAD_INSTRUCTIONS = textwrap.dedent("""\
        Optional (the files are downloaded from GitHub otherwise): put the
        brmson/dataset-sts files (https://github.com/brmson/dataset-sts,
        data/sts/semeval-sts/<year>/*.test.tsv and data/sts/sick2014/) in

            <manual_dir>/sts_en/STS12 ... STS16/<sub-corpus>.test.tsv
            <manual_dir>/sts_en/SICK/SICK_test_annotated.txt

        (or <manual_dir>/STS12/..., <manual_dir>/SICK/...).
        """)

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description=(
                "English STS evaluation data as used by SentEval and SimCSE: "
                + self.builder_config.description
                + " Scores 0-5 (SICK 1-5). Data card: data_cards/sts_en.md."
            ),
            features=_pair_features(
                {"score": np.float32}, {"subcorpus": tfds.features.Text()}
            ),
            homepage=english.STS_EN_SOURCE,
            citation=_STS_CITATIONS[self.builder_config.name],
            license=(
                "CC BY-NC-SA 3.0 (SICK)" if self.builder_config.name == "SICK"
                else "Per sub-corpus licences of the SemEval releases "
                "(data_cards/sts_en.md)."
            ),
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        name = self.builder_config.name
        root = _manual_dir_or_none(dl_manager)
        if name == "SICK":
            file = english.SICK_FILES["test"]
            path = _local_file(root, [f"sts_en/SICK/{file}", f"SICK/{file}", file])
            if path is None:
                path = _download(
                    dl_manager, english.sts_file_urls("SICK-R")[file], root, "SICK test"
                )
            return {"test": self._generate_examples(sick=path)}
        files = {}
        for folder in ("sts_en/" + name, name):
            if root is not None and sorted((root / folder).glob("*.test.tsv")):
                files = {p.name: p for p in sorted((root / folder).glob("*.test.tsv"))}
                break
        if not files:
            files = _download(dl_manager, english.sts_file_urls(name), root, name)
        return {"test": self._generate_examples(sts=files)}

    def _generate_examples(self, sts=None, sick=None):
        if sick is not None:
            pairs = english.read_sick_file(sick)
            yield from _similarity_examples(
                pairs, "score", lambda i: {"subcorpus": "SICK"}
            )
            return
        names = sorted(sts)
        pooled = english.read_sts_files(
            [sts[n] for n in names],
            names=[n.removesuffix(".tsv").removesuffix(".test") for n in names],
        )
        corpus = [name for name, part in pooled.parts.items() for _ in range(len(part))]
        yield from _similarity_examples(
            pooled, "score", lambda i: {"subcorpus": corpus[i]}
        )


# ----------------------------------------------------------------------------
# NLI: nli_zh (CNSD) and snli

_SNLI_CITATION = """\
@inproceedings{bowman-etal-2015-large,
  title = {A large annotated corpus for learning natural language inference},
  author = {Bowman, Samuel R. and Angeli, Gabor and Potts, Christopher and Manning, Christopher D.},
  booktitle = {Proceedings of the 2015 Conference on Empirical Methods in Natural Language Processing},
  year = {2015}
}"""

SNLI_URL = "https://nlp.stanford.edu/projects/snli/snli_1.0.zip"
CNSD_FILES = {
    "train": "cnsd_snli_v1.0.train.jsonl",
    "validation": "cnsd_snli_v1.0.dev.jsonl",
    "test": "cnsd_snli_v1.0.test.jsonl",
}
SNLI_FILES = {
    "train": "snli_1.0_train.jsonl",
    "validation": "snli_1.0_dev.jsonl",
    "test": "snli_1.0_test.jsonl",
}


def _nli_features():
    return _pair_features({"label": tfds.features.ClassLabel(names=list(nli.NLI_LABELS))})


class NliZh(_Builder):
    """CNSD's Chinese SNLI (machine-translated SNLI), "-" labels left out.

    Example:
    ```python
    builder = NliZh(data_dir="/tmp/tfds")
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
        manual_dir="~/nli"))  # cnsd/cnsd_snli_v1.0.{train,dev,test}.jsonl inside
    ```
    """

    VERSION = VERSION
    RELEASE_NOTES = RELEASE_NOTES
    DATA_CARD = "nli_zh.md"
    MANUAL_DOWNLOAD_INSTRUCTIONS = textwrap.dedent("""\
        CNSD has no stable public URL (Baidu Pan link in the README of
        https://github.com/pluto-junzeng/CNSD; data_cards/nli_zh.md of kcse).
        Put its Chinese-SNLI files in

            <manual_dir>/cnsd/cnsd_snli_v1.0.{train,dev,test}.jsonl

        (or <manual_dir>/nli_zh/... or directly in <manual_dir>/).
        """)

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description=(
                "Chinese-SNLI of CNSD (pluto-junzeng/CNSD): SNLI translated into "
                "Chinese; premise sentence1, hypothesis sentence2, label "
                "entailment/neutral/contradiction. Pairs without a gold label "
                "are left out. Data card: data_cards/nli_zh.md."
            ),
            features=_nli_features(),
            homepage="https://github.com/pluto-junzeng/CNSD",
            citation=_TASK_CITATIONS["STS-B"] + "\n" + _SNLI_CITATION,
            license="CNSD: academic research only, no commercial use.",
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        root = pathlib.Path(os.fspath(dl_manager.manual_dir))
        paths = {}
        for split, file in CNSD_FILES.items():
            candidates = [f"cnsd/{file}", f"nli_zh/{file}", file]
            paths[split] = _local_file(root, candidates)
            if paths[split] is None:
                raise FileNotFoundError(
                    f"CNSD {split} file not found: no file at "
                    f"{' or '.join(str(root / c) for c in candidates)}.\n"
                    + self.MANUAL_DOWNLOAD_INSTRUCTIONS
                )
        return {split: self._generate_examples(path) for split, path in paths.items()}

    def _generate_examples(self, path):
        yield from _nli_examples(nli.read_nli(path))


class Snli(_Builder, skip_registration=True):
    """SNLI 1.0 from its JSON-lines files, "-" gold labels left out.

    Not registered with TFDS (TFDS has its own `snli`): use the class.

    Example:
    ```python
    builder = Snli(data_dir="/tmp/tfds")
    builder.download_and_prepare()  # downloads snli_1.0.zip from nlp.stanford.edu
    ```
    """

    name = "snli"
    VERSION = VERSION
    RELEASE_NOTES = RELEASE_NOTES
    DATA_CARD = "snli.md"
    MANUAL_DOWNLOAD_INSTRUCTIONS = textwrap.dedent(f"""\
        Optional (downloaded otherwise): put {SNLI_URL} (or its extracted
        folder) in the manual folder:

            <manual_dir>/snli_1.0.zip, or
            <manual_dir>/snli_1.0/snli_1.0_{{train,dev,test}}.jsonl

        (also accepted under <manual_dir>/snli/, or the .jsonl files directly).
        """)

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description=(
                "The Stanford Natural Language Inference corpus 1.0 "
                "(premise sentence1, hypothesis sentence2, label "
                "entailment/neutral/contradiction); pairs whose gold label is "
                "'-' are left out. Data card: data_cards/snli.md."
            ),
            features=_nli_features(),
            homepage="https://nlp.stanford.edu/projects/snli/",
            citation=_SNLI_CITATION,
            license="CC BY-SA 4.0",
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        root = _manual_dir_or_none(dl_manager)
        folder = None
        if root is not None:
            for candidate in ("snli_1.0", "snli/snli_1.0", "snli", "."):
                if all((root / candidate / f).is_file() for f in SNLI_FILES.values()):
                    folder = root / candidate
                    break
            if folder is None:
                archive = _local_file(root, ["snli_1.0.zip", "snli/snli_1.0.zip"])
                if archive is not None:
                    folder = pathlib.Path(os.fspath(dl_manager.extract(archive))) / "snli_1.0"
        if folder is None:
            archive = _download(dl_manager, SNLI_URL, root, "SNLI 1.0")
            folder = pathlib.Path(os.fspath(dl_manager.extract(archive))) / "snli_1.0"
        return {
            split: self._generate_examples(folder / file)
            for split, file in SNLI_FILES.items()
        }

    def _generate_examples(self, path):
        yield from _nli_examples(nli.read_nli(path))


BUILDERS = (ChineseSts, StsbMultiMt, StsEn, NliZh, Snli)
