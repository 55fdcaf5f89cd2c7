"""`benchmarks/gpu.py`: its step FLOPs, its imports, and a `--tiny` run end to end."""

import ast
import importlib.util
import json
import math
import pathlib
import subprocess
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "benchmarks" / "gpu.py"


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
    gpu = load_script()
    assert gpu.step_flops("base", 64, 64) / 43.8e-3 / 1e12 == pytest.approx(97, rel=0.01)
    assert gpu.step_flops("base", 64, 128) / 51.0e-3 / 1e12 == pytest.approx(168, rel=0.01)


def test_the_script_never_imports_tensorflow_and_its_main_process_no_framework():
    tree = ast.parse(SCRIPT.read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module}
    assert "tensorflow" not in imported
    code = ("import importlib.util, sys\n"
            f"spec = importlib.util.spec_from_file_location('gpu', {str(SCRIPT)!r})\n"
            "gpu = importlib.util.module_from_spec(spec); spec.loader.exec_module(gpu)\n"
            "gpu.parse_args(['--tiny']); gpu.grid_cells()\n"
            "print(sorted({'tensorflow', 'keras', 'jax', 'torch'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


@pytest.mark.large
def test_tiny_run_measures_every_stack_it_runs(tmp_path):
    out = tmp_path / "gpu.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--tiny", "--json", str(out)],
        capture_output=True, text=True, cwd=REPO_ROOT, timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "projection of Su's full grid" in result.stdout
    report = json.loads(out.read_text())
    assert report["complete"]
    arguments = report["arguments"]
    assert arguments["lengths"] == [16, 32] and arguments["runs"] == 1
    assert all(finite_positive(rate) for rate in report["device"]["matmul_tflops"].values())

    stacks = report["stacks"]
    assert {"kcse", "hf_eager"} <= set(stacks)
    assert set(stacks) | set(report["skipped_stacks"]) == {"kcse", "hf_eager", "torch_compile"}
    for stack, entry in stacks.items():
        skipped = entry["info"].get("skipped", {})
        for precision in arguments["precisions"]:
            for length in arguments["lengths"]:
                name = f"smoke/{precision}/{length}"
                if name in skipped:
                    continue
                figures = entry["summary"][name]
                assert finite_positive(figures["ms_per_step"]), (stack, name, figures)
                assert finite_positive(figures["tflops"]), (stack, name, figures)
                assert math.isfinite(figures["loss"]), (stack, name, figures)
                assert finite_positive(figures["first_step_s"]["fresh"]), (stack, name)
                if stack != "torch_compile":
                    assert finite_positive(figures["encode_sentences_per_s"]), (stack, name)
                if stack == "kcse":
                    assert finite_positive(figures["first_step_s"]["cached"]), name
                    assert finite_positive(figures["first_encode_s"]["fresh"]), name
                    assert finite_positive(figures["first_encode_s"]["cached"]), name
    # --tiny blocks `import tensorflow` in the kcse process, as on the GPU machine.
    assert stacks["kcse"]["info"]["tensorflow_imported"] is False
    kcse_runs = stacks["kcse"]["runs"]
    assert all(record["vectors_finite"] and record["encode_dtype"] == "float32"
               for run in kcse_runs for record in run["results"].values())

    projection = report["projection"]
    assert projection["cells"] == 100
    assert projection["cell_plans"]["ATEC"]["steps"] == 157  # 10,000 sentences at 64
    kcse_minutes = projection["stacks"]["kcse"]["minutes"]
    for name in ("no_cache", "cache"):
        assert finite_positive(kcse_minutes[name]), name
    assert finite_positive(projection["stacks"]["hf_eager"]["minutes"]["total"])
