"""Losses of kcse, as `keras.losses.Loss` subclasses."""

from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)
