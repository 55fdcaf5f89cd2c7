"""kcse's STS scores of Su's Chinese tasks as MTEB result files (C-MTEB).

MTEB's Chinese STS tasks (C-MTEB) are the five tasks of Su's comparison,
with the same split sizes: ATEC (validation, test: 20,000 pairs each), BQ
(10,000, 10,000), LCQMC (test: 12,500), PAWSX (test: 2,000) and STSB
(validation 1,458, test 1,361). kcse's `valid` split is MTEB's
`validation`; `train` is no MTEB split. Their `main_score` is
`cosine_spearman`: Spearman's ρ of the cosines with the gold scores, as
`kcse.evaluation.evaluate_sts` computes it (MTEB's min-max scaling of the
gold scores does not change a rank correlation, and the Pearson of the
cosines with the scaled gold equals the unscaled one). MTEB stores ρ as a
fraction (0.8203); kcse reports it ×100 (82.03): the files hold kcse's
numbers divided by 100. What kcse does not compute is left out: the
Manhattan and Euclidean correlations of MTEB's files; `spearman` and
`pearson` (the model's own similarity) are the cosine ones, kcse's
similarity. kcse reads Su's `senteval_cn` files, not MTEB's copies on the
Hugging Face hub: the files record C-MTEB's dataset revision, so they sit
beside (and merge with) MTEB's own results of the task, but the rows were
not compared offline, only the split sizes; a score of a split of another
size (a subset) is not MTEB's number and is refused
(`check_mteb_pair_count`).

The layout is `mteb.ResultCache`'s: `<folder>/results/<model name, "/" as
"__">/<revision>/<Task>.json` and `model_meta.json` beside them, so
`mteb.ResultCache(folder).load_results()` reads them, and
`mteb.evaluate(model, tasks, cache=mteb.ResultCache(folder))` writes its
own results beside them. Every file is written to a temporary name and
renamed into place (`kcse.foundation.atomic_files`).
"""

import datetime
import importlib.metadata
import json
import math
import pathlib

from kcse.foundation import atomic_files
from kcse.data.chinese import CHINESE_SPLITS
from kcse.data.chinese import CHINESE_TASKS
from kcse.data.chinese import chinese_task_name

# kcse's task name -> C-MTEB's (mteb/tasks/sts/zho/cmtebsts.py).
MTEB_TASK_NAMES = {"ATEC": "ATEC", "BQ": "BQ", "LCQMC": "LCQMC", "PAWSX": "PAWSX",
                   "STS-B": "STSB"}
# kcse's split name -> MTEB's.
MTEB_SPLIT_NAMES = {"valid": "validation", "test": "test"}
# Each C-MTEB task's evaluation splits with their pair counts, and its Hugging
# Face dataset revision (mteb 2.26.24: the task metadata's `eval_splits`, the
# `num_samples` of its `descriptive_stats`, and `revision`).
MTEB_TASKS = {
    "ATEC": ({"validation": 20000, "test": 20000}, "0f319b1142f28d00e055a6770f3f726ae9b7d865"),
    "BQ": ({"validation": 10000, "test": 10000}, "e3dda5e115e487b39ec7e618c0c6a29137052a55"),
    "LCQMC": ({"test": 12500}, "17f9b096f80380fce5ed12a9be8be7784b337daf"),
    "PAWSX": ({"test": 2000}, "bd129d4230ee0551b5469c566bced8da75abae0a"),
    "STSB": ({"validation": 1458, "test": 1361}, "e036defee8f190911de6fc825a944b928c8cda53"),
}
MTEB_LANGUAGES = ["cmn-Hans"]  # C-MTEB's `eval_langs`; its one subset is "default".
# The frameworks (of mteb's `ModelMeta.framework` names, which have no Keras)
# a kcse encoder runs on: Keras 3 on TensorFlow or JAX.
MTEB_FRAMEWORKS = ["TensorFlow", "JAX"]
MODEL_META_FILE = "model_meta.json"


