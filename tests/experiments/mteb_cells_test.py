"""A comparison grid's cells as MTEB result files, read back by mteb's own loader.

The independent reference is the `mteb` package: `ResultCache.load_results`
reads what kcse writes, and its scores must be results.json's ×100 numbers
divided by 100.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # mteb must not reach the hub.

import mteb  # noqa: E402
import pytest  # noqa: E402
from mteb.cache import ResultCache  # noqa: E402
from mteb.models.model_meta import ModelMeta  # noqa: E402

import numpy as np  # noqa: E402
import scipy.stats  # noqa: E402

import kcse  # noqa: E402
from kcse.evaluation.mteb_results import mteb_model_folder  # noqa: E402

from all_but_the_top_reference import paper_all_but_the_top  # noqa: E402
from authors_references import torch_cosine_similarity  # noqa: E402
from kcse.experiments.cell_record import FAILED  # noqa: E402
from kcse.experiments.mteb_cells import cell_revision  # noqa: E402
from kcse.experiments.mteb_cells import write_cells_as_mteb  # noqa: E402
from results_cells import MODELS  # noqa: E402
from results_cells import POOLINGS  # noqa: E402
from results_cells import TASKS  # noqa: E402
from results_cells import grid_cell  # noqa: E402
from tiny_grid import read_strict_json  # noqa: E402
from tiny_grid import recipe  # noqa: E402
from tiny_grid import stsb_sample  # noqa: E402
from tiny_grid import tiny_checkpoint  # noqa: E402
from tiny_grid import tiny_task_and_model  # noqa: E402
from tiny_grid import write_task  # noqa: E402

MTEB_NAMES = {"ATEC": "ATEC", "BQ": "BQ", "LCQMC": "LCQMC", "PAWSX": "PAWSX", "STS-B": "STSB"}


def load_back(folder):
    """`{(model, revision): {task: TaskResult}}` as mteb's loader reads `folder`."""
    loaded = ResultCache(folder).load_results(include_remote=False)
    return {(model.model_name, model.model_revision):
            {task.task_name: task for task in model.task_results}
            for model in loaded.model_results}


def c_mteb_test_pairs(task):
    """The pairs of C-MTEB's test split of one of Su's tasks (mteb's metadata)."""
    return mteb.get_task(MTEB_NAMES[task]).metadata.descriptive_stats["test"]["num_samples"]


def with_c_mteb_pairs(cell):
    """`cell` with every column's test split of C-MTEB's pair count."""
    return cell | {column: {split: scores | {"n": c_mteb_test_pairs(cell["task"])}
                            if split == "test" else scores
                            for split, scores in cell[column].items()}
                   for column in ("raw", "whitening", "trained") if cell[column]}


def test_each_column_of_each_finished_cell_is_a_model(tmp_path):
    # The synthetic grid's SimCSE cells: 3 models x 4 poolings x 5 tasks,
    # splits "test" and "dev" (no MTEB split: left out), some failed.
    cells = [with_c_mteb_pairs(grid_cell(index, index)[1]) for index in range(60)]
    folders = write_cells_as_mteb(tmp_path, cells)
    read = load_back(tmp_path)
    assert len(folders) == len(read) == len(MODELS) * len(POOLINGS) * 3  # a, b, c
    for cell in cells:
        for column, suffix in (("raw", "raw"), ("whitening", "whitening"),
                               ("trained", "simcse")):
            name = f"kcse/{cell['model']}-{cell['pooling']}-{suffix}"
            tasks = read[name, cell_revision(cell)]
            if cell["status"] == FAILED:
                assert MTEB_NAMES[cell["task"]] not in tasks
                continue
            stored = cell[column]["test"]
            scores, = tasks[MTEB_NAMES[cell["task"]]].scores["test"]
            assert list(tasks[MTEB_NAMES[cell["task"]]].scores) == ["test"]
            assert scores["main_score"] == pytest.approx(stored["spearman"] / 100, abs=1e-12)
            pearson = stored["pearson"]
            assert scores["cosine_pearson"] == (
                None if pearson != pearson else pytest.approx(pearson / 100, abs=1e-12))
    assert sorted({task for tasks in read.values() for task in tasks}) == sorted(
        MTEB_NAMES[task] for task in TASKS)


def test_a_cell_of_other_pairs_than_c_mtebs_is_refused(tmp_path):
    """Reference: mteb's task metadata, ATEC test: 20,000 pairs."""
    cell = grid_cell(0, 0)[1]  # ATEC, test n=1361.
    assert cell["task"] == "ATEC" and c_mteb_test_pairs("ATEC") == 20000
    with pytest.raises(ValueError, match="ATEC test: 1361 pairs, but C-MTEB's ATEC test "
                                         "has 20000") as error:
        write_cells_as_mteb(tmp_path, [cell])
    assert "\n" not in str(error.value) and not (tmp_path / "results").exists()


def test_nothing_mteb_holds_writes_nothing(tmp_path):
    cell = grid_cell(0, 0)[1]
    only_train = {split: {"train": scores["test"]} for split, scores in (
        ("raw", cell["raw"]), ("whitening", cell["whitening"]), ("trained", cell["trained"]))}
    assert write_cells_as_mteb(tmp_path, [cell | only_train]) == []
    assert not (tmp_path / "results").exists()


