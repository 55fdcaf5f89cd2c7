"""Losses of kcse, as `keras.losses.Loss` subclasses."""

from kcse.foundation.lazy_exports import lazy_exports

_EXPORTS = {
    "SimCSELoss": "kcse.losses.simcse_loss",
    "NTXentLoss": "kcse.losses.nt_xent_loss",
    "SelfGuidedLoss": "kcse.losses.self_guided_loss",
    "CoSENT": "kcse.losses.cosent",
    "ContrastiveTensionLoss": "kcse.losses.contrastive_tension_loss",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
