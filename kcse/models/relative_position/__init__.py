"""NEZHA and RoFormer: BERT with positions inside attention (clipped relative, rotary)."""

from kcse.foundation.lazy_exports import lazy_exports

_EXPORTS = {
    "NezhaBackbone": "kcse.models.relative_position.relative_position_backbone",
    "RoFormerBackbone": "kcse.models.relative_position.relative_position_backbone",
    "RelativePositionAttention": "kcse.models.relative_position.relative_position_attention",
    "RelativeTransformerEncoder": "kcse.models.relative_position.relative_transformer_encoder",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
