"""A checkpoint's feed-forward activation (`hidden_act`), for every BERT family.

`ACTIVATIONS` maps the `hidden_act` names of `bert_config.json` and Hugging
Face's `config.json` to Keras activations, the way Hugging Face and
bert4keras (Su's runs) read them: `"gelu"` is the exact erf GELU, and
`"gelu_new"`, `"gelu_pytorch_tanh"` and `"gelu_fast"` are its tanh
approximation, both from `kcse.models.gelu` (the values of
`keras.activations.gelu`, with gradients that keep only their input: about a
fifth of a training step's memory less). (Google's original TF BERT code
computed the tanh form whatever the config said; kcse follows HF and bert4keras, which the
released checkpoints were fine-tuned and evaluated with.) One mapping
serves keras-hub's BERT (through `BertBackbone` below), NEZHA and RoFormer.

keras-hub's `BertBackbone` always runs the tanh approximation;
`kcse.models.BertBackbone` is that backbone with an `activation` argument,
kept in its config.
"""

import keras
import keras_hub

from kcse.foundation import compat
from kcse.models.gelu import gelu
from kcse.models.gelu import gelu_tanh


# `hidden_act` name -> Keras activation (Hugging Face's meaning of the name).
ACTIVATIONS = {
    "gelu": gelu,  # Exact (erf).
    "gelu_new": gelu_tanh,
    "gelu_pytorch_tanh": gelu_tanh,
    "gelu_fast": gelu_tanh,
    "relu": "relu",
}
# What HF's BertConfig (and NEZHA's, RoFormer's) assume without `hidden_act`.
DEFAULT_HIDDEN_ACT = "gelu"


def hidden_activation(name):
    """The Keras activation of a `hidden_act` name; ValueError if unknown."""
    if name not in ACTIVATIONS:
        raise ValueError(
            f"hidden_act {name!r} is not one of {list(ACTIVATIONS)}."
        )
    return ACTIVATIONS[name]


def config_hidden_act(config, source):
    """The `hidden_act` field of a model config (a dict read from `source`).

    Absent: `"gelu"`, Hugging Face's default. A name `ACTIVATIONS` does not
    know raises a `ValueError` naming `source` and the field.
    """
    name = config.get("hidden_act", DEFAULT_HIDDEN_ACT)
    if name not in ACTIVATIONS:
        raise ValueError(
            f"{source}: field hidden_act is {name!r}; kcse knows "
            f"{list(ACTIVATIONS)}."
        )
    return name


@keras.saving.register_keras_serializable(package="kcse")
class BertBackbone(keras_hub.models.BertBackbone):
    """keras-hub's `BertBackbone` with the feed-forward activation as an argument.

    keras-hub's BERT always runs the tanh approximation of GELU. This
    subclass runs `activation`, a `hidden_act` name of `ACTIVATIONS`:
    `"gelu"` (exact erf GELU, as Hugging Face and bert4keras read BERT's
    configs), `"gelu_new"` / `"gelu_pytorch_tanh"` / `"gelu_fast"` (tanh
    approximation, keras-hub's) or `"relu"`. Everything else is keras-hub's
    backbone, weights and layer names included; `activation` is in
    `get_config()`, so `from_config` and `.keras` files keep it.
    `kcse.models.from_checkpoint` and Hugging Face BERT folders build it
    with the activation their config names.

    Args:
        activation: string. The `hidden_act` name (default `"gelu"`).
        **kwargs: as `keras_hub.models.BertBackbone`.

    Example:
    ```python
    import numpy as np
    import kcse

    inputs = {
        "token_ids": np.array([[2, 7, 9, 3]]),
        "segment_ids": np.zeros((1, 4), "int32"),
        "padding_mask": np.ones((1, 4), "int32"),
    }
    backbone = kcse.models.BertBackbone(
        vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=16, activation="gelu",
    )
    outputs = backbone(inputs)  # sequence_output (1, 4, 8), pooled_output (1, 8)
    assert outputs["sequence_output"].shape == (1, 4, 8)
    # The activation is part of the config: from_config and .keras keep it.
    config = backbone.get_config()  # {..., "activation": "gelu"}
    approximate = kcse.models.BertBackbone.from_config(
        {**config, "activation": "gelu_new"}
    )
    assert approximate.activation == "gelu_new"
    ```
    """

    def __init__(self, *args, activation=DEFAULT_HIDDEN_ACT, **kwargs):
        function = hidden_activation(activation)
        super().__init__(*args, **kwargs)
        for block in self.transformer_layers:
            compat.set_feedforward_activation(block, function)
        self.activation = activation

    def get_config(self):
        config = super().get_config()
        config["activation"] = self.activation
        return config
