"""The embedding stage and the transformer stack of a backbone, run apart.

Embedding-level views (ConSERT's shuffle, cutoffs, dropout, adversarial
noise) change what enters the transformer stack: position ids before the
embeddings, or the embedding output itself. keras-hub's backbones do not let
either be passed in, so these functions call the backbone's own layers (same
weights) one stage at a time.
"""

from kcse.backbones.hidden_states import EMBEDDINGS_OUTPUT_LAYER


# The layers of the embedding stage, by keras-hub's and kcse's names.
EMBEDDING_LAYERS = (
    "embeddings",  # RoBERTa / XLM-R: token and position embeddings together.
    "token_embedding",
    "position_embedding",
    "segment_embedding",
    "embeddings_layer_norm",
)


def embedding_layers(backbone):
    """The layers with weights of `backbone`'s embedding stage."""
    return [layer for layer in backbone.layers if layer.name in EMBEDDING_LAYERS]


def _layer(backbone, name):
    return next((layer for layer in backbone.layers if layer.name == name), None)


def embedding_stage(backbone, inputs, position_ids=None, training=None):
    """The embedding output (after LayerNorm and dropout) of `backbone`.

    Equals `hidden_states[0]` of `kcse.backbones.hidden_states_model` when
    `position_ids` is None. `position_ids` (batch, length) replaces the
    positions 0..length-1 of the absolute position embeddings (BERT,
    RoBERTa, XLM-R); backbones whose positions live in the attention (NEZHA,
    RoFormer) have none to replace and raise an error.

    Args:
        backbone: a keras-hub style backbone (BERT, RoBERTa, XLM-R, kcse's).
        inputs: dict with `token_ids` (and `segment_ids` where the backbone
            has segment embeddings).
        position_ids: int tensor (batch, length) or None.
        training: bool. Whether the embedding dropout is active.
    """
    token_ids = inputs["token_ids"]
    combined = _layer(backbone, "embeddings")  # RoBERTa, XLM-R.
    if combined is not None:
        x = combined(token_ids, positions=position_ids)
    else:
        tokens = backbone.get_layer("token_embedding")(token_ids)
        x = tokens
        position_embedding = _layer(backbone, "position_embedding")
        if position_embedding is not None:
            x = x + position_embedding(tokens, positions=position_ids)
        elif position_ids is not None:
            raise ValueError(
                f"{type(backbone).__name__} has no absolute position "
                "embeddings (its positions are relative, inside the "
                "attention), so position ids cannot be shuffled."
            )
        segment_embedding = _layer(backbone, "segment_embedding")
        if segment_embedding is not None:
            x = x + segment_embedding(inputs["segment_ids"])
    x = backbone.get_layer("embeddings_layer_norm")(x)
    return backbone.get_layer(EMBEDDINGS_OUTPUT_LAYER)(x, training=training)


def transformer_states(backbone, embeddings, padding_mask, training=None):
    """`[embeddings, block_1, ..., block_L]`: the stack run on `embeddings`.

    The list has the layout of `hidden_states_model(backbone)`'s
    `"hidden_states"`, so `kcse.SentenceEncoder.pool` takes it.
    """
    states = [embeddings]
    for block in backbone.transformer_layers:
        states.append(block(states[-1], padding_mask=padding_mask, training=training))
    return states
