"""Keras layers of kcse."""

from kcse.layers.nli_classifier import NLIClassifier
from kcse.layers.relative_position_attention import RelativePositionAttention
from kcse.layers.relative_transformer_encoder import RelativeTransformerEncoder
from kcse.layers.sentence_pooling import SentencePooling
from kcse.layers.view_augmentation import AdversarialPerturbation
from kcse.layers.view_augmentation import EmbeddingDropout
from kcse.layers.view_augmentation import FeatureCutoff
from kcse.layers.view_augmentation import SpanCutoff
from kcse.layers.view_augmentation import TokenCutoff
from kcse.layers.view_augmentation import TokenShuffle
from kcse.layers.whitening import Whitening
