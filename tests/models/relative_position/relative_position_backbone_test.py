"""NEZHA and RoFormer backbones through `run_backbone_test` on tiny configs.

Neither backbone has a `max_sequence_length` (no position embeddings); the
nearest knob, NEZHA's clipping distance `max_relative_position`, is 16 here,
and the inputs are 16 tokens long.
"""

import numpy as np
import pytest

from kcse.models import NezhaBackbone
from kcse.models import RoFormerBackbone
from kcse.models.relative_position import RelativeTransformerEncoder
from tests.layer_checks import run_backbone_test

BATCH, LENGTH, HIDDEN = 2, 16, 8
TINY = {
    "vocabulary_size": 20,
    "num_layers": 2,
    "num_heads": 2,
    "hidden_dim": HIDDEN,
    "intermediate_dim": 16,
    "max_relative_position": 16,
}
CASES = [
    (NezhaBackbone, {}, {"pooled_output": (BATCH, HIDDEN)}),
    (RoFormerBackbone, {"use_pooler": False}, {}),  # as its checkpoints ship
    (RoFormerBackbone, {"activation": "gelu_new"}, {"pooled_output": (BATCH, HIDDEN)}),
]
IDS = ["nezha", "roformer_no_pooler", "roformer_gelu_new"]


def tiny_inputs(length=LENGTH, lengths=(10, LENGTH), seed=0):
    rng = np.random.default_rng(seed)
    mask = (np.arange(length)[None, :] < np.array(lengths)[:, None]).astype("int32")
    return {
        "token_ids": rng.integers(1, 20, size=mask.shape).astype("int32") * mask,
        "segment_ids": (np.arange(length)[None, :] >= 5).astype("int32") * mask,
        "padding_mask": mask,
    }


@pytest.mark.parametrize("backbone_class, extra, pooled", CASES, ids=IDS)
def test_backbone(backbone_class, extra, pooled):
    backbone = run_backbone_test(
        backbone_class,
        {**TINY, **extra},
        tiny_inputs(),
        {"sequence_output": (BATCH, LENGTH, HIDDEN), **pooled},
    )
    # keras-hub BERT's layer names, each block a relative-position encoder.
    for name in ("token_embedding", "segment_embedding", "embeddings_layer_norm"):
        assert backbone.get_layer(name) is getattr(backbone, name)
    blocks = [backbone.get_layer(f"transformer_layer_{i}") for i in range(2)]
    assert all(isinstance(b, RelativeTransformerEncoder) for b in blocks)
    assert {b.position_encoding for b in blocks} == {backbone_class.position_encoding}
    assert (backbone.pooled_dense is not None) == bool(pooled)


@pytest.mark.parametrize("backbone_class, extra, pooled", CASES[:2], ids=IDS[:2])
def test_padding_does_not_reach_real_tokens(backbone_class, extra, pooled):
    backbone = backbone_class(**TINY, **extra)
    inputs = tiny_inputs()
    noisy = dict(inputs, token_ids=np.where(inputs["padding_mask"] == 1, inputs["token_ids"], 7))
    real = inputs["padding_mask"] == 1
    clean_out = np.asarray(backbone(inputs)["sequence_output"])
    noisy_out = np.asarray(backbone(noisy)["sequence_output"])
    np.testing.assert_allclose(noisy_out[real], clean_out[real], atol=1e-5)
    assert not np.allclose(noisy_out[~real], clean_out[~real])


@pytest.mark.parametrize("backbone_class", [NezhaBackbone, RoFormerBackbone])
def test_sequences_longer_than_the_clipping_distance(backbone_class):
    # Documented for NEZHA: "Any sequence length works" (positions are relative).
    backbone = backbone_class(**TINY)
    outputs = backbone(tiny_inputs(length=3 * LENGTH, lengths=(40, 3 * LENGTH)))
    assert outputs["sequence_output"].shape == (BATCH, 3 * LENGTH, HIDDEN)
    assert np.isfinite(np.asarray(outputs["sequence_output"])).all()
