"""Original Google-format TF checkpoints (`bert_config.json`, `vocab.txt`, `bert_model.ckpt.*`)."""

from kcse.foundation.lazy_exports import lazy_exports

_EXPORTS = {
    "from_checkpoint": "kcse.models.google_checkpoint.checkpoint_converter",
    "CheckpointError": "kcse.models.google_checkpoint.checkpoint_converter",
    "FAMILIES": "kcse.models.google_checkpoint.families",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