def test_the_recipe_refuses_a_subset_of_a_c_mteb_split_before_training(
        tmp_path, shared_data, capsys):
    """STS-B's first 37 test pairs are not C-MTEB's 1,361 (mteb's metadata)."""
    chinese_simcse = recipe("chinese_simcse")
    model = tiny_task_and_model(tmp_path, shared_data)
    flags = ["--models", model, "--tasks", "STS-B", "--poolings", "P1",
             "--data-dir", str(tmp_path / "data"), "--output", str(tmp_path / "out"),
             "--sentences", "32", "--batch-size", "16"]
    with pytest.raises(SystemExit) as stop:
        chinese_simcse.main(flags + ["--mteb-output", str(tmp_path / "mteb")])
    assert stop.value.code == 2
    error = capsys.readouterr().err
    valid = tmp_path / "data" / "STS-B" / "STS-B.valid.data"
    assert (f"--mteb-output: {valid}: STS-B valid: 37 pairs, but C-MTEB's STSB validation "
            "has 1458" in error and error.count("\n") == 1)
    assert not (tmp_path / "out").exists() and not (tmp_path / "mteb").exists()


def test_the_recipe_writes_its_grid_for_mtebs_loader(tmp_path, shared_data, capsys):
    chinese_simcse = recipe("chinese_simcse")
    # C-MTEB's whole valid and test splits (Su's files), a few train pairs.
    sample = stsb_sample(shared_data)
    for split in ("valid", "test"):
        pairs = kcse.data.read_pairs(shared_data / "senteval_cn" / "STS-B"
                                     / f"STS-B.{split}.data")
        sample[split] = list(zip(pairs.sentences1, pairs.sentences2, pairs.scores))
    write_task(tmp_path / "data", "STS-B", sample, lambda label: int(label))
    model = f"{tiny_checkpoint(tmp_path / 'tiny_bert', sample)}:bert"
    (tmp_path / "a file").write_text("mine")
    flags = ["--models", model, "--tasks", "STS-B", "--poolings", "P1",
             "--data-dir", str(tmp_path / "data"), "--output", str(tmp_path / "out"),
             "--sentences", "32", "--batch-size", "16", "--trained-splits", "valid,test"]
    with pytest.raises(SystemExit) as stop:
        chinese_simcse.main(flags + ["--mteb-output", str(tmp_path / "a file")])
    assert stop.value.code == 2
    error = capsys.readouterr().err
    assert "--mteb-output" in error and "is a file" in error and error.count("\n") == 1
    assert not (tmp_path / "out").exists()

    # With all-but-the-top (`--postprocess`), a column of one file and one
    # registry line: in results.json, results.md, su_table.md and MTEB's files.
    chinese_simcse.main(flags + ["--mteb-output", str(tmp_path / "mteb"),
                                 "--postprocess", "whitening,all-but-the-top"])
    out = capsys.readouterr().out
    assert "MTEB results: 4 model(s)" in out
    cell, = read_strict_json(tmp_path / "out" / "results.json")["cells"].values()
    read = load_back(tmp_path / "mteb")
    revision = cell_revision(cell)
    assert sorted(read) == [(f"kcse/tiny_bert-P1-{suffix}", revision)
                            for suffix in ("all-but-the-top", "raw", "simcse", "whitening")]
    abtt = f"{cell['all_but_the_top']['test']['spearman']:.2f}"
    assert f" / abtt {abtt} / c " in out
    assert "| b whitening | abtt | c trained |" in (tmp_path / "out" / "results.md").read_text()
    su_table = (tmp_path / "out" / "su_table.md").read_text()
    assert "| a / b / abtt / c (test) | STS-B |" in su_table
    assert f" / {abtt} / " in su_table and "**abtt** (when run)" in su_table
    for column, suffix in (("raw", "raw"), ("whitening", "whitening"), ("trained", "simcse"),
                           ("all_but_the_top", "all-but-the-top")):
        stsb = read[f"kcse/tiny_bert-P1-{suffix}", revision]["STSB"]
        for split, mteb_split in (("valid", "validation"), ("test", "test")):
            scores, = stsb.scores[mteb_split]
            assert scores["main_score"] == pytest.approx(
                cell[column][split]["spearman"] / 100, abs=1e-12)
    # model_meta.json, read by mteb's ModelMeta: the encoder's size recorded by the cell.
    meta = ModelMeta.model_validate_json(
        (mteb_model_folder(tmp_path / "mteb", "tiny_bert-P1-raw", revision)
         / "model_meta.json").read_text())
    backbone, preprocessor = kcse.models.from_checkpoint(model.rsplit(":", 1)[0], "bert", 64)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="P1")
    assert meta.framework == ["TensorFlow", "JAX"] and meta.languages == ["cmn-Hans"]
    assert (meta.n_parameters, meta.embed_dim, meta.max_tokens) == (
        encoder.count_params(), encoder.output_dim, 64)
    # all-but-the-top as the paper's Algorithm 1 (numpy transcription) with
    # D = dim/100 (at least 1), fitted on the su protocol's whitening
    # vectors (every split, both sides), applied to the raw test vectors.
    assert cell["settings"]["all_but_the_top"] == "auto"
    assert cell["all_but_the_top_directions"] == 1 == max(1, round(encoder.output_dim / 100))
    pairs = {split: kcse.data.read_pairs(tmp_path / "data" / "STS-B" / f"STS-B.{split}.data")
             for split in ("train", "valid", "test")}
    vectors = {split: encoder.encode(split_pairs.sentences1 + split_pairs.sentences2)
               for split, split_pairs in pairs.items()}
    processed = paper_all_but_the_top(np.concatenate(list(vectors.values())),
                                      vectors["test"], 1)
    count = len(pairs["test"].scores)
    cosine = torch_cosine_similarity(processed[:count], processed[count:])
    expected = 100 * scipy.stats.spearmanr(pairs["test"].scores, cosine)[0]
    assert abs(cell["all_but_the_top"]["test"]["spearman"] - expected) <= 0.01