def mteb_task_split(task, split):
    """`(C-MTEB task, MTEB split)` of one of Su's tasks and kcse splits.

    Raises:
        ValueError: in one line, for a task other than Su's five (MTEB holds
            no other kcse task as C-MTEB STS) or a split MTEB does not
            evaluate (`train`; `valid` of LCQMC and PAWSX).

    Example:
    ```python
    from kcse.evaluation.mteb_results import mteb_task_split

    mteb_task_split("sts-b", "valid")  # ('STSB', 'validation')
    ```
    """
    try:
        task = chinese_task_name(task)
    except ValueError:
        raise ValueError(f"{task!r} is not a C-MTEB STS task; MTEB result files are "
                         f"written for {', '.join(CHINESE_TASKS)} only") from None
    name = MTEB_TASK_NAMES[task]
    splits = MTEB_TASKS[name][0]
    mteb_split = MTEB_SPLIT_NAMES.get(str(split).lower())
    if mteb_split not in splits:
        kcse_splits = [kcse for kcse, mteb in MTEB_SPLIT_NAMES.items() if mteb in splits]
        raise ValueError(f"{task} {split}: MTEB's {name} evaluates the "
                         f"{' and '.join(kcse_splits)} split{'s' * (len(splits) > 1)} only")
    return name, mteb_split


def check_mteb_pair_count(task, split, pairs):
    """`(C-MTEB task, MTEB split)` if `pairs` is the pair count of that split
    in C-MTEB (`MTEB_TASKS`): a score of fewer or other pairs is not MTEB's
    number, and a file under C-MTEB's task name and dataset revision would
    pass it off as one.

    Raises:
        ValueError: in one line, naming the task, the split, the count seen
            and C-MTEB's; and `mteb_task_split`'s errors.

    Example:
    ```python
    from kcse.evaluation.mteb_results import check_mteb_pair_count

    check_mteb_pair_count("STS-B", "test", 1361)  # ('STSB', 'test')
    # check_mteb_pair_count("STS-B", "test", 200) raises ValueError:
    # STS-B test: 200 pairs, but C-MTEB's STSB test has 1361; ...
    ```
    """
    name, mteb_split = mteb_task_split(task, split)
    expected = MTEB_TASKS[name][0][mteb_split]
    if pairs != expected:
        raise ValueError(f"{chinese_task_name(task)} {split}: {pairs} pairs, but C-MTEB's "
                         f"{name} {mteb_split} has {expected}; MTEB result files are "
                         "written for C-MTEB's whole splits only")
    return name, mteb_split


def task_split_of_file(path):
    """`(task, split)` of a file in Su's layout, `<TASK>.<split>.data`.

    Raises:
        ValueError: in one line, for any other file name.
    """
    parts = pathlib.Path(path).name.split(".")
    if len(parts) == 3 and parts[2] == "data" and parts[1] in CHINESE_SPLITS:
        try:
            return chinese_task_name(parts[0]), parts[1]
        except ValueError:
            pass
    raise ValueError(f"{path}: not a file of a C-MTEB STS task (Su's "
                     f"<TASK>.<split>.data of {', '.join(CHINESE_TASKS)})")


def mteb_model_name(model_name):
    """`model_name` as the files name it: mteb's `ModelMeta` wants
    `"organization/name"`, so a name without a "/" is filed as kcse's
    (`"e5-small"` → `"kcse/e5-small"`)."""
    model_name = _name(model_name, "model_name")
    return model_name if "/" in model_name else f"kcse/{model_name}"


def mteb_model_folder(folder, model_name, revision):
    """`<folder>/results/<model name, "/" as "__">/<revision>`, as mteb names
    it (the name as `mteb_model_name` gives it)."""
    model_name, revision = mteb_model_name(model_name), _name(revision, "revision")
    return (pathlib.Path(folder) / "results"
            / model_name.replace("/", "__").replace(" ", "_") / revision)


