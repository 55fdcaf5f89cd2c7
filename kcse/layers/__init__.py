"""Keras layers of kcse."""

from kcse.layers.sentence_pooling import SentencePooling
from kcse.layers.whitening import Whitening
