"""The Keras backend a command runs on: one line, exit 2, before Keras starts.

An unknown `KERAS_BACKEND` was Keras' `ValueError` from deep inside its
import (a traceback); `KERAS_BACKEND=jax kcse export` kcse's own
RuntimeError, but as a traceback after the model loaded. Each case runs
the command as a user does (`cli_errors_test.run`: a fresh process) and
asserts one line naming the variable and what to do, and that TensorFlow
was not imported.
"""

import json
import os
import subprocess
import sys

import pytest

from cli_errors_test import REPO
from cli_errors_test import assert_one_line_error
from cli_errors_test import run
from kcse.foundation import backend_choice

SUPPORTED = "kcse runs on the Keras backends tensorflow and jax; set KERAS_BACKEND=tensorflow"


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    path = tmp_path_factory.mktemp("backend") / "texts.txt"
    path.write_text("你好\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("backend", ["foo", "torch", "numpy"])
@pytest.mark.parametrize("command", ["encode", "export"])
def test_a_backend_kcse_does_not_run_on_is_refused(backend, command, texts, tmp_path):
    output = ["--output", tmp_path / ("v.npy" if command == "encode" else "served")]
    inputs = ["--input", texts] if command == "encode" else []
    result = run("kcse", command, "--model", "e5-small", *inputs, *output,
                 KERAS_BACKEND=backend)
    assert_one_line_error(result, f"kcse {command}", f"KERAS_BACKEND={backend}: {SUPPORTED}")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("export_format", ["tf_saved_model", "onnx"])
def test_a_tensorflow_format_on_jax_is_refused_before_the_model_loads(export_format, tmp_path):
    result = run("kcse", "export", "--model", "e5-small", "--format", export_format,
                 "--output", tmp_path / "served", KERAS_BACKEND="jax")
    assert_one_line_error(
        result, "kcse export", f"--format {export_format} runs on the TensorFlow backend; "
        "this is KERAS_BACKEND=jax: run it with KERAS_BACKEND=tensorflow")


def test_keras_json_names_the_backend_when_the_variable_does_not(tmp_path, texts):
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "mxnet"}))
    result = run("kcse", "encode", "--model", "e5-small", "--input", texts,
                 "--output", tmp_path / "v.npy", KERAS_HOME=str(tmp_path), KERAS_BACKEND="")
    assert_one_line_error(result, "kcse encode",
                          f"the \"backend\" of {tmp_path / 'keras.json'}=mxnet: {SUPPORTED}")


@pytest.mark.parametrize("target", ["kcse", "chinese_simcse.py", "english_simcse.py"])
def test_a_keras_json_keras_rejects_is_one_line_naming_it(target, tmp_path, texts,
                                                          shared_data):
    """Keras raises its ValueError as it is imported (after the arguments
    are checked: `start_keras`); it was a traceback."""
    (tmp_path / "keras.json").write_text(json.dumps({"floatx": "float8"}))
    arguments = {
        "kcse": ["encode", "--model", "e5-small", "--input", texts, "--output",
                 tmp_path / "v.npy"],
        "chinese_simcse.py": ["--output", tmp_path / "out"],
        "english_simcse.py": ["--data-dir", shared_data, "--model", "e5-small",
                              "--output", tmp_path / "out"]}[target]
    command = "kcse" if target == "kcse" else REPO / "recipes" / target
    result = run(command, *arguments, KERAS_HOME=str(tmp_path), KERAS_BACKEND="")
    assert_one_line_error(result, "kcse encode" if target == "kcse" else target,
                          f"{tmp_path / 'keras.json'}: Keras cannot start with it: Invalid "
                          "`floatx` configuration.")


def test_a_recipe_refuses_an_unknown_backend(tmp_path):
    result = run(REPO / "recipes" / "chinese_simcse.py", "--output", tmp_path / "out",
                 KERAS_BACKEND="foo")
    assert_one_line_error(result, "chinese_simcse.py", f"KERAS_BACKEND=foo: {SUPPORTED}")


def test_the_choice_is_read_as_keras_reads_it(tmp_path):
    """Keras' own choice (its config module, run in a fresh process) for
    each way of setting it; kcse reads it before Keras is imported."""
    (tmp_path / "keras.json").write_text(json.dumps({"backend": "jax"}))
    # Keras alone: kcse's hook that registers its classes when Keras loads
    # (kcse/__init__.py) would import keras-hub and TensorFlow, seconds of
    # CPU a case that the backend Keras picks does not depend on.
    code = ("import sys, kcse.foundation.backend_choice as choice; before = choice.chosen_backend(); "
            "sys.meta_path[:] = [finder for finder in sys.meta_path "
            "if type(finder).__name__ != '_RegisterWhenKerasLoads']; "
            "import keras; assert 'kcse.sentence_encoder' not in sys.modules; "
            "print(before, keras.config.backend())")
    for environment, expected in [({"KERAS_BACKEND": "jax"}, "jax"),
                                  ({"KERAS_BACKEND": "", "KERAS_HOME": str(tmp_path)}, "jax"),
                                  ({"KERAS_BACKEND": "tensorflow",
                                    "KERAS_HOME": str(tmp_path)}, "tensorflow")]:
        env = dict(os.environ, **environment)
        result = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                text=True, env=env, cwd=REPO)
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.split()[-2:] == [expected, expected], environment
    assert backend_choice.chosen_backend() == "tensorflow"  # Keras is imported here.
