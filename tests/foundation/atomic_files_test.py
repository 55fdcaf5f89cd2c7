"""Atomic writes: a temporary sibling renamed into place, strict JSON."""

import json
import math
import os

import numpy as np
import pytest

from kcse.foundation import atomic_files


def names(folder):
    return sorted(path.name for path in folder.iterdir())


def reject_constant(name):
    raise ValueError(f"{name} is not JSON")


def test_write_text_replaces_the_content_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "notes.md"
    atomic_files.write_text(path, "old text\n")
    atomic_files.write_text(path, "新的 text\n")
    assert path.read_text(encoding="utf-8") == "新的 text\n"
    assert names(tmp_path) == ["notes.md"]


def test_write_text_creates_missing_folders(tmp_path):
    path = tmp_path / "a" / "b" / "notes.md"
    atomic_files.write_text(path, "text")
    assert path.read_text() == "text"
    assert names(path.parent) == ["notes.md"]


def test_write_json_replaces_the_content_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "results.json"
    atomic_files.write_json(path, {"spearman": 70.0, "cells": [1, 2, 3]})
    atomic_files.write_json(path, {"spearman": 81.25, "task": "STS-B 中文"})
    assert json.loads(path.read_text(encoding="utf-8")) == {"spearman": 81.25, "task": "STS-B 中文"}
    assert "中文" in path.read_text(encoding="utf-8")  # not \\u-escaped
    assert names(tmp_path) == ["results.json"]


def test_write_json_writes_non_finite_numbers_as_null(tmp_path):
    path = tmp_path / "scores.json"
    value = {
        "nan": math.nan, "inf": math.inf, "minus_inf": -math.inf,
        "numpy_nan": np.float32("nan"), "numpy64_inf": np.float64("inf"),
        "numpy_0d_nan": np.array(np.nan),
        "nested": {"list": [1.5, math.nan, np.float64(2.5)], "tuple": (np.float32(0.5), -math.inf)},
        "finite": 81.25, "numpy_finite": np.float32(0.75), "numpy_int": np.int64(7),
        "text": "NaN", "none": None,
    }
    atomic_files.write_json(path, value)
    text = path.read_text(encoding="utf-8")
    assert "NaN" not in text.replace('"NaN"', "") and "Infinity" not in text
    assert json.loads(text, parse_constant=reject_constant) == {
        "nan": None, "inf": None, "minus_inf": None,
        "numpy_nan": None, "numpy64_inf": None, "numpy_0d_nan": None,
        "nested": {"list": [1.5, None, 2.5], "tuple": [0.5, None]},
        "finite": 81.25, "numpy_finite": 0.75, "numpy_int": 7,
        "text": "NaN", "none": None,
    }


def test_strict_leaves_finite_values_and_the_input_unchanged():
    value = {"a": [math.nan, 1.0], "b": {"c": math.inf}}
    assert atomic_files.strict(value) == {"a": [None, 1.0], "b": {"c": None}}
    assert math.isnan(value["a"][0]) and value["b"]["c"] == math.inf
    assert atomic_files.strict({"x": [1, 2.5, "s", True, None]}) == {"x": [1, 2.5, "s", True, None]}


def test_a_failing_body_leaves_the_previous_file_and_no_temporary(tmp_path):
    path = tmp_path / "vectors.npy"
    np.save(path, np.arange(3.0))
    before = path.read_bytes()
    with pytest.raises(RuntimeError, match="disk full"):
        with atomic_files.replacing(path) as temporary:
            temporary.write_bytes(b"half a file")
            assert temporary.exists() and temporary.parent == tmp_path
            raise RuntimeError("disk full")
    assert path.read_bytes() == before
    assert not temporary.exists()
    assert names(tmp_path) == ["vectors.npy"]


