"""`--precision` and `--compilation-cache` of the recipes and `kcse train`.

Parsing, what `start_speed` applies, and how the precision enters a cell's
settings and results.md. The tiny grid run under `--precision bfloat16`
is in cell_identity_test.py; `kcse train`'s in tests/commands/train_test.py.
"""

import os
import pathlib
import subprocess
import sys

import keras
import pytest

from kcse.foundation import arguments
from kcse.experiments import command_line
from kcse.foundation.precision import precision_of
from kcse.experiments.results.identity import cell_identity
from kcse.experiments.results.identity import cell_key
from kcse.experiments.results.identity import setting_differences
from kcse.experiments.results.identity import settings_id
from kcse.experiments.results.identity import shown_settings
from kcse.experiments.results import tables
from tiny_grid import recipe

REPO = pathlib.Path(__file__).resolve().parents[2]


def parse(*argv):
    parser = command_line.comparison_parser("doc\n\nmore", "out")
    return parser.parse_args(list(argv))


def test_the_flags_default_to_float32_and_auto():
    args = parse()
    assert args.precision == "float32" and args.compilation_cache is None
    assert parse("--compilation-cache", "off").compilation_cache is False
    assert parse("--compilation-cache", "auto").compilation_cache is None
    assert parse("--compilation-cache", "~/xla").compilation_cache == pathlib.Path(
        "~/xla").expanduser()
    assert parse("--precision", "bfloat16").precision == "bfloat16"


def test_the_help_says_which_precision_a_gpu_takes():
    text = " ".join(command_line.comparison_parser("doc\n\nmore", "out").format_help().split())
    assert ("bfloat16 on a GPU of the Ampere generation or newer (1.6x a BERT-base "
            "SimCSE step on an H200); float16 on older GPUs (loss scaling); float32 on "
            "CPUs, where neither is faster") in text
    assert "--compilation-cache DIR|auto|off" in text


@pytest.mark.parametrize("name", ["chinese_simcse", "consert", "sg_opt", "sup_simcse",
                                  "contrastive_tension", "multilingual_sts"])
def test_every_recipe_refuses_a_bad_precision_in_one_line(name, capsys):
    with pytest.raises(SystemExit) as exit_info:
        recipe(name).main(["--precision", "float64"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1
    assert ": error: argument --precision: invalid choice: 'float64'" in error
    assert "'float32', 'bfloat16', 'float16'" in error


def test_a_cache_folder_that_cannot_be_made_is_refused(tmp_path):
    (tmp_path / "a_file").write_text("x")
    args = parse("--compilation-cache", str(tmp_path / "a_file"))
    with pytest.raises(arguments.UsageError, match="--compilation-cache .*is a file"):
        command_line.check_speed_arguments(args)
    with pytest.raises(arguments.UsageError, match="give a folder, auto or off"):
        parse("--compilation-cache", " ")


def test_start_speed_sets_the_policy_and_says_where_the_cache_is(tmp_path):
    args = parse("--precision", "bfloat16", "--compilation-cache", str(tmp_path / "xla"))
    before = keras.config.dtype_policy().name
    with command_line.keeping_dtype_policy():
        line = command_line.start_speed(args)
        assert keras.config.dtype_policy().name == "mixed_bfloat16"
        assert precision_of() == "bfloat16"
        assert keras.layers.Dense(2).dtype_policy.name == "mixed_bfloat16"
    assert keras.config.dtype_policy().name == before == "float32"
    assert line.startswith("precision bfloat16 (Keras dtype policy mixed_bfloat16); ")
    backend = keras.backend.backend()
    if backend == "jax":
        assert line.endswith(f"compilation cache JAX's, in {tmp_path / 'xla'}")
        assert args.compilation_cache == tmp_path / "xla"
    else:  # Only JAX keeps a persistent cache: said, not silently dropped.
        assert line.endswith(f"compilation cache off (JAX only; the backend is {backend})")
        assert args.compilation_cache is None
    off = parse("--compilation-cache", "off")
    with command_line.keeping_dtype_policy():
        assert command_line.start_speed(off).endswith("compilation cache off "
                                                       "(--compilation-cache off)")


# Under JAX, in a process of its own: the flag's folder receives the
# programs compiled after `start_speed`; `auto` on a CPU keeps none.
JAX_CACHE = """
import sys
import jax
import jax.numpy as jnp
from kcse.experiments import command_line

parser = command_line.comparison_parser("doc\\n\\nmore", "out")
args = parser.parse_args(["--compilation-cache", sys.argv[1]])
command_line.check_speed_arguments(args)
print(command_line.start_speed(args))
jax.jit(lambda x: x * 2 + 1)(jnp.ones(3)).block_until_ready()
print("cache dir:", jax.config.jax_compilation_cache_dir)
"""


def test_the_compilation_cache_folder_receives_jax_programs(tmp_path):
    folder = tmp_path / "xla"
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("KCSE_COMPILATION_CACHE", None)
    run = subprocess.run([sys.executable, "-c", JAX_CACHE, str(folder)], cwd=REPO,
                         env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert f"compilation cache JAX's, in {folder}" in run.stdout
    assert f"cache dir: {folder}" in run.stdout
    assert any(path.name.endswith("-cache") for path in folder.iterdir()), list(folder.iterdir())


def test_float32_is_implied_in_shown_settings_and_differences():
    old = {"seed": 0}
    new = {"seed": 0, "precision": "bfloat16"}
    assert shown_settings(old) == {"precision": "float32", "seed": 0}
    assert setting_differences(old, new) == ["precision float32 → bfloat16"]
    assert setting_differences(old, {"seed": 0, "precision": "float32"}) == []


def test_the_cell_digest_of_a_float32_run_is_the_one_before_precision():
    # The key kcse computed before --precision existed for these settings,
    # at numerics 2 (float32 cells name no precision, so their keys stay).
    identity = dict(cell_identity({"source": "m"}, "P1", "STS-B", "d",
                                          {"seed": 0, "max_sentences": 500}), numerics=2)
    assert (cell_key("m", "P1", "STS-B", "su", "simcse", identity)
            == "m|P1|STS-B|su|simcse|2e7fac3a4a6ba36f")


def test_results_md_shows_every_cell_s_precision():
    provenance = {"date": "2025-01-01", "kcse": "0", "git_commit": None, "keras": "3",
                  "keras_hub": "0", "tensorflow": "2", "backend": "tensorflow"}

    def cell(settings):
        return {"model": "m", "model_source": {"source": "m", "description": "m",
                                               "digest": "x"},
                "pooling": "P1", "task": "STS-B", "method": "simcse", "status": "done",
                "error": None, "reported_split": "test",
                "raw": {"test": {"spearman": 1.0, "pearson": 1.0, "n": 2}},
                "whitening": None, "trained": None, "runs": [],
                "settings": settings, "settings_id": settings_id(settings),
                "provenance": provenance}

    markdown = tables.markdown({"a": cell({"seed": 0}),
                                 "b": cell({"seed": 0, "precision": "bfloat16"})})
    assert f"- **S1** (`{settings_id({'seed': 0})}`): precision float32, seed 0" in markdown
    assert "- **S2** (" in markdown and "): precision bfloat16, seed 0" in markdown
