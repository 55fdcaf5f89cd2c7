"""Keras layers users compose: pooling, whitening, ConSERT's views, the NLI head."""

from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)
