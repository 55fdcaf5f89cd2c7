"""English STS evaluation sets (SemEval STS12–16, STS-B, SICK-R) and the
multilingual STS Benchmark (stsb-multi-mt).

Files are looked up in a folder laid out like `../shared/data`:

    sts_en/STS12 … STS16/<sub-corpus>.test.tsv   (brmson/dataset-sts layout)
    sts_en/SICK/SICK_test_annotated.txt          (SICK_train.txt, SICK_trial.txt)
    stsb_multi_mt/stsb-<language>-<split>.csv    (PhilipMay/stsb-multi-mt)

or as SentEval's download script lays out its `data/downstream` folder
(`kcse.data.senteval_sts`), which English STS is also read from:

    STS/STS12-en-test … STS16-en-test/STS.input.<sub-corpus>.txt, STS.gs.<sub-corpus>.txt
    STS/STSBenchmark/sts-<split>.csv
    SICK/SICK_test_annotated.txt

Data cards: `data_cards/sts_en.md`, `data_cards/stsb_multi_mt.md`.
"""

import dataclasses
import os
import pathlib

import numpy as np

from kcse.data import SentencePairs
from kcse.data import read_pairs
from kcse.data import _labels
from kcse.data import _paths
from kcse.data.senteval_sts import read_senteval_year
from kcse.data.senteval_sts import read_stsbenchmark_file
from kcse.data.senteval_sts import senteval_candidates
from kcse.data.senteval_sts import senteval_year_folders

STS_YEARS = ("STS12", "STS13", "STS14", "STS15", "STS16")
ENGLISH_STS = STS_YEARS + ("STS-B", "SICK-R")
STSB_MULTI_MT_LANGUAGES = (
    "de", "en", "es", "fr", "it", "ja", "nl", "pl", "pt", "ru", "zh",
)
STSB_MULTI_MT_SPLITS = ("train", "dev", "test")

# Sub-corpora of each year in brmson/dataset-sts (SemEval test sets with the
# gold scores pasted in). STS12 MSRvid and STS13 SMT are not redistributed
# there (licences); data_cards/sts_en.md.
STS_SUBCORPORA = {
    "STS12": ("MSRpar", "OnWN", "SMTeuroparl", "SMTnews"),
    "STS13": ("FNWN", "OnWN", "headlines"),
    "STS14": ("OnWN", "deft-forum", "deft-news", "headlines", "images", "tweet-news"),
    "STS15": ("answers-forums", "answers-students", "belief", "headlines", "images"),
    "STS16": ("answer-answer", "headlines", "plagiarism", "postediting", "question-question"),
}
SICK_FILES = {
    "train": "SICK_train.txt",
    "dev": "SICK_trial.txt",
    "test": "SICK_test_annotated.txt",
}

BRMSON_URL = "https://raw.githubusercontent.com/brmson/dataset-sts/master/data/sts/"
STSB_MULTI_MT_URL = (
    "https://raw.githubusercontent.com/PhilipMay/stsb-multi-mt/main/data/"
    "stsb-{language}-{split}.csv"
)
STS_EN_SOURCE = "https://github.com/brmson/dataset-sts"
STSB_MULTI_MT_SOURCE = "https://github.com/PhilipMay/stsb-multi-mt"

_SPLIT_ALIASES = {"valid": "dev", "validation": "dev", "trial": "dev"}


@dataclasses.dataclass
class PooledSentencePairs(SentencePairs):
    """Pairs of several files read as one set (SimCSE's "all" setting).

    Attributes:
        parts: sub-corpus name (file name without `.test.tsv`) → its own
            `SentencePairs`, in the pooled order; for per-corpus scores
            (SentEval's "wmean").
        skipped: `(sub-corpus name, line number)` of every line not read
            (pairs without a gold score, malformed lines skipped).

    Example:
    ```python
    import pathlib

    import kcse

    pathlib.Path("STS12").mkdir()
    pathlib.Path("STS12/MSRpar.test.tsv").write_text(
        "4.0\\tA cat.\\tA cat sits.\\n", encoding="utf-8")
    pathlib.Path("STS12/OnWN.test.tsv").write_text(
        "1.5\\ta fish\\ta bird\\n2.0\\tto run\\tto walk\\n", encoding="utf-8")
    pooled = kcse.data.read_english_sts(".", "STS12")
    isinstance(pooled, kcse.data.PooledSentencePairs)  # True
    pooled.scores.tolist()  # [4.0, 1.5, 2.0]
    {name: len(part) for name, part in pooled.parts.items()}  # {'MSRpar': 1, 'OnWN': 2}
    ```
    """

    parts: dict = dataclasses.field(default_factory=dict)


