"""Losses of kcse, as `keras.losses.Loss` subclasses."""

from kcse.losses.simcse_loss import SimCSELoss
