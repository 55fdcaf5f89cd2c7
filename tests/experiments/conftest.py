import pytest
from tiny_grid import stsb_sample
from tiny_grid import tiny_checkpoint
from tiny_grid import write_task


@pytest.fixture
def tiny_setup(tmp_path, shared_data):
    sample = stsb_sample(shared_data)
    write_task(tmp_path / "data", "STS-B", sample, lambda label: int(label))
    checkpoint = tiny_checkpoint(tmp_path / "tiny_bert", sample)
    return tmp_path, f"{checkpoint}:bert"
