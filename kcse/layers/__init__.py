"""Keras layers of kcse."""

from kcse.layers.relative_position_attention import RelativePositionAttention
from kcse.layers.relative_transformer_encoder import RelativeTransformerEncoder
from kcse.layers.sentence_pooling import SentencePooling
from kcse.layers.whitening import Whitening
