"""The Chinese tasks of Su Jianlin's SimCSE comparison (bojone/SimCSE).

Su's evaluation code reads `<root>/<TASK>/<TASK>.{train,valid,test}.data`,
one `s1<TAB>s2<TAB>label` pair a line, for the tasks ATEC, BQ, LCQMC, PAWSX
(labels 0/1) and STS-B (labels 0..5, the CNSD translation of the STS
Benchmark). The files come from the `senteval_cn` bundle of that repository;
see the data cards (`data_cards/chinese_sts.md` and one card per task).
"""

import pathlib

from kcse.data import read_pairs
from kcse.data import _labels
from kcse.data import _paths
from kcse.data._labels import LabelScaleError  # noqa: F401 (re-export)

CHINESE_TASKS = ("ATEC", "BQ", "LCQMC", "PAWSX", "STS-B")
CHINESE_SPLITS = ("train", "valid", "test")

# (lowest, highest, binary) label of each task.
LABEL_SCALES = {
    "ATEC": (0.0, 1.0, True),
    "BQ": (0.0, 1.0, True),
    "LCQMC": (0.0, 1.0, True),
    "PAWSX": (0.0, 1.0, True),
    "STS-B": (0.0, 5.0, False),
}

# Expected rows of Su's senteval_cn files (train, valid, test).
SPLIT_SIZES = {
    "ATEC": (62477, 20000, 20000),
    "BQ": (100000, 10000, 10000),
    "LCQMC": (238766, 8802, 12500),
    "PAWSX": (49401, 2000, 2000),
    "STS-B": (5231, 1458, 1361),
}

DATA_CARDS = {
    "ATEC": "atec.md",
    "BQ": "bq.md",
    "LCQMC": "lcqmc.md",
    "PAWSX": "pawsx.md",
    "STS-B": "chinese_stsb.md",
}

SOURCE_URLS = {
    "ATEC": "https://github.com/IceFlameWorm/NLP_Datasets/tree/master/ATEC",
    "BQ": "http://icrc.hitsz.edu.cn/info/1037/1162.htm",
    "LCQMC": "http://icrc.hitsz.edu.cn/Article/show/171.html",
    "PAWSX": "https://github.com/google-research-datasets/paws/tree/master/pawsx",
    "STS-B": "https://github.com/pluto-junzeng/CNSD",
}

# The same rows on the Hugging Face Hub (C-MTEB's copies, data_cards/), for
# the `datasets` of a model card; the tasks' language, for its `language`.
HUB_DATASETS = {"ATEC": "C-MTEB/ATEC", "BQ": "C-MTEB/BQ", "LCQMC": "C-MTEB/LCQMC",
                "PAWSX": "C-MTEB/PAWSX", "STS-B": "C-MTEB/STSB"}
LANGUAGE = "zh"

# The Chinese STS-B shipped inside the package (byte-identical to the
# senteval_cn files; data_cards/chinese_sts.md): a `data_dir` for
# `read_chinese_task(BUNDLED_CHINESE_STS, "STS-B", split)`.
BUNDLED_CHINESE_STS = pathlib.Path(__file__).resolve().parent / "bundled"


def chinese_task_name(task):
    """The canonical task name (`"sts-b"`, `"stsb"` → `"STS-B"`).

    Raises:
        ValueError: for an unknown task, listing the valid ones.
    """
    return _paths.canonical_name(task, CHINESE_TASKS, what="task")


def chinese_task_path(data_dir, task, split):
    """Path of `<data_dir>/<TASK>/<TASK>.<split>.data`.

    `data_dir` is the `senteval_cn` folder, or a folder holding it (as
    `../shared/data` does).

    Raises:
        ValueError: unknown task or split (the message lists the valid ones).
        FileNotFoundError: naming the paths tried and the task's data card.

    Example:
    ```python
    import pathlib

    import kcse

    kcse.data.chinese_task_path(kcse.data.BUNDLED_CHINESE_STS, "sts-b", "test").name
    # 'STS-B.test.data'

    pathlib.Path("senteval_cn/ATEC").mkdir(parents=True)
    pathlib.Path("senteval_cn/ATEC/ATEC.test.data").write_text("", encoding="utf-8")
    kcse.data.chinese_task_path(".", "atec", "test").as_posix()  # 'senteval_cn/ATEC/ATEC.test.data'
    ```
    """
    task = chinese_task_name(task)
    split = _paths.canonical_name(split, CHINESE_SPLITS, what="split")
    name = f"{task}/{task}.{split}.data"
    return _paths.find_file(
        data_dir,
        [name, f"senteval_cn/{name}"],
        what=f"{task} {split} split",
        card=DATA_CARDS[task],
        source_url=SOURCE_URLS[task],
    )


def read_chinese_task(data_dir, task, split, on_error="raise"):
    """Reads one split of one of Su's Chinese tasks, checking its label scale.

    Args:
        data_dir: the `senteval_cn` folder (`<TASK>/<TASK>.<split>.data`
            inside), or a folder holding `senteval_cn/`.
        task: one of `CHINESE_TASKS` (case, "-" and "_" are ignored).
        split: `"train"`, `"valid"` or `"test"`.
        on_error: `"raise"` (default): a malformed line or a label outside
            the task's scale (ATEC, BQ, LCQMC, PAWSX: 0 or 1; STS-B: 0..5)
            raises `MalformedLineError` (`LabelScaleError` for the label)
            naming file, line and value. `"skip"`: such lines are left out,
            their line numbers are added to `skipped`, and a warning gives
            the count — what Su's loader does silently for lines without 3
            fields.

    Returns:
        A `kcse.data.SentencePairs` (labels in `scores`).

    Example:
    ```python
    import kcse

    pairs = kcse.data.read_chinese_task(kcse.data.BUNDLED_CHINESE_STS, "STS-B", "test")
    len(pairs), float(pairs.scores.min()), float(pairs.scores.max())  # (1361, 0.0, 5.0)
    ```
    """
    path = chinese_task_path(data_dir, task, split)
    task = chinese_task_name(task)
    pairs = read_pairs(path, format="senteval_cn", on_error=on_error)
    return _check_label_scale(pairs, task, on_error)


def _check_label_scale(pairs, task, on_error):
    low, high, binary = LABEL_SCALES[task]
    return _labels.check_scale(
        pairs, low, high, binary=binary, what=task, on_error=on_error,
        format="senteval_cn", stacklevel=4,
    )
