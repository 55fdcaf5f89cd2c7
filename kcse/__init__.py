"""kcse: contrastive sentence embeddings for BERT-style encoders in Keras 3."""

from kcse import backbones
from kcse import data
from kcse import datasets
from kcse import evaluation
from kcse import layers
from kcse import losses
from kcse.sentence_encoder import SentenceEncoder
from kcse.simcse import SimCSE

__version__ = "0.1.0"