def test_a_failing_body_creates_no_file(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with atomic_files.replacing(tmp_path / "encoder.keras") as temporary:
            temporary.write_bytes(b"partial")
            raise KeyboardInterrupt
    assert names(tmp_path) == []


@pytest.mark.parametrize(
    "name, suffix",
    [("encoder.keras", ".tmp.keras"), ("vectors.npy", ".tmp.npy"),
     ("results.json", ".tmp.json"), ("archive.tar.gz", ".tmp.gz"), ("README", ".tmp")],
)
def test_the_temporary_is_a_hidden_sibling_with_the_suffix(tmp_path, name, suffix):
    with atomic_files.replacing(tmp_path / name) as temporary:
        assert temporary.parent == tmp_path
        assert temporary.name.startswith(f".{name}.") and temporary.name.endswith(suffix)
        assert temporary.name[len(name) + 2:-len(suffix)]  # a random part in between
        assert temporary.is_file() and temporary.stat().st_size == 0
        temporary.write_text("content")
        assert not (tmp_path / name).exists()  # renamed only at the end
    assert (tmp_path / name).read_text() == "content"
    assert names(tmp_path) == [name]


def test_numpy_saves_to_the_temporary_without_adding_a_suffix(tmp_path):
    vectors = np.arange(12, dtype="float32").reshape(3, 4)
    with atomic_files.replacing(tmp_path / "vectors.npy") as temporary:
        np.save(temporary, vectors)  # would append .npy to another suffix
    np.testing.assert_array_equal(np.load(tmp_path / "vectors.npy"), vectors)
    assert names(tmp_path) == ["vectors.npy"]


def test_temporary_siblings_are_distinct(tmp_path):
    files = {atomic_files.temporary_sibling(tmp_path / "a.json") for _ in range(5)}
    folders = {atomic_files.temporary_sibling(tmp_path / "a.json", directory=True) for _ in range(5)}
    assert len(files) == 5 and all(path.is_file() for path in files)
    assert len(folders) == 5 and all(path.is_dir() for path in folders)


def write_tree(folder, files):
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)


def tree(folder):
    return {str(path.relative_to(folder)): path.read_text()
            for path in folder.rglob("*") if path.is_file()}


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two-renames"])
def test_replace_directory_replaces_a_non_empty_folder(tmp_path, monkeypatch, exchange):
    if not exchange:  # the path taken where the kernel cannot swap two paths
        monkeypatch.setattr(atomic_files, "_exchange", lambda a, b: False)
    destination = tmp_path / "saved_model"
    write_tree(destination, {"saved_model.pb": "old graph", "variables/variables.index": "old",
                             "assets/vocab.txt": "old vocabulary"})
    source = atomic_files.temporary_sibling(destination, directory=True)
    write_tree(source, {"saved_model.pb": "new graph", "variables/variables.index": "new",
                        "fingerprint.pb": "new"})
    atomic_files.replace_directory(source, destination)
    assert tree(destination) == {"saved_model.pb": "new graph",
                                 "variables/variables.index": "new", "fingerprint.pb": "new"}
    assert not (destination / "assets").exists()
    assert names(tmp_path) == ["saved_model"]  # neither the old folder nor the source


def test_replace_directory_creates_a_missing_destination(tmp_path):
    destination = tmp_path / "out" / "saved_model"
    destination.parent.mkdir()
    source = atomic_files.temporary_sibling(destination, directory=True)
    write_tree(source, {"saved_model.pb": "graph", "variables/variables.index": "index"})
    atomic_files.replace_directory(source, destination)
    assert tree(destination) == {"saved_model.pb": "graph", "variables/variables.index": "index"}
    assert names(tmp_path / "out") == ["saved_model"]


