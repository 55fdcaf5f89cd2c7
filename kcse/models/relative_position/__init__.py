"""NEZHA and RoFormer: BERT with positions inside attention (clipped relative, rotary)."""

from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)
