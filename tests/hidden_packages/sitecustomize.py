"""Makes this Python process a stand-in for the GPU machine (no TensorFlow).

A process started with this folder first on PYTHONPATH (see
`tests/tensorflow_free.py`) cannot import the packages that the GPU machine
lacks (../shared/docs/gpu_check.md): each raises `ModuleNotFoundError`, as
if it were not installed, even though it is installed here.
"""

import importlib.abc
import os
import sys

HIDDEN_PACKAGES = tuple(os.environ.get("KCSE_HIDDEN_PACKAGES", "").split(","))


class HiddenPackages(importlib.abc.MetaPathFinder):
    """Answers an import of a hidden package (or its submodules) as not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN_PACKAGES:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, HiddenPackages())