def sts_file_urls(name):
    """Public download URL of each file of an English STS set.

    Returns:
        dict file name → URL (brmson/dataset-sts on GitHub).

    Example:
    ```python
    from kcse.data.english import sts_file_urls

    sts_file_urls("STS13")["FNWN.test.tsv"]
    # 'https://raw.githubusercontent.com/brmson/dataset-sts/master/data/sts/semeval-sts/2013/FNWN.test.tsv'
    ```
    """
    name = english_sts_name(name)
    if name == "SICK-R":
        return {file: BRMSON_URL + "sick2014/" + file for file in SICK_FILES.values()}
    if name == "STS-B":
        return {
            f"stsb-en-{split}.csv": stsb_multi_mt_url("en", split)
            for split in STSB_MULTI_MT_SPLITS
        }
    year = "20" + name[3:]
    return {
        f"{part}.test.tsv": f"{BRMSON_URL}semeval-sts/{year}/{part}.test.tsv"
        for part in STS_SUBCORPORA[name]
    }


def stsb_task(language):
    """The task name of a stsb-multi-mt language in results: `STS-B-de`."""
    return f"STS-B-{language}"


def stsb_multi_mt_url(language, split):
    """GitHub URL of one stsb-multi-mt CSV (`"de"`, `"dev"` → stsb-de-dev.csv)."""
    language = stsb_language(language)
    split = _paths.canonical_name(split, STSB_MULTI_MT_SPLITS, _SPLIT_ALIASES, "split")
    return STSB_MULTI_MT_URL.format(language=language, split=split)


def english_sts_name(name):
    """Canonical set name (`"sts12"` → `"STS12"`, `"stsb"` → `"STS-B"`,
    `"SICK"` → `"SICK-R"`); ValueError listing the valid ones otherwise."""
    aliases = {"SICK": "SICK-R", "STSBenchmark": "STS-B"}
    return _paths.canonical_name(name, ENGLISH_STS, aliases, what="English STS set")


def stsb_language(language):
    """Canonical stsb-multi-mt language code; ValueError listing the 11."""
    return _paths.canonical_name(
        language, STSB_MULTI_MT_LANGUAGES, what="stsb-multi-mt language"
    )