def write_mteb_results(folder, model_name, revision, results, encoder=None):
    """Writes kcse's STS scores as MTEB result files; returns their paths.

    Args:
        folder: the results cache folder (`mteb.ResultCache(folder)`).
        model_name: str, the model's name (`"org/name"` as on the hub, or
            anything else: "/" becomes "__" in the folder name, and a name
            without "/" is filed as `"kcse/<name>"`, `mteb_model_name`).
        revision: str, the model's revision (a commit, a file digest).
        results: iterable of `(task, split, scores)`: one of Su's tasks
            (`"STS-B"`), a kcse split (`"valid"`, `"test"`) and the dict of
            `kcse.evaluation.evaluate_sts` (`"spearman"`, `"pearson"`: ×100,
            `"n"`: the pairs scored, which must be C-MTEB's count of the
            split, `check_mteb_pair_count`), with `"seconds"` (the time
            taken) when known.
        encoder: the `kcse.SentenceEncoder` scored, or the dict of
            `encoder_meta`, for `model_meta.json`; None leaves its size
            unknown (null).

    Returns:
        The paths written: one `<Task>.json` per task, then `model_meta.json`.
        A task file already there for the same model and revision keeps
        the splits not given here.

    Raises:
        ValueError: in one line, before anything is written: a task or
            split MTEB does not evaluate (`mteb_task_split`), a pair count
            other than C-MTEB's (`check_mteb_pair_count`), a task and split
            given twice, scores missing, or no results.

    Example:
    ```python
    import kcse

    paths = kcse.evaluation.write_mteb_results(
        "mteb", "my-org/my-encoder", "v1",
        [("STS-B", "test", {"spearman": 82.03, "pearson": 81.5, "n": 1361})])
    [path.as_posix() for path in paths]
    # ['mteb/results/my-org__my-encoder/v1/STSB.json',
    #  'mteb/results/my-org__my-encoder/v1/model_meta.json']
    # mteb.ResultCache("mteb").load_results(include_remote=False) reads them back.
    ```
    """
    model_name = mteb_model_name(model_name)
    model_folder = mteb_model_folder(folder, model_name, revision)
    by_task = {}
    for task, split, scores in results:
        name, mteb_split = mteb_task_split(task, split)
        if not isinstance(scores, dict) or "n" not in scores:
            raise ValueError(f"{task} {split}: scores must be a dict of evaluate_sts with "
                             f"'n', the pairs scored; got {scores!r}")
        check_mteb_pair_count(task, split, scores["n"])
        splits = by_task.setdefault(name, {})
        if mteb_split in splits:
            raise ValueError(f"{task} {split} is given twice")
        splits[mteb_split] = scores
    if not by_task:
        raise ValueError("no results to write")
    paths = []
    for name, splits in by_task.items():
        path = model_folder / f"{name}.json"
        atomic_files.write_json(path, task_result(name, splits, _existing(path)), indent=2)
        paths.append(path)
    meta = model_meta(model_name, revision, encoder)
    atomic_files.write_json(model_folder / MODEL_META_FILE, meta, indent=4)
    return paths + [model_folder / MODEL_META_FILE]


def task_result(name, splits, existing=None):
    """One C-MTEB task's result as mteb's `TaskResult` JSON.

    `splits` maps an MTEB split to kcse's scores of it; `existing` is the
    task's result already on disk, whose other splits are kept.
    """
    version = mteb_version()
    scores = dict(existing["scores"]) if existing else {}
    for split, kcse_scores in splits.items():
        scores[split] = [split_scores(kcse_scores, version)]
    seconds = [s.get("seconds") for s in splits.values()]
    evaluation_time = None if None in seconds else float(sum(seconds))
    if existing and evaluation_time is not None and existing.get("evaluation_time"):
        evaluation_time += existing["evaluation_time"]
    return {
        "dataset_revision": MTEB_TASKS[name][1],
        "task_name": name,
        "mteb_version": version,
        "scores": scores,
        "evaluation_time": evaluation_time,
        "kg_co2_emissions": None,
        "date": datetime.datetime.now(datetime.timezone.utc).timestamp(),
        "evaluation_phases": None,
    }


