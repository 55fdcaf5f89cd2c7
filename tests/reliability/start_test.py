"""`import kcse` is light, Keras still finds kcse's classes, TensorFlow starts quietly
(in the commands and at the first public name that imports it), at the user's level."""

import os
import subprocess
import sys

import keras_hub
import numpy as np
import pytest

import kcse
from command_runs import TENSORFLOW_LOG_LINE
from kcse.foundation import keras_start


def python(code, *arguments, environment=None):
    """`code` run by a fresh interpreter; with `environment`, TF_CPP_MIN_LOG_LEVEL
    is `environment`'s (unset when it has none), not the tests'."""
    env = None
    if environment is not None:
        env = {key: value for key, value in os.environ.items()
               if key != "TF_CPP_MIN_LOG_LEVEL"} | environment
    return subprocess.run([sys.executable, "-c", code, *map(str, arguments)],
                          capture_output=True, text=True, env=env)


def test_importing_kcse_and_its_command_imports_neither_keras_nor_tensorflow():
    result = python("import sys, kcse, kcse.commands.main, kcse.foundation.arguments; "
                    "print(sorted({'keras', 'tensorflow'} & set(sys.modules)))")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_keras_loads_a_saved_encoder_after_a_plain_import_kcse(tmp_path):
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=20, num_layers=1, num_heads=1, hidden_dim=4,
        intermediate_dim=4, max_sequence_length=8)
    whitening = kcse.layers.Whitening()  # A layer no kcse module imports.
    whitening.adapt(np.random.default_rng(0).normal(size=(16, 4)).astype("float32"))
    kcse.SentenceEncoder(backbone, pooling="P4", whitening=whitening).save(tmp_path / "e.keras")
    for imports in ("import kcse, keras", "import keras, kcse"):
        result = python(f"{imports}, sys; model = keras.saving.load_model(sys.argv[1]); "
                        "print(type(model).__name__, model.pooling)", tmp_path / "e.keras")
        assert result.returncode == 0, (imports, result.stderr[-2000:])
        assert result.stdout.split()[-2:] == ["SentenceEncoder", "first_last_avg"]


def test_start_keras_hides_start_up_lines_and_keeps_others():
    code = (
        "import os\n"
        "from kcse.foundation import keras_start\n"
        "with keras_start.quiet_start():\n"
        "    os.write(2, b'I0000 00:00:1 1 port.cc:153] oneDNN custom operations are on.\\n')\n"
        "    os.write(2, b'E0000 00:00:1 1 cuda_platform.cc:52] failed call to cuInit\\n')\n"
        "    os.write(2, b'E0000 00:00:1 1 some_op.cc:1] a real error\\n')\n"
        "keras_start.start_keras()\n"
        "import tensorflow as tf\n"
        "tf.constant(1.0) + 1\n"
        "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])\n"
    )
    result = python(code, environment={})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr == "E0000 00:00:1 1 some_op.cc:1] a real error\n"
    assert result.stdout == "3\n"  # Unset, kcse's level.


@pytest.mark.parametrize("level,shown", [(None, False), ("3", False), ("0", True)])
def test_import_kcse_starts_tensorflow_quietly_at_the_users_level(level, shown):
    """A public name that imports TensorFlow (`kcse.SentenceEncoder`) writes
    no start-up line; a TF_CPP_MIN_LOG_LEVEL the user set is kept, and 0
    shows them all, as TensorFlow alone would."""
    code = ("import os, kcse\n"
            "kcse.data.read_pairs\n"  # No TensorFlow: the environment as it was.
            "print(os.environ.get('TF_CPP_MIN_LOG_LEVEL'))\n"
            "kcse.SentenceEncoder\n"
            "import tensorflow as tf\n"
            "tf.constant(1.0) + 1\n"
            "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])\n")
    result = python(code, environment={} if level is None else {"TF_CPP_MIN_LOG_LEVEL": level})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == f"{level}\n{level or keras_start.QUIET_LEVEL}\n"
    if shown:
        assert TENSORFLOW_LOG_LINE.search(result.stderr), result.stderr[-2000:]
    else:
        assert result.stderr == ""


@pytest.mark.parametrize("level,hidden", [
    ("0", []), ("1", ["info", "preamble", "cpu"]),
    ("2", ["info", "preamble", "cpu", "warning"]),
    ("3", ["info", "preamble", "cpu", "warning", "cuinit"]), ("x", []),
])
def test_start_up_lines_are_hidden_as_the_level_hides_tensorflows_records(level, hidden):
    lines = {
        "info": b"I0000 00:00:1 1 port.cc:153] oneDNN custom operations are on.\n",
        "preamble": b"WARNING: All log messages before absl::InitializeLog() is called\n",
        "cpu": b"To enable the following instructions: AVX2 FMA, in other operations\n",
        "warning": b"W0000 00:00:1 1 gpu_device.cc:1] Cannot dlopen some GPU libraries.\n",
        "cuinit": b"E0000 00:00:1 1 cuda_platform.cc:52] failed call to cuInit: 303\n",
        "error": b"E0000 00:00:1 1 some_op.cc:1] a real error\n",
        "python": b"UserWarning: not TensorFlow's\n",
    }
    assert [name for name, line in lines.items()
            if keras_start.hidden(line, level)] == hidden


def test_a_failing_import_shows_what_it_wrote():
    code = (
        "import os\n"
        "from kcse.foundation import keras_start\n"
        "try:\n"
        "    with keras_start._stderr_to_file():\n"
        "        os.write(2, b'I0000 the line before the failure\\n')\n"
        "        raise ImportError('broken')\n"
        "except ImportError:\n"
        "    pass\n"
    )
    result = python(code)
    assert result.stderr == "I0000 the line before the failure\n"

