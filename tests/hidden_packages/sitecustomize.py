"""Makes this Python process a stand-in for the GPU machine (no TensorFlow).

A process started with this folder first on PYTHONPATH (see
`tests/tensorflow_free.py`) cannot import the packages that the GPU machine
lacks (../shared/docs/gpu_check.md): as if they were not installed, even
though they are here, `import` raises `ModuleNotFoundError` and
`importlib.util.find_spec` gives None (what transformers, for one, asks of
tensorflow_text before it imports).
"""

import os
import sys

HIDDEN_PACKAGES = tuple(os.environ.get("KCSE_HIDDEN_PACKAGES", "").split(","))


class HidingFinder:
    """One of `sys.meta_path`'s finders, blind to the hidden packages (and their submodules)."""

    def __init__(self, finder):
        self.finder = finder

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN_PACKAGES:
            return None
        return self.finder.find_spec(name, path, target)

    def __getattr__(self, name):  # invalidate_caches, find_distributions...
        return getattr(self.finder, name)


sys.meta_path[:] = [HidingFinder(finder) for finder in sys.meta_path]