def read_english_sts(data_dir, name, split="test", on_error="raise"):
    """Reads an English STS evaluation set.

    - `"STS12"` … `"STS16"`: every `sts_en/STSxx/*.test.tsv` sub-corpus file,
      else every sub-corpus of SentEval's `STS/STSxx-en-test/` (an
      `STS.input.<corpus>.txt` with its `STS.gs.<corpus>.txt`), whichever
      sub-corpora are there, concatenated in name order: the pooled "all"
      setting that princeton-nlp/SimCSE reports, with each sub-corpus in
      `parts` for SentEval's mean and wmean. Pairs without a gold score
      are left out. Only `split="test"` exists.
    - `"STS-B"`: `stsb_multi_mt/stsb-en-<split>.csv`, else SentEval's
      `STS/STSBenchmark/sts-<split>.csv`; split `"train"`, `"dev"` or
      `"test"` (default).
    - `"SICK-R"`: `sts_en/SICK/SICK_test_annotated.txt` (relatedness 1–5),
      or SentEval's `SICK/`; `"train"` / `"dev"` read `SICK_train.txt` /
      `SICK_trial.txt` when present.

    SentEval's folders are looked for in `data_dir`, `data_dir/downstream`
    and `data_dir/data/downstream` (SentEval's `data` folder).

    Args:
        data_dir: folder laid out like `../shared/data` (for STS12–16 and
            SICK also the `sts_en` folder itself).
        name: one of `ENGLISH_STS` (case, "-" and "_" ignored; "SICK" works).
        split: see above.
        on_error: `"raise"` or `"skip"`, as in `kcse.data.read_pairs`;
            scores off the 0–5 (SICK 1–5) scale count as malformed.

    Returns:
        `PooledSentencePairs` for STS12–16 (with `parts`), otherwise
        `SentencePairs`.

    Raises:
        ValueError: unknown name or split (lists the valid ones).
        FileNotFoundError: names the paths tried and the data card.

    Example:
    ```python
    import pathlib

    import kcse

    # A real data_dir holds the files of data_cards/sts_en.md; here two tiny
    # STS13 sub-corpora in that layout.
    folder = pathlib.Path("data/sts_en/STS13")
    folder.mkdir(parents=True)
    (folder / "FNWN.test.tsv").write_text(
        "3.8\\tA man plays.\\tA man is playing.\\n", encoding="utf-8")
    (folder / "headlines.test.tsv").write_text(
        "0.4\\tStocks fall.\\tIt rains.\\n\\tNo gold score.\\tLeft out.\\n", encoding="utf-8")
    sts13 = kcse.data.read_english_sts("data", "STS13")
    len(sts13), list(sts13.parts)  # (2, ['FNWN', 'headlines'])
    sts13.skipped  # [('headlines', 2)]
    ```
    """
    name = english_sts_name(name)
    data_dir = pathlib.Path(os.fspath(data_dir))
    if name == "STS-B":
        return read_stsb_english(data_dir, split, on_error)
    if name == "SICK-R":
        split = _paths.canonical_name(split, tuple(SICK_FILES), _SPLIT_ALIASES, "split")
        file = SICK_FILES[split]
        path = _paths.find_file(
            data_dir,
            [f"sts_en/SICK/{file}", *senteval_candidates(f"SICK/{file}"), file],
            what=f"SICK {split} file",
            card="sts_en.md",
            source_url=STS_EN_SOURCE,
        )
        return read_sick_file(path, on_error=on_error)
    if split != "test":
        raise ValueError(f"{name} has only a 'test' split; got split={split!r}.")
    folders = [data_dir / "sts_en" / name, data_dir / name]
    for folder in folders:
        files = sorted(folder.glob("*.test.tsv"))
        if files:
            return read_sts_files(files, on_error=on_error)
    senteval = senteval_year_folders(data_dir, name)
    for folder in senteval:
        parts = read_senteval_year(folder, on_error)
        if parts:
            return pooled_pairs([(part, checked_sts_scale(pairs, on_error))
                                 for part, pairs in parts], folder)
    tried = " or ".join(f"{folder}/*.test.tsv" for folder in folders)
    tried += " or " + " or ".join(f"{folder}/STS.input.*.txt" for folder in senteval)
    raise FileNotFoundError(
        f"{name} not found: no file at {tried}. Download it as the data card "
        f"says ({_paths.card_hint('sts_en.md', STS_EN_SOURCE)})."
    )


def read_stsb_english(data_dir, split, on_error):
    """English STS-B: stsb-multi-mt's `en` CSV, else SentEval's
    `STS/STSBenchmark/sts-<split>.csv` (tab-separated, its own format)."""
    split = _paths.canonical_name(split, STSB_MULTI_MT_SPLITS, _SPLIT_ALIASES, "split")
    file = f"stsb-en-{split}.csv"
    path = _paths.find_file(
        data_dir,
        [f"stsb_multi_mt/{file}", file,
         *senteval_candidates(f"STS/STSBenchmark/sts-{split}.csv")],
        what=f"STS-B {split} split",
        card="stsb_multi_mt.md",
        source_url=stsb_multi_mt_url("en", split),
    )
    return read_stsb_csv(path, on_error=on_error, senteval=path.parent.name == "STSBenchmark")


def read_sick_file(path, on_error="raise"):
    """Reads a SICK file (header `pair_ID  sentence_A  sentence_B
    relatedness_score ...`); relatedness scores must lie in 1–5."""
    pairs = read_pairs(path, format="sick", on_error=on_error)
    return _labels.check_scale(
        pairs, 1.0, 5.0, binary=False, what="SICK relatedness",
        on_error=on_error, format="sick", stacklevel=4,
    )


def read_stsb_csv(path, on_error="raise", senteval=False):
    """Reads one stsb-multi-mt CSV (`sentence1,sentence2,score`, no header),
    or with `senteval` SentEval's tab-separated `sts-<split>.csv`; scores
    must lie in 0–5."""
    if senteval:  # A record a non-blank line, as sts_tsv's.
        pairs, format = read_stsbenchmark_file(path, on_error=on_error), "sts_tsv"
    else:
        pairs, format = read_pairs(path, format="stsb_csv", on_error=on_error), "stsb_csv"
    return _labels.check_scale(
        pairs, 0.0, 5.0, binary=False, what="STS-B", on_error=on_error,
        format=format, stacklevel=4,
    )


