"""Backbones and the per-layer access kcse needs from them."""

from kcse.backbones.hidden_states import hidden_states_model
from kcse.backbones.hidden_states import set_hidden_dropout
