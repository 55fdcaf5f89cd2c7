"""Comparison experiments: protocols, the grid runner, results, published tables.

The machinery behind `recipes/chinese_simcse.py` and the other recipes.
Internal to the recipes and the `kcse` command: its modules change with them,
so the package exports nothing (`__all__` is empty); import a module by its
path where you need one.
"""

from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)
