"""A disk that fills up while kcse writes: one line, exit 1, nothing lost.

The disk is a small tmpfs the test mounts (as root on Linux), filled
until the wanted number of bytes is free, so that a write fails at that
position with ENOSPC. Where no tmpfs can be mounted, the process's file
size limit (`RLIMIT_FSIZE`, with SIGXFSZ ignored) makes the kernel refuse
every write past that many bytes of a file with EFBIG instead. Either
way the write fails in the kernel, wherever it comes from (numpy, h5py,
TensorFlow's C++ file system). `KCSE_TEST_DISK=size-limit` runs the
second way where the first works.

Each case checks what the issue asks of kcse: exit code 1 (`kcse`) and
one line on stderr naming the file and the space; every file that was on
the disk before byte-identical; no temporary left; no SIGBUS (the old
`.npy` writer memory-mapped its output, which a full tmpfs kills).
"""

import contextlib
import os
import pathlib
import re
import resource
import signal
import subprocess

import keras
import numpy as np
import pytest

import kcse
from conftest import tiny_encoder_file
from kcse.foundation import atomic_files
from kcse.commands.main import main as kcse_main
from kcse.experiments import methods
from kcse.experiments.results.store import ResultStore
from results_cells import grid_cell
from tiny_grid import tiny_task_and_model

DISK_BYTES = 4 * 2**20
FILLER = "filler"


class SmallDisk:
    """A folder where writes fail once `free` bytes are used (`leave`)."""

    def __init__(self, folder, mount=True):
        self.folder = folder
        self.mounted = mount and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(folder)],
            capture_output=True).returncode == 0

    @contextlib.contextmanager
    def leave(self, free):
        """Writes fail past `free` more bytes on the disk (tmpfs) or per file
        (the file size limit) inside the block."""
        if self.mounted:
            filler = self.folder / FILLER
            filler.unlink(missing_ok=True)
            available = os.statvfs(self.folder).f_bavail * os.statvfs(self.folder).f_frsize
            with open(filler, "wb") as file:
                file.write(b"\0" * max(available - free, 0))
            yield
            filler.unlink()
            return
        # The limit starts when kcse makes its temporary, after the model
        # loaded (Keras unpacks a .keras file into temporary files).
        previous = resource.getrlimit(resource.RLIMIT_FSIZE)
        handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        make_temporary = atomic_files.temporary_sibling

        def limited_temporary(*args, **kwargs):
            temporary = make_temporary(*args, **kwargs)
            resource.setrlimit(resource.RLIMIT_FSIZE, (max(free, 1), previous[1]))
            return temporary

        atomic_files.temporary_sibling = limited_temporary
        try:
            yield
        finally:
            atomic_files.temporary_sibling = make_temporary
            resource.setrlimit(resource.RLIMIT_FSIZE, previous)
            signal.signal(signal.SIGXFSZ, handler)

    def files(self):
        """`{relative path: bytes}` of every file on the disk but the filler."""
        return {str(path.relative_to(self.folder)): path.read_bytes()
                for path in sorted(self.folder.rglob("*"))
                if path.is_file() and path.name != FILLER}

    def close(self):
        if self.mounted:
            subprocess.run(["umount", str(self.folder)], check=True)


@pytest.fixture
def disk(tmp_path):
    folder = tmp_path / "disk"
    folder.mkdir()
    small = SmallDisk(folder, mount=os.environ.get("KCSE_TEST_DISK") != "size-limit")
    yield small
    small.close()


@pytest.fixture(scope="module")
def encoder_file(tmp_path_factory):
    return tiny_encoder_file(tmp_path_factory.mktemp("model"), 2000)


def write_earlier_files(disk):
    """Files a user had on the disk: each must survive byte for byte."""
    (disk.folder / "notes.txt").write_text("kept\n")
    np.save(disk.folder / "vectors.npy", np.arange(6, dtype="float32").reshape(3, 2))
    (disk.folder / "vectors.jsonl").write_text('{"text": "old", "line": 1}\n')
    (disk.folder / "served").mkdir()
    (disk.folder / "served" / "saved_model.pb").write_bytes(b"earlier export")
    (disk.folder / "served" / "kcse_export.json").write_text(  # What kcse wrote there.
        '{"written_by": "kcse", "files": ["saved_model.pb"]}\n')
    return disk.files()


# What kcse writes while a step runs (kcse.foundation.progress): a slow
# machine may show one before the error, which must still be one line.
PROGRESS_LINE = re.compile(r"[\w ]+: .*\d+ s(, about \d+ s left)?")


def assert_nothing_lost(disk, before, code, stderr, path):
    lines = [line for line in stderr.strip().splitlines() if not PROGRESS_LINE.fullmatch(line)]
    assert code == 1, stderr
    assert len(lines) == 1, stderr
    assert f"error: cannot write {path}: " in lines[0], stderr
    assert (" free there" in lines[0]) and "nothing written" in lines[0], stderr
    assert disk.files() == before
    assert not [p for p in disk.folder.rglob(".*")], "a temporary was left behind"


@pytest.mark.parametrize("suffix,free", [(".npy", 0), (".npy", 8192), (".npy", 40000),
                                         (".jsonl", 8192), (".jsonl", 200000)])
