"""Comparison experiments: protocols, the grid runner, results, published tables.

The machinery behind `recipes/chinese_simcse.py` and the other recipes.
"""
