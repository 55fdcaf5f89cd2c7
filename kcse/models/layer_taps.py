"""Per-layer access to keras-hub style backbones: hidden states, hidden dropout,
and the embedding stage and transformer stack run apart.

Embedding-level views (ConSERT's shuffle, cutoffs, dropout, adversarial
noise) change what enters the transformer stack: position ids before the
embeddings, or the embedding output itself. keras-hub's backbones do not let
either be passed in, so these functions call the backbone's own layers (same
weights) one stage at a time.
"""

import keras

from kcse.foundation import compat
from kcse.foundation.validation import check_rate

EMBEDDINGS_OUTPUT_LAYER = "embeddings_dropout"


def hidden_states_model(backbone):
    """A functional model giving every layer's output of `backbone`.

    The returned model shares the backbone's layers and weights. It maps the
    backbone's inputs to a dict with `"hidden_states"`, the list
    `[embeddings, block_1, ..., block_L]` (`hidden_states[i]` is the output of
    transformer block `i`), and `"pooled_output"` where the backbone has one.

    The backbone must be a functional keras-hub style model whose embedding
    stage ends in a layer named `"embeddings_dropout"` and which lists its
    blocks in `backbone.transformer_layers`, as keras-hub's BERT, RoBERTa,
    XLM-R and kcse's own backbones do.

    Example:
    ```python
    import keras_hub
    import numpy as np
    import kcse

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16,
    )
    states = kcse.models.hidden_states_model(backbone)({
        "token_ids": np.ones((1, 4), "int32"),
        "segment_ids": np.zeros((1, 4), "int32"),
        "padding_mask": np.ones((1, 4), "int32"),
    })["hidden_states"]  # 3 tensors of shape (1, 4, 8)
    assert [tuple(state.shape) for state in states] == [(1, 4, 8)] * 3
    ```
    """
    try:
        embeddings = backbone.get_layer(EMBEDDINGS_OUTPUT_LAYER).output
        blocks = [layer.output for layer in backbone.transformer_layers]
    except (ValueError, AttributeError) as error:
        raise ValueError(
            f"{type(backbone).__name__} does not expose per-layer states: "
            f"kcse needs a layer named {EMBEDDINGS_OUTPUT_LAYER!r} and a "
            f"`transformer_layers` list ({error})."
        ) from error
    outputs = {"hidden_states": [embeddings] + blocks}
    if isinstance(backbone.output, dict) and "pooled_output" in backbone.output:
        outputs["pooled_output"] = backbone.output["pooled_output"]
    return keras.Model(backbone.input, outputs, name="hidden_states")


def set_hidden_dropout(backbone, rate):
    """Sets the hidden dropout rate of `backbone`, in place.

    Hidden dropout is every dropout on the residual stream: after the
    embeddings and on the attention and feed-forward outputs of each block.
    The dropout on attention probabilities keeps its configured rate, as in
    Su Jianlin's Chinese SimCSE (which trained with hidden dropout 0.3).
    Call it before training; the backbone's config is not changed.

    Returns:
        The number of dropout layers changed.

    Example:
    ```python
    import keras_hub
    import kcse

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16,
    )
    changed = kcse.models.set_hidden_dropout(backbone, 0.3)
    assert changed == 5  # embeddings, then attention and feed-forward × 2 blocks
    assert backbone.get_layer("embeddings_dropout").rate == 0.3
    ```
    """
    rate = check_rate(rate, "hidden_dropout")
    inside_attention = set()
    for layer in compat.sublayers(backbone):
        if isinstance(layer, keras.layers.MultiHeadAttention):
            inside_attention.update(id(sub) for sub in compat.sublayers(layer))
    changed = 0
    for layer in compat.sublayers(backbone):
        if isinstance(layer, keras.layers.Dropout) and (
            id(layer) not in inside_attention
        ):
            layer.rate = float(rate)
            changed += 1
    if changed == 0:
        raise ValueError(f"{type(backbone).__name__} has no hidden dropout.")
    return changed


def set_attention_dropout(backbone, rate):
    """Sets the dropout rate on the attention probabilities of `backbone`
    (the Dropout layers inside its `MultiHeadAttention` layers), in place;
    with `set_hidden_dropout`, every dropout of the backbone (a script's
    `--no_dropout`: HF's `attention_probs_dropout_prob` and
    `hidden_dropout_prob` both 0). Returns the number of layers changed."""
    rate = check_rate(rate, "attention_dropout")
    changed = 0
    for layer in compat.sublayers(backbone):
        if isinstance(layer, keras.layers.MultiHeadAttention):
            for sub in compat.sublayers(layer):
                if isinstance(sub, keras.layers.Dropout):
                    sub.rate = float(rate)
                    changed += 1
    return changed


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


def has_absolute_positions(backbone):
    """Whether `backbone` embeds absolute positions (BERT, RoBERTa, XLM-R),
    which `embedding_stage` can shuffle; NEZHA's and RoFormer's are relative,
    inside the attention."""
    return (_layer(backbone, "embeddings") is not None
            or _layer(backbone, "position_embedding") is not None)


def embedding_stage(backbone, inputs, position_ids=None, training=None):
    """The embedding output (after LayerNorm and dropout) of `backbone`.

    Equals `hidden_states[0]` of `kcse.models.hidden_states_model` when
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

    Example:
    ```python
    import keras_hub
    import numpy as np
    import kcse

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16,
    )
    inputs = {
        "token_ids": np.array([[2, 5, 7, 3]]),
        "segment_ids": np.zeros((1, 4), "int32"),
        "padding_mask": np.ones((1, 4), "int32"),
    }
    embeddings = kcse.models.embedding_stage(backbone, inputs)  # (1, 4, 8)
    states = kcse.models.hidden_states_model(backbone)(inputs)["hidden_states"]
    assert np.allclose(embeddings, states[0])
    # Tokens 5 and 7 embedded at each other's positions (ConSERT's shuffle).
    shuffled = kcse.models.embedding_stage(
        backbone, inputs, position_ids=np.array([[0, 2, 1, 3]])
    )  # (1, 4, 8)
    ```
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

    Example:
    ```python
    import keras_hub
    import numpy as np
    import kcse

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16,
    )
    inputs = {
        "token_ids": np.array([[2, 5, 7, 3]]),
        "segment_ids": np.zeros((1, 4), "int32"),
        "padding_mask": np.ones((1, 4), "int32"),
    }
    embeddings = kcse.models.embedding_stage(backbone, inputs)
    states = kcse.models.transformer_states(
        backbone, embeddings, inputs["padding_mask"]
    )  # 3 tensors of shape (1, 4, 8)
    reference = kcse.models.hidden_states_model(backbone)(inputs)["hidden_states"]
    assert np.allclose(states[-1], reference[-1], atol=1e-6)
    ```
    """
    states = [embeddings]
    for block in backbone.transformer_layers:
        states.append(block(states[-1], padding_mask=padding_mask, training=training))
    return states