def split_scores(scores, version):
    """MTEB's scores of one split (subset "default") from kcse's ×100 ones.

    An undefined Pearson (None or NaN: results.json's `null`) is written as
    `null`, which mteb's loader reads; the Spearman (the main score) must
    be a number.
    """
    try:
        spearman, pearson = float(scores["spearman"]) / 100, scores["pearson"]
        pearson = None if pearson is None or math.isnan(pearson) else float(pearson) / 100
    except (KeyError, TypeError, ValueError):
        raise ValueError("scores must be a dict of evaluate_sts with 'spearman' and "
                         f"'pearson'; got {scores!r}") from None
    if math.isnan(spearman):
        raise ValueError(f"the Spearman is undefined (NaN); got {scores!r}")
    return {
        "pearson": pearson,
        "spearman": spearman,
        "cosine_pearson": pearson,
        "cosine_spearman": spearman,
        "main_score": spearman,
        "hf_subset": "default",
        "languages": list(MTEB_LANGUAGES),
    } | ({"mteb_version": version} if version else {})


# What model_meta.json says of an encoder's size (`encoder_meta`).
ENCODER_FIELDS = ("n_parameters", "embed_dim", "max_tokens")


def encoder_meta(encoder):
    """What `model_meta.json` says of a `kcse.SentenceEncoder`'s size: its
    `n_parameters` (every weight: backbone and pooling), `embed_dim` (the
    vectors' width) and `max_tokens` (the preprocessor's sequence length,
    the tokens it reads, `[CLS]` and `[SEP]` included)."""
    return {"n_parameters": int(encoder.count_params()),
            "embed_dim": int(encoder.output_dim),
            "max_tokens": int(encoder.preprocessor.sequence_length)}


def model_meta(model_name, revision, encoder=None):
    """`model_meta.json` of a kcse encoder: mteb's `ModelMeta.to_dict()`.

    It names the model (`mteb_model_name`) and revision, cosine similarity, the frameworks
    kcse runs on (`MTEB_FRAMEWORKS`), the languages of the C-MTEB tasks it
    is written for (`MTEB_LANGUAGES`: the data it was scored on, not a
    claim of the model card) and, from `encoder` (a `SentenceEncoder`, or
    the dict of `encoder_meta`), `n_parameters`, `embed_dim` and
    `max_tokens`; what kcse does not know is null (release date, license,
    training data...).
    """
    size = dict.fromkeys(ENCODER_FIELDS)
    if encoder is not None:
        size |= encoder if isinstance(encoder, dict) else encoder_meta(encoder)
    unknown = ("release_date", "n_active_parameters_override",
               "n_embedding_parameters", "memory_usage_mb", "license",
               "open_weights", "public_training_code", "public_training_data", "reference",
               "use_instructions", "training_datasets", "adapted_from", "superseded_by",
               "citation", "contacts", "experiment_kwargs", "output_dtypes",
               "extra_requirements_groups", "loader")
    return {"loader_kwargs": {}, "name": mteb_model_name(model_name), "revision": revision,
            "languages": list(MTEB_LANGUAGES), "n_parameters": size["n_parameters"],
            "embed_dim": size["embed_dim"], "max_tokens": size["max_tokens"],
            "framework": list(MTEB_FRAMEWORKS),
            "similarity_fn_name": "cosine", "modalities": ["text"],
            "model_type": ["dense"], "is_cross_encoder": False} | dict.fromkeys(unknown)


def mteb_version():
    """The installed mteb's version (the format followed), or None without it."""
    try:
        return importlib.metadata.version("mteb")
    except importlib.metadata.PackageNotFoundError:
        return None


def _existing(path):
    """The task result at `path`, or None when there is none."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def _name(value, what):
    if not isinstance(value, str) or not value.strip() or value in (".", ".."):
        raise ValueError(f"{what} must be a non-empty str naming a folder; got {value!r}")
    return value
