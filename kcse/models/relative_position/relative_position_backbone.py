"""BERT-shaped backbones whose positions live in the attention (NEZHA, RoFormer)."""

import keras
import keras_hub

from kcse.models.bert_backbone import DEFAULT_HIDDEN_ACT
from kcse.models.bert_backbone import hidden_activation
from kcse.models.relative_position.relative_transformer_encoder import RelativeTransformerEncoder


def _initializer():
    return keras.initializers.TruncatedNormal(stddev=0.02)


class RelativePositionBackbone(keras_hub.models.Backbone):
    """BERT without absolute position embeddings; positions enter attention.

    The embedding stage is token + segment embeddings, LayerNorm and dropout
    (no position embeddings); each block is a `RelativeTransformerEncoder`.
    Layer names follow keras-hub's BERT (`token_embedding`,
    `segment_embedding`, `embeddings_layer_norm`, `embeddings_dropout`,
    `transformer_layer_{i}`, `pooled_dense`), so per-layer states, pooling and
    checkpoint loading work as for BERT. Subclasses fix `position_encoding`.

    Inputs are `token_ids`, `segment_ids` and `padding_mask`; outputs
    `sequence_output` and, with `use_pooler`, `pooled_output` (tanh Dense on
    the first token). `activation` is a bert_config `hidden_act` name of
    `kcse.models.bert_backbone.ACTIVATIONS` (the mapping kcse's BERT uses
    too): `"gelu"` (exact), `"gelu_new"` (tanh approximation), `"relu"`...;
    `max_relative_position` only matters for NEZHA's relative positions.
    """

    position_encoding = None

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        num_segments=2,
        max_relative_position=64,
        use_pooler=True,
        activation=DEFAULT_HIDDEN_ACT,
        dtype=None,
        **kwargs,
    ):
        # === Layers ===
        self._build_layers(
            vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
            dropout, num_segments, max_relative_position, use_pooler,
            hidden_activation(activation), dtype,
        )

        # === Functional Model ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        super().__init__(
            inputs={
                "token_ids": token_ids,
                "segment_ids": segment_ids,
                "padding_mask": padding_mask,
            },
            outputs=self._outputs(token_ids, segment_ids, padding_mask),
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.num_segments = num_segments
        self.max_relative_position = max_relative_position
        self.use_pooler = use_pooler
        self.activation = activation

    def _build_layers(
        self, vocabulary_size, num_layers, num_heads, hidden_dim, intermediate_dim,
        dropout, num_segments, max_relative_position, use_pooler, function, dtype,
    ):
        """The embedding stage, the blocks and the pooler, named as BERT's."""
        self.token_embedding = keras.layers.Embedding(
            vocabulary_size,
            hidden_dim,
            embeddings_initializer=_initializer(),
            dtype=dtype,
            name="token_embedding",
        )
        self.segment_embedding = keras.layers.Embedding(
            num_segments,
            hidden_dim,
            embeddings_initializer=_initializer(),
            dtype=dtype,
            name="segment_embedding",
        )
        self.embeddings_add = keras.layers.Add(dtype=dtype, name="embeddings_add")
        self.embeddings_layer_norm = keras.layers.LayerNormalization(
            epsilon=1e-12, dtype=dtype, name="embeddings_layer_norm"
        )
        self.embeddings_dropout = keras.layers.Dropout(
            dropout, dtype=dtype, name="embeddings_dropout"
        )
        self.transformer_layers = [
            RelativeTransformerEncoder(
                position_encoding=self.position_encoding,
                max_relative_position=max_relative_position,
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                activation=function,
                dropout=dropout,
                layer_norm_epsilon=1e-12,
                kernel_initializer=_initializer(),
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        self.pooled_dense = None
        if use_pooler:
            self.pooled_dense = keras.layers.Dense(
                hidden_dim,
                kernel_initializer=_initializer(),
                activation="tanh",
                dtype=dtype,
                name="pooled_dense",
            )

    def _outputs(self, token_ids, segment_ids, padding_mask):
        """The functional graph from the inputs: the sequence and pooled outputs."""
        x = self.embeddings_add(
            (self.token_embedding(token_ids), self.segment_embedding(segment_ids))
        )
        x = self.embeddings_dropout(self.embeddings_layer_norm(x))
        for block in self.transformer_layers:
            x = block(x, padding_mask=padding_mask)
        outputs = {"sequence_output": x}
        if self.pooled_dense is not None:
            outputs["pooled_output"] = self.pooled_dense(x[:, 0, :])
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "num_segments": self.num_segments,
                "max_relative_position": self.max_relative_position,
                "use_pooler": self.use_pooler,
                "activation": self.activation,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="kcse")
class NezhaBackbone(RelativePositionBackbone):
    """NEZHA (Huawei): BERT with functional relative position encoding.

    No absolute position embeddings; every attention adds fixed sinusoidal
    relative position embeddings, clipped at ±`max_relative_position` (64),
    to its logits and its output (see `kcse.models.relative_position.RelativePositionAttention`).
    Any sequence length works. Load the original checkpoints with
    `kcse.models.from_checkpoint(folder, family="nezha")`.

    Example:
    ```python
    import numpy as np
    import kcse
    backbone = kcse.models.NezhaBackbone(
        vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16,
    )
    outputs = backbone({
        "token_ids": np.array([[2, 7, 9, 3]]),
        "segment_ids": np.zeros((1, 4), "int32"),
        "padding_mask": np.ones((1, 4), "int32"),
    })  # sequence_output (1, 4, 8), pooled_output (1, 8)
    assert outputs["sequence_output"].shape == (1, 4, 8)
    assert outputs["pooled_output"].shape == (1, 8)
    ```
    """

    position_encoding = "relative"


@keras.saving.register_keras_serializable(package="kcse")
class RoFormerBackbone(RelativePositionBackbone):
    """RoFormer v1 (Su Jianlin, ZhuiyiTechnology): BERT with rotary positions.

    No absolute position embeddings; queries and keys of every attention are
    rotated by their position (see `kcse.models.relative_position.RelativePositionAttention`).
    The original checkpoints ship no pooler (`use_pooler=False`), so P2
    pooling is unavailable. Load them with
    `kcse.models.from_checkpoint(folder, family="roformer")`.

    Example:
    ```python
    import numpy as np
    import kcse
    backbone = kcse.models.RoFormerBackbone(
        vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, use_pooler=False,
    )
    outputs = backbone({
        "token_ids": np.array([[2, 7, 9, 3]]),
        "segment_ids": np.zeros((1, 4), "int32"),
        "padding_mask": np.ones((1, 4), "int32"),
    })  # sequence_output (1, 4, 8)
    assert outputs["sequence_output"].shape == (1, 4, 8)
    assert "pooled_output" not in outputs
    ```
    """

    position_encoding = "rotary"
