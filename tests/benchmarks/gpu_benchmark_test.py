"""`benchmarks/gpu.py`: its step FLOPs, its imports, and a `--tiny` run as on the GPU machine.

The run goes through `tests/tensorflow_free` (JAX; TensorFlow, tensorflow-text,
jieba, kagglehub... hidden), as the GPU machine has none of them.
"""

import ast
import importlib.util
import json
import math
import pathlib
import subprocess
import sys

import pytest

import tensorflow_free

from kcse.experiments.published import SU_MODELS
from kcse.experiments.published import SU_SIMCSE_TABLE

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
BENCHMARKS = REPO_ROOT / "benchmarks"
SCRIPT = BENCHMARKS / "gpu.py"
MODULES = sorted(BENCHMARKS.glob("gpu*.py"))


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def finite_positive(value):
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_step_flops_match_the_h200_table_of_the_gpu_notes():
    # The H200 table of the workspace's GPU notes (docs/gpu.md cites it): HF
    # bf16 at length 64, 43.8 ms/step = 97 TFLOP/s; at 128, 51.0 ms/step =
    # 168 TFLOP/s (BERT-base, batch 64).
    load_script()
    step_flops = sys.modules["gpu_common"].step_flops
    assert step_flops("base", 64, 64) / 43.8e-3 / 1e12 == pytest.approx(97, rel=0.01)
    assert step_flops("base", 64, 128) / 51.0e-3 / 1e12 == pytest.approx(168, rel=0.01)


def test_step_statistics_are_nearest_rank():
    # min / median / p90 by nearest rank (p90 of 1..10 ms is the 9th value).
    load_script()
    figures = sys.modules["gpu_common"].step_statistics([s / 1000 for s in range(10, 0, -1)])
    assert (figures["ms_min"], figures["ms_per_step"], figures["ms_p90"]) == (1, 5.5, 9)


def test_the_scripts_never_import_tensorflow_and_the_main_process_no_framework():
    for module in MODULES:
        tree = ast.parse(module.read_text())
        imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                    if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module}
        assert "tensorflow" not in imported, module.name
    code = ("import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('gpu', {str(SCRIPT)!r})\n"
            "gpu = importlib.util.module_from_spec(spec); spec.loader.exec_module(gpu)\n"
            "gpu.parse_args(['--tiny']); import gpu_projection; gpu_projection.cell_plans()\n"
            "print(sorted({'tensorflow', 'keras', 'jax', 'torch'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def test_tiny_runs_count_the_runs_gpu_run_sh_would_override():
    # gpu_run.sh passes --deadline and --worker-timeout but no --runs, so that
    # --tiny keeps its one run; an explicit --runs still wins.
    gpu = load_script()
    assert gpu.parse_args(["--deadline", "330", "--tiny"]).runs == 1
    assert gpu.parse_args(["--tiny", "--runs", "2"]).runs == 2
    assert gpu.parse_args([]).precisions == ("bfloat16",)
    command = (BENCHMARKS / "gpu_run.sh").read_text().split("python3 benchmarks/gpu.py")[1]
    assert '"$@"' in command and "--runs" not in command.split('"$@"')[0]


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu") / "gpu.json"
    result = tensorflow_free.run([str(SCRIPT), "--tiny", "--json", str(out)], timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result.stdout, json.loads(out.read_text())


def test_tiny_run_without_tensorflow_has_every_stacks_rows(tiny_report):
    stdout, report = tiny_report
    assert report["complete"] and "targets (issue 43" in stdout
    assert report["arguments"]["lengths"] == [16, 32] and report["arguments"]["runs"] == 1
    assert all(finite_positive(rate) for rate in report["device"]["matmul_tflops"].values())
    stacks = report["stacks"]
    # torch and transformers are installed here: HF eager runs; torch.compile on a CPU only
    # with --torch-compile.
    assert set(stacks) == {"kcse", "hf_eager"}
    assert report["skipped_stacks"] == {"torch_compile": "on a CPU only with --torch-compile"}
    assert stacks["kcse"]["info"]["tensorflow_imported"] is False
    assert stacks["hf_eager"]["info"]["tf32"]["cuda.matmul.allow_tf32"] is True
    for stack, entry in stacks.items():
        for length in (16, 32):
            figures = entry["summary"][f"smoke/bfloat16/{length}"]
            assert figures["ms_min"] <= figures["ms_per_step"] <= figures["ms_p90"], stack
            for field in ("ms_min", "tokens_per_s", "tflops", "encode_sentences_per_s"):
                assert finite_positive(figures[field]), (stack, field)
            assert math.isfinite(figures["loss"]), stack
            for label in ("fresh", "cached"):
                assert finite_positive(figures["first_step_s"][label]), (stack, label)
                assert finite_positive(figures["first_encode_s"][label]), (stack, label)
        assert len(entry["first_steps_only_runs"]) == 1, stack  # the cached figures


def test_tiny_run_counts_a_cells_train_programs_and_projects_the_grid(tiny_report):
    _, report = tiny_report
    cell = report["stacks"]["kcse"]["cell"]
    # 200 STS-B sentences at batch 64: three full batches and one of 8, all
    # padded to the full length 64: two batch shapes, so two programs.
    assert cell["sentences"] == 200 and cell["steps"] == 4
    assert cell["traced_shapes"] == [[64, 64], [8, 64]]
    assert cell["train_programs"] == 2
    projection = report["projection"]
    # Su's published table (kcse.experiments.published, from his article):
    # every cell that has numbers there, P2 of WoBERT and RoFormer being "-".
    published = [cell for cell in SU_SIMCSE_TABLE.values() if cell is not None]
    assert projection["cells"] == len(published)
    assert sorted(projection["models"]) == sorted(SU_MODELS)
    assert projection["cell_plans"]["ATEC"]["steps"] == 157  # 10,000 sentences at 64
    assert projection["cell_plans"]["PAWSX"]["training_sentences"] == 106_802
    kcse_minutes = projection["stacks"]["kcse"]["minutes"]
    assert all(finite_positive(kcse_minutes[name]) for name in ("no_cache", "cache"))
    assert finite_positive(projection["stacks"]["hf_eager"]["minutes"]["total"])
    held = {check["target"]: check["holds"] for check in report["targets"]}
    assert held["kcse train programs in one STS-B cell"] is True


def test_from_json_reports_an_earlier_run_again(tiny_report, tmp_path):
    # --from-json measures nothing: from the tiny run's JSON it gives the same
    # summaries, projection and targets, and the same table.
    stdout, report = tiny_report
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps(report))
    again = tmp_path / "again.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--from-json", str(saved), "--json", str(again)],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    redone = json.loads(again.read_text())
    for part in ("projection", "targets", "peak", "runs_completed"):
        assert redone[part] == report[part], part
    for stack, entry in report["stacks"].items():
        assert redone["stacks"][stack]["summary"] == entry["summary"], stack
    table = stdout[stdout.index("training step per stack"):]
    assert result.stdout[result.stdout.index("training step per stack"):] == table
