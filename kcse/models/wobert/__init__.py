"""WoBERT's (and RoFormer's) tokenizer: jieba words first, then WordPiece."""

from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)
