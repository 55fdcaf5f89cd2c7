"""Runs the examples in the docstrings of kcse's public API.

The public API is every name in the `__all__` of every kcse package. Each
public class and function carries at least one ```python example (the
keras-hub docstring convention) that runs offline, on a tiny random
configuration or a bundled file; the `*_examples_test.py` files run them,
one test per public object, grouped by the package that defines it.
"""

import importlib
import inspect
import pkgutil
import re

import kcse

EXAMPLE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def packages():
    """Every kcse package (folders with an `__init__.py`), by name."""
    names = ["kcse"]
    for info in pkgutil.walk_packages(kcse.__path__, "kcse."):
        if info.ispkg:
            names.append(info.name)
    return names


def public_objects():
    """`{qualified name: object}` of every public class and function, once each.

    An object exported by several packages (`kcse.SimCSE` is
    `kcse.objectives.SimCSE`) is listed under its defining module.
    """
    found = {}
    for package in packages():
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) or inspect.isfunction(value):
                found.setdefault(f"{value.__module__}.{value.__qualname__}", value)
    return dict(sorted(found.items()))


def objects_of(subpackage):
    """The public objects defined under `kcse.<subpackage>` (None: kcse's top level)."""
    prefix = "kcse." if subpackage is None else f"kcse.{subpackage}."
    return {
        name: value for name, value in public_objects().items()
        if name.startswith(prefix) and (
            subpackage is not None or name.count(".") == 2)
    }


def examples(value):
    """The ```python blocks of `value`'s own docstring (not an inherited one)."""
    return EXAMPLE.findall(inspect.cleandoc(value.__doc__ or ""))


def run_examples(name, value, folder, monkeypatch):
    """Runs each example of `value` in a fresh namespace, inside `folder`."""
    codes = examples(value)
    assert codes, f"{name}: its docstring has no ```python example"
    monkeypatch.chdir(folder)
    for number, code in enumerate(codes, 1):
        exec(compile(code, f"<example {number} of {name}>", "exec"), {"__name__": "__example__"})