def read_sts_files(paths, on_error="raise", names=None):
    """Reads SemEval STS TSV files (`score<TAB>s1<TAB>s2`) as one pooled set.

    Files are read in the order given; pairs with an empty score are left
    out (their lines are in `skipped`). Scores must lie in 0–5.

    Args:
        paths: the files.
        on_error: `"raise"` or `"skip"` (see `kcse.data.read_pairs`).
        names: sub-corpus name of each file (default: the file name without
            `.test.tsv`).

    Returns:
        `PooledSentencePairs`; `source` is the common folder.
    """
    paths = [pathlib.Path(os.fspath(p)) for p in paths]
    if not paths:
        raise ValueError("read_sts_files needs at least one file.")
    if names is None:
        names = [p.name.removesuffix(".tsv").removesuffix(".test") for p in paths]
    if len(names) != len(paths):
        raise ValueError(f"{len(names)} names for {len(paths)} files.")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"two files for sub-corpus {repeated[0]!r} in {paths}.")
    parts = [(name, checked_sts_scale(read_pairs(path, format="sts_tsv", on_error=on_error),
                                      on_error))
             for path, name in zip(paths, names)]
    return pooled_pairs(parts, os.path.commonpath([str(p.parent) for p in paths]))


def checked_sts_scale(pairs, on_error):
    """`pairs` with STS scores checked to lie in 0–5 (`_labels.check_scale`)."""
    return _labels.check_scale(pairs, 0.0, 5.0, binary=False, what="STS",
                               on_error=on_error, format="sts_tsv", stacklevel=4)


def pooled_pairs(parts, source):
    """`PooledSentencePairs` of `[(sub-corpus, SentencePairs)]`, in order."""
    pooled = PooledSentencePairs([], [], np.zeros(0), source=str(source))
    for name, part in parts:
        pooled.parts[name] = part
        pooled.sentences1 += part.sentences1
        pooled.sentences2 += part.sentences2
        pooled.skipped += [(name, line) for line in part.skipped]
    pooled.scores = np.concatenate([part.scores for _, part in parts])
    return pooled


def read_stsb_multi_mt(data_dir, language, split="test", on_error="raise"):
    """Reads one split of the machine-translated STS Benchmark.

    Args:
        data_dir: folder holding `stsb_multi_mt/` (as `../shared/data`), or
            the folder of the `stsb-<language>-<split>.csv` files.
        language: one of `STSB_MULTI_MT_LANGUAGES` (`"en"` is the original).
        split: `"train"` (5,749), `"dev"` (1,500) or `"test"` (1,379).
        on_error: as in `kcse.data.read_pairs`; scores off 0–5 count as
            malformed.

    Returns:
        `SentencePairs` with similarity scores 0–5.

    Example:
    ```python
    import pathlib

    import kcse

    # A real data_dir holds the CSVs of data_cards/stsb_multi_mt.md; here a tiny one.
    pathlib.Path("data/stsb_multi_mt").mkdir(parents=True)
    pathlib.Path("data/stsb_multi_mt/stsb-de-dev.csv").write_text(
        'Ein Mann spielt Gitarre.,Ein Mann spielt ein Instrument.,3.8\\n'
        '"Eine Frau, die kocht.",Ein Hund rennt.,0.0\\n', encoding="utf-8")
    pairs = kcse.data.read_stsb_multi_mt("data", "de", "dev")
    pairs.sentences1[1], pairs.scores.tolist()  # ('Eine Frau, die kocht.', [3.8, 0.0])
    ```
    """
    language = stsb_language(language)
    split = _paths.canonical_name(split, STSB_MULTI_MT_SPLITS, _SPLIT_ALIASES, "split")
    file = f"stsb-{language}-{split}.csv"
    path = _paths.find_file(
        data_dir,
        [f"stsb_multi_mt/{file}", file],
        what=f"stsb-multi-mt {language} {split} split",
        card="stsb_multi_mt.md",
        source_url=stsb_multi_mt_url(language, split),
    )
    return read_stsb_csv(path, on_error=on_error)