def test_exchange_swaps_two_folders_or_changes_nothing(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write_tree(a, {"x.txt": "from a"})
    write_tree(b, {"y.txt": "from b"})
    if atomic_files._exchange(a, b):
        assert tree(a) == {"y.txt": "from b"} and tree(b) == {"x.txt": "from a"}
    else:
        assert tree(a) == {"x.txt": "from a"} and tree(b) == {"y.txt": "from b"}
    assert not atomic_files._exchange(tmp_path / "missing", a)
    assert tree(tmp_path / "missing") == {} and names(tmp_path) == ["a", "b"]


def test_written_files_and_folders_get_ordinary_permissions(tmp_path):
    """mkstemp's private 0600 must not leak into the file a reader opens."""
    umask = os.umask(0o022)
    try:
        atomic_files.write_text(tmp_path / "new.txt", "x")
        assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o644
        (tmp_path / "shared.txt").write_text("old")
        os.chmod(tmp_path / "shared.txt", 0o664)
        atomic_files.write_text(tmp_path / "shared.txt", "new")
        assert (tmp_path / "shared.txt").stat().st_mode & 0o777 == 0o664
        new = atomic_files.temporary_sibling(tmp_path / "saved", directory=True)
        (new / "saved_model.pb").write_text("pb")
        atomic_files.replace_directory(new, tmp_path / "saved")
        assert (tmp_path / "saved").stat().st_mode & 0o777 == 0o755
    finally:
        os.umask(umask)


def test_replace_directory_replaces_a_file_too(tmp_path):
    (tmp_path / "export").write_text("a file where the SavedModel goes")
    new = atomic_files.temporary_sibling(tmp_path / "export", directory=True)
    (new / "saved_model.pb").write_text("pb")
    atomic_files.replace_directory(new, tmp_path / "export")
    assert (tmp_path / "export" / "saved_model.pb").read_text() == "pb"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export"]


@pytest.mark.parametrize("no_renameat2", [False, True], ids=["renameat2", "check-then-rename"])
def test_a_file_made_while_one_is_written_without_replace_is_kept(tmp_path, monkeypatch,
                                                                   no_renameat2):
    if no_renameat2:  # The path taken where the kernel has no RENAME_NOREPLACE.
        monkeypatch.setattr(atomic_files, "_renameat2", lambda *args, **kwargs: None)
    path = tmp_path / "vectors.npy"
    with pytest.raises(atomic_files.OutputExistsError) as error:
        with atomic_files.replacing(path, replace=False) as temporary:
            temporary.write_bytes(b"new")
            path.write_bytes(b"another program's")  # Made meanwhile.
    assert isinstance(error.value, FileExistsError)
    assert str(error.value) == (f"cannot write {path}: it appeared or changed while kcse was "
                                "writing it; it is left as it was and the new one is not kept")
    assert path.read_bytes() == b"another program's" and names(tmp_path) == ["vectors.npy"]
    atomic_files.write_text(tmp_path / "new.txt", "x", replace=False)  # Absent: written.
    assert (tmp_path / "new.txt").read_text() == "x"


def test_a_written_folder_lists_its_files_and_only_they_are_replaced(tmp_path):
    folder = tmp_path / "export"
    for text in ("first", "second"):  # The second replaces what the first wrote.
        with atomic_files.writing_folder(folder, overwrite=True) as temporary:
            write_tree(temporary, {"model.onnx": text, "1_Pooling/config.json": "{}"})
    assert tree(folder)["model.onnx"] == "second"
    assert json.loads((folder / atomic_files.MANIFEST).read_text()) == {
        "written_by": "kcse", "files": ["1_Pooling/config.json", "model.onnx"]}
    assert atomic_files.foreign_file(folder) is None
    (folder / "1_Pooling" / "notes.txt").write_text("mine")
    before = tree(folder)
    assert atomic_files.foreign_file(folder) == "1_Pooling/notes.txt"
    with pytest.raises(FileExistsError, match="holds 1_Pooling/notes.txt, which kcse did not "
                       "write there; overwrite replaces only a folder kcse wrote"):
        atomic_files.check_replaceable(folder, overwrite=True)
    with pytest.raises(FileExistsError, match="exists and is not empty; pass overwrite=True"):
        atomic_files.check_replaceable(folder, overwrite=False)
    (folder / "1_Pooling" / "notes.txt").unlink()
    (folder / atomic_files.MANIFEST).write_text("not JSON")  # Unreadable: all the user's.
    assert atomic_files.foreign_file(folder) == "1_Pooling/config.json"
    (folder / "1_Pooling" / "notes.txt").write_text("mine")
    assert tree(folder) == before | {atomic_files.MANIFEST: "not JSON"}
    (tmp_path / "a_file").write_text("mine")
    with pytest.raises(FileExistsError, match="a_file is a file; kcse writes a folder only"):
        atomic_files.check_replaceable(tmp_path / "a_file", overwrite=True)
    (tmp_path / "empty").mkdir()
    atomic_files.check_replaceable(tmp_path / "empty", overwrite=False)  # Taken as it is.


def test_a_user_file_put_in_the_folder_while_it_is_written_is_kept(tmp_path):
    folder = tmp_path / "export"
    with atomic_files.writing_folder(folder) as temporary:
        write_tree(temporary, {"model.onnx": "first"})
    with pytest.raises(atomic_files.OutputExistsError, match="notes.txt, which kcse did not"):
        with atomic_files.writing_folder(folder, overwrite=True) as temporary:
            write_tree(temporary, {"model.onnx": "second"})
            (folder / "notes.txt").write_text("mine")  # Meanwhile.
    assert tree(folder) == {"model.onnx": "first", "notes.txt": "mine",
                            atomic_files.MANIFEST: tree(folder)[atomic_files.MANIFEST]}
    assert names(tmp_path) == ["export"]  # No temporary left.
    with pytest.raises(atomic_files.OutputExistsError, match="exists and is not empty"):
        with atomic_files.writing_folder(tmp_path / "new") as temporary:
            write_tree(temporary, {"model.onnx": "mine"})
            write_tree(tmp_path / "new", {"other.txt": "made meanwhile"})
    assert tree(tmp_path / "new") == {"other.txt": "made meanwhile"}
