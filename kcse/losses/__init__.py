"""Losses of kcse, as `keras.losses.Loss` subclasses."""

from kcse.losses.cosent import CoSENT
from kcse.losses.self_guided_loss import SelfGuidedLoss
from kcse.losses.simcse_loss import SimCSELoss
