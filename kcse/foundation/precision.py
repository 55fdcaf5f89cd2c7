"""Training precision: float32, or mixed bfloat16 / float16 (Keras' dtype policies).

kcse follows Keras' mixed precision: a model built under the policy
`"mixed_bfloat16"` or `"mixed_float16"` (the global one,
`keras.config.set_dtype_policy`, or a layer's `dtype=`) keeps its variables
in float32 and computes in bfloat16 / float16. kcse adds what sentence
embeddings need on top of that, whatever the policy:

- pooling, whitening, BERT-flow, the losses and `similarity` run in float32
  (`SentencePooling`, `WKPooling`, `Whitening` and `BertFlow` are float32
  layers unless given another `dtype`);
- an encoder's vectors are float32: `encode`, `predict`, `similarity`, the
  `kcse` command's outputs and the SavedModel signatures;
- an objective computes in its encoder's policy, so that `compile` wraps
  the optimizer of a float16 model in Keras' `LossScaleOptimizer` (its
  loss scaling skips steps whose gradients overflow), and the NaN stop
  (`NonFiniteLossError`) still watches the unscaled loss.

On a GPU pick `"bfloat16"` (Ampere or newer: as fast as float16, with
float32's range, no loss scaling); `"float16"` for older GPUs; `"float32"`
on CPUs, where neither is faster. The recipes' and `kcse train`'s
`--precision` set the global policy before any model is built, and the
precision is part of a result's identity (it changes the numbers).
"""

# kcse's precision names -> Keras' dtype policies.
PRECISIONS = {
    "float32": "float32",
    "bfloat16": "mixed_bfloat16",
    "float16": "mixed_float16",
}


def dtype_policy_name(precision):
    """Keras' dtype policy of a kcse precision (`"bfloat16"` -> `"mixed_bfloat16"`).

    ```python
    from kcse.foundation.precision import dtype_policy_name

    assert dtype_policy_name("bfloat16") == "mixed_bfloat16"
    ```
    """
    if precision not in PRECISIONS:
        raise ValueError(
            f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}."
        )
    return PRECISIONS[precision]


def set_precision(precision):
    """Makes models built from now on compute in `precision` (the global policy).

    ```python
    import keras
    from kcse.foundation.precision import set_precision

    set_precision("bfloat16")
    assert keras.config.dtype_policy().name == "mixed_bfloat16"
    set_precision("float32")
    ```
    """
    import keras

    keras.config.set_dtype_policy(dtype_policy_name(precision))


def precision_of(layer=None):
    """The kcse precision a layer or model computes in, from its dtype policy.

    Without `layer`, that of Keras' global policy (what models built now
    compute in). A policy that is none of `PRECISIONS` (e.g. `"bfloat16"`,
    bfloat16 variables too) is named `"policy <name>"`.

    ```python
    import keras
    from kcse.foundation.precision import precision_of

    assert precision_of(keras.layers.Dense(2, dtype="mixed_float16")) == "float16"
    assert precision_of(keras.layers.Dense(2, dtype="bfloat16")) == "policy bfloat16"
    assert precision_of() == "float32"  # Keras' default global policy
    ```
    """
    import keras

    policy = keras.config.dtype_policy() if layer is None else layer.dtype_policy
    for precision, name in PRECISIONS.items():
        if policy.name == name:
            return precision
    return f"policy {policy.name}"
