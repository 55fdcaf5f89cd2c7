"""Recomputing transformer blocks in the backward pass (rematerialization).

Training keeps every activation of every transformer block for the
gradient: for multilingual-e5-small at batch 64 × 2 views × length 64,
about 1.3 GB. `recomputed_blocks` keeps only each block's input instead and
runs the block again, one at a time, when the gradient reaches it
(`tf.recompute_grad`): one more forward pass of the stack per step. Dropout
draws its masks from seed states that each call advances; the recomputation
first puts them back where the forward pass found them, so it draws the same
masks and the gradient is exactly that of the plain step.
"""

import contextlib

import keras

from kcse.foundation import compat


def _seed_states(block):
    """The seed-state variables of the dropout layers inside `block`."""
    return [
        layer.seed_generator.state
        for layer in [block, *compat.sublayers(block)]
        if isinstance(getattr(layer, "seed_generator", None), keras.random.SeedGenerator)
    ]


def _recomputed_call(block):
    """`block.call`, recomputed in the backward pass when training."""
    import tensorflow as tf

    call = type(block).call.__get__(block)
    states = _seed_states(block)

    def recomputed_call(inputs, *args, **kwargs):
        if not kwargs.get("training"):
            return call(inputs, *args, **kwargs)
        seeds = [tf.identity(state.value) for state in states]

        def forward(inputs):
            for state, seed in zip(states, seeds):
                state.assign(seed)
            return call(inputs, *args, **kwargs)

        return tf.recompute_grad(forward)(inputs)

    return recomputed_call


@contextlib.contextmanager
def recomputed_blocks(backbone):
    """Context in which `backbone`'s transformer blocks recompute for the gradient.

    Inside it, a block called with `training=True` keeps only its input for
    the backward pass, where it runs again with the same dropout masks (see
    the module docstring); calls without `training` are unchanged. Only
    what is traced inside the context is affected (a `fit`'s train step).
    TensorFlow only: `ValueError` on another backend.

    Example:

    Two identical backbones with dropout, one step's gradients each: with
    and without recomputation they are the same.

    ```python
    import contextlib

    import keras
    import keras_hub
    import numpy as np
    import tensorflow as tf
    from kcse.models.block_recomputation import recomputed_blocks

    inputs = {"token_ids": np.array([[2, 5, 7, 3]]),
              "segment_ids": np.zeros((1, 4), "int32"),
              "padding_mask": np.ones((1, 4), "int32")}

    def gradients(recompute):
        keras.utils.set_random_seed(1)  # Same weights and dropout seeds.
        backbone = keras_hub.models.BertBackbone(
            vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8,
            intermediate_dim=16, max_sequence_length=16, dropout=0.5,
        )
        context = recomputed_blocks(backbone) if recompute else contextlib.nullcontext()
        with context, tf.GradientTape() as tape:
            outputs = backbone(inputs, training=True)["sequence_output"]
            loss = tf.reduce_sum(outputs**2)
        grads = tape.gradient(loss, backbone.trainable_variables)
        return [tf.convert_to_tensor(g) for g in grads if g is not None]

    for a, b in zip(gradients(True), gradients(False)):
        np.testing.assert_allclose(a, b, atol=1e-6)
    ```
    """
    if keras.backend.backend() != "tensorflow":
        raise ValueError(
            "Recomputing transformer blocks needs the TensorFlow backend; "
            f"this is {keras.backend.backend()} (pass rematerialize=False)."
        )
    blocks = list(backbone.transformer_layers)
    for block in blocks:
        object.__setattr__(block, "call", _recomputed_call(block))
    try:
        yield
    finally:
        for block in blocks:
            block.__dict__.pop("call", None)
