"""kcse's import graph, read from the source with `ast`: no cycle, and no
module imports from a layer above its own (ARCHITECTURE.md's "Layers,
bottom to top").

Every import counts, at module level or inside a function: a lazy import
still makes its module depend on the one imported. `from kcse.x import y`
is an import of module `kcse.x.y` when there is one, else of the module
that package `kcse.x` lazily exports `y` from (`kcse.public_api`'s table),
else of `kcse.x` itself.
"""

import ast
import importlib.util
import pathlib
import re

import pytest

from kcse import public_api

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "kcse"
ARCHITECTURE = ROOT / "ARCHITECTURE.md"


def module_names():
    """`{module name: its file}` of every module under kcse/ (a package by its name)."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


MODULES = module_names()
TREES = {name: ast.parse(path.read_text(), str(path)) for name, path in MODULES.items()}


def lazy_exports(package):
    """`{public name: module}` that `package` exports lazily, from `kcse.public_api`."""
    return public_api.exported_by(package) if package in public_api.PACKAGES else {}


def imported_module(name):
    """The kcse module that an import of `name` loads (its nearest existing parent)."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports_of(module, nodes=None):
    """`[(imported kcse module, line)]` of every import in `module`'s source
    (of `nodes` of its tree, when given)."""
    is_package = MODULES[module].name == "__init__.py"
    found = []
    for node in ast.walk(TREES[module]) if nodes is None else nodes:
        if isinstance(node, ast.Import):
            found += [(imported_module(alias.name), node.lineno) for alias in node.names
                      if alias.name.split(".")[0] == "kcse"]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module if is_package else module.rpartition(".")[0]
                base = importlib.util.resolve_name("." * node.level + base, package)
            if base.split(".")[0] != "kcse":
                continue
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    target = f"{base}.{alias.name}"
                elif base in MODULES and alias.name in lazy_exports(base):
                    target = lazy_exports(base)[alias.name]
                else:
                    target = imported_module(base)
                found.append((target, node.lineno))
    return [(target, line) for target, line in found if target != module]


IMPORTS = {module: imports_of(module) for module in MODULES}


def declared_layers():
    """`[(layer, [module or package names])]`, bottom to top, from ARCHITECTURE.md."""
    text = ARCHITECTURE.read_text()
    section = re.search(r"^## Layers, bottom to top\n(.*?)^```text\n(.*?)^```", text, re.S | re.M)
    assert section, 'ARCHITECTURE.md: no "## Layers, bottom to top" with a ```text block'
    layers = []
    for line in section.group(2).splitlines():
        if line.strip():
            layer, names = line.split(":", 1)
            layers.append((layer.strip(), names.split()))
    return layers


LAYERS = declared_layers()


def layer_of(module):
    """The index in `LAYERS` of `module`'s layer: its longest listed prefix; or None."""
    best = None
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            if module == name or module.startswith(name + "."):
                if best is None or len(name) > len(best[1]):
                    best = (index, name)
    return None if best is None else best[0]


def test_every_module_is_in_one_declared_layer():
    listed = [name for _, names in LAYERS for name in names]
    assert len(listed) == len(set(listed)), "a name is listed in two layers"
    assert not [name for name in listed if name not in MODULES], "listed but not in kcse/"
    # The top package lazily exports names of every layer and imports none.
    unplaced = [module for module in MODULES if module != "kcse" and layer_of(module) is None]
    assert not unplaced, f"in no layer of ARCHITECTURE.md: {unplaced}"


def cycles():
    """One shortest import cycle through each strongly connected group of modules."""
    graph = {module: {target for target, _ in IMPORTS[module]} for module in MODULES}
    found, seen = [], set()
    for start in sorted(graph):
        if start in seen:
            continue
        # Breadth-first from start back to start: the shortest cycle through it.
        paths, parents = [start], {}
        while paths and start not in parents:
            following = []
            for module in paths:
                for target in sorted(graph[module]):
                    if target not in parents:
                        parents[target] = module
                        following.append(target)
            paths = following
        if start not in parents:
            continue
        chain, module = [start], parents[start]
        while module != start:
            chain.append(module)
            module = parents[module]
        chain.append(start)
        chain.reverse()
        seen.update(chain)
        found.append(" -> ".join(chain))
    return found


def test_no_import_cycle():
    found = cycles()
    if found:
        pytest.fail("import cycles:\n" + "\n".join(found), pytrace=False)


def upward_imports():
    """Each import from a module's layer to a higher one, as a line of text."""
    names = [layer for layer, _ in LAYERS]
    found = []
    for module in sorted(MODULES):
        if module == "kcse":
            continue
        for target, line in IMPORTS[module]:
            if target != "kcse" and layer_of(target) > layer_of(module):
                found.append(
                    f"{MODULES[module].relative_to(ROOT)}:{line}: {module} "
                    f"({names[layer_of(module)]}) imports {target} ({names[layer_of(target)]})"
                )
    return found


def test_no_import_from_a_lower_layer_to_a_higher_one():
    found = upward_imports()
    if found:
        pytest.fail("imports up the layers:\n" + "\n".join(found), pytrace=False)