def test_encode_on_a_full_disk(encoder_file, disk, capsys, suffix, free):
    model, texts = encoder_file
    before = write_earlier_files(disk)
    output = disk.folder / f"vectors{suffix}"
    with disk.leave(free):
        code = kcse_main(["encode", "--model", str(model), "--input", str(texts),
                         "--output", str(output), "--overwrite"])
    assert_nothing_lost(disk, before, code, capsys.readouterr().err, output)


def test_encode_writes_npy_with_ordinary_writes_that_numpy_reads(encoder_file, tmp_path):
    model, texts = encoder_file
    output = tmp_path / "vectors.npy"
    assert kcse_main(["encode", "--model", str(model), "--input", str(texts),
                     "--output", str(output)]) == 0
    vectors = np.load(output)
    expected = keras.saving.load_model(model).encode(texts.read_text().splitlines())
    assert vectors.shape == expected.shape == (2000, 8)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)


ONNX_INT8 = ("--format", "onnx", "--quantize", "int8")
# ONNX: 8 KB fails in ONNX Runtime's write of model.onnx ("Protobuf
# serialization failed"); "quantiser" in ONNX Runtime's int8 quantiser (a
# short file it reads back): 200 KB on the disk, or 100 KB a file (the tiny
# model.onnx is 88 KB, model_int8.onnx 128 KB).
QUANTISER_FAILS = {True: 200000, False: 100000}


@pytest.mark.parametrize("options,free", [((), 8192), ((), 200000), ((), 600000),
                                          (ONNX_INT8, 8192), (ONNX_INT8, "quantiser")])
def test_export_on_a_full_disk(encoder_file, disk, capsys, options, free):
    model, _ = encoder_file
    before = write_earlier_files(disk)
    free = QUANTISER_FAILS[disk.mounted] if free == "quantiser" else free
    with disk.leave(free):
        code = kcse_main(["export", "--model", str(model), "--output",
                         str(disk.folder / "served"), "--overwrite", *options])
    assert_nothing_lost(disk, before, code, capsys.readouterr().err, disk.folder / "served")


@pytest.fixture(scope="module")
def tiny_task(tmp_path_factory, shared_data):
    folder = tmp_path_factory.mktemp("task")
    return folder, tiny_task_and_model(folder, shared_data)


def train_arguments(tiny_task, output):
    folder, model = tiny_task
    return ["train", "--model", model, "--pooling", "P1", "--data-dir", str(folder / "data"),
            "--task", "STS-B", "--protocol", "su", "--sentences", "32",
            "--batch-size", "16", "--output", str(output), "--overwrite"]


def test_train_checks_the_room_for_its_model_before_training(tiny_task, disk, capsys,
                                                              monkeypatch):
    before = write_earlier_files(disk)
    trained = []
    monkeypatch.setattr(methods.SimCSEMethod, "train",
                        lambda *args, **kwargs: trained.append(True))
    output = disk.folder / "run"
    with disk.leave(4096):
        code = kcse_main(train_arguments(tiny_task, output))
    stderr = capsys.readouterr().err
    assert_nothing_lost(disk, before, code, stderr, output / "encoder.keras")
    assert not output.exists()
    if disk.mounted:  # A file size limit does not show in the free space.
        assert not trained and "needed)" in stderr


def test_a_trained_encoder_that_cannot_be_written_goes_to_the_temporary_folder(
        tiny_task, tmp_path, capsys, monkeypatch):
    """The disk fills during training: the trained model is saved elsewhere."""
    output = tmp_path / "run"
    real_save = kcse.SentenceEncoder.save

    def full_disk_at_output(self, path, **kwargs):
        if pathlib.Path(path).parent == output:
            with atomic_files.replacing(path) as temporary:
                temporary.write_bytes(b"x")
                raise OSError(28, os.strerror(28), str(temporary))
        return real_save(self, path, **kwargs)

    monkeypatch.setattr(kcse.SentenceEncoder, "save", full_disk_at_output)
    code = kcse_main(train_arguments(tiny_task, output))
    line = capsys.readouterr().err.strip()
    assert code == 1 and len(line.splitlines()) == 1, line
    assert f"cannot write {output / 'encoder.keras'}: No space left on device" in line
    rescued = pathlib.Path(line.rsplit("kept ", 1)[1].split(" (written")[0])
    assert rescued.name == "encoder.keras" and rescued.parent != output
    assert isinstance(keras.saving.load_model(rescued), kcse.SentenceEncoder)
    rescued.unlink()
    rescued.parent.rmdir()
    assert not output.exists() or not list(output.iterdir())


def test_results_on_a_full_disk_keep_the_earlier_cells(disk):
    """A cell whose results cannot be written: the files on disk stay as they were."""
    store = ResultStore(disk.folder)
    store.add(*grid_cell(0, 1))
    before = disk.files()
    with disk.leave(100), pytest.raises(atomic_files.WriteError) as error:
        ResultStore(disk.folder).add(*grid_cell(1, 2))
    assert str(error.value).startswith(f"cannot write {disk.folder / 'results.json'}: ")
    assert disk.files() == before
    assert not [p for p in disk.folder.glob(".*") if ".tmp" in p.name]
