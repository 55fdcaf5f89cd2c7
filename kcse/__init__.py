"""kcse: contrastive sentence embeddings for BERT-style encoders in Keras 3."""

from kcse import backbones
from kcse import data
from kcse import datasets
from kcse import evaluation
from kcse import layers
from kcse import losses
from kcse.consert import ConSERT
from kcse.pair_objective import PairObjective
from kcse.sentence_encoder import SentenceEncoder
from kcse.sg_opt import SGOpt
from kcse.simcse import SimCSE
from kcse.supervised_simcse import SupervisedSimCSE

__version__ = "0.1.0"
