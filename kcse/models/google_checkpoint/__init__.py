"""Original Google-format TF checkpoints (`bert_config.json`, `vocab.txt`, `bert_model.ckpt.*`)."""

from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)
