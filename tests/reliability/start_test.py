"""`import kcse` is light, Keras still finds kcse's classes, TensorFlow starts quietly."""

import subprocess
import sys

import keras_hub
import numpy as np

import kcse


def python(code, *arguments):
    return subprocess.run([sys.executable, "-c", code, *map(str, arguments)],
                          capture_output=True, text=True)


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
        "with keras_start._stderr_to_file() as lines:\n"
        "    os.write(2, b'I0000 00:00:1 1 port.cc:153] oneDNN custom operations are on.\\n')\n"
        "    os.write(2, b'E0000 00:00:1 1 cuda_platform.cc:52] failed call to cuInit\\n')\n"
        "    os.write(2, b'E0000 00:00:1 1 some_op.cc:1] a real error\\n')\n"
        "keras_start._write_stderr(\n"
        "    [line for line in lines if not keras_start.START_UP_LINE.match(line)])\n"
        "keras_start.start_keras()\n"
        "import tensorflow as tf\n"
        "tf.constant(1.0) + 1\n"
    )
    result = python(code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr == "E0000 00:00:1 1 some_op.cc:1] a real error\n"


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

