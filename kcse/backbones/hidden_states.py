"""Per-layer states and hidden dropout of keras-hub style backbones."""

import keras

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
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16,
    )
    states = kcse.backbones.hidden_states_model(backbone)({
        "token_ids": np.ones((1, 4), "int32"),
        "segment_ids": np.zeros((1, 4), "int32"),
        "padding_mask": np.ones((1, 4), "int32"),
    })["hidden_states"]  # 3 tensors of shape (1, 4, 8)
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
    """
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"hidden dropout must be in [0, 1); got {rate}.")
    inside_attention = set()
    for layer in backbone._flatten_layers(include_self=False):
        if isinstance(layer, keras.layers.MultiHeadAttention):
            inside_attention.update(
                id(sub) for sub in layer._flatten_layers(include_self=False)
            )
    changed = 0
    for layer in backbone._flatten_layers(include_self=False):
        if isinstance(layer, keras.layers.Dropout) and (
            id(layer) not in inside_attention
        ):
            layer.rate = float(rate)
            changed += 1
    if changed == 0:
        raise ValueError(f"{type(backbone).__name__} has no hidden dropout.")
    return changed
