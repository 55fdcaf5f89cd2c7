"""Atomic writes: a temporary sibling renamed into place, strict JSON."""

import json
import math
import os

import numpy as np
import pytest

from kcse import atomic_files


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
