"""Keras layers users compose: pooling, whitening, ConSERT's views, the NLI head."""

from kcse.foundation.lazy_exports import lazy_exports

_EXPORTS = {
    "SentencePooling": "kcse.layers.sentence_pooling",
    "WKPooling": "kcse.layers.wk_pooling",
    "Whitening": "kcse.layers.whitening",
    "BertFlow": "kcse.layers.bert_flow",
    "TokenShuffle": "kcse.layers.view_augmentation",
    "TokenCutoff": "kcse.layers.view_augmentation",
    "FeatureCutoff": "kcse.layers.view_augmentation",
    "SpanCutoff": "kcse.layers.view_augmentation",
    "EmbeddingDropout": "kcse.layers.view_augmentation",
    "AdversarialPerturbation": "kcse.layers.view_augmentation",
    "NLIClassifier": "kcse.layers.nli_classifier",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
