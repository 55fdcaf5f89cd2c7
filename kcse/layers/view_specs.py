"""ConSERT's views by name: the one vocabulary of specs, without Keras.

A spec is `name[:value]`, the syntax of CLEAR's text views
(`kcse.data.text_view_from_spec`): `none` (the sentence as it is),
`shuffle`, `token_cutoff[:rate]`, `feature_cutoff[:rate]`,
`span_cutoff[:rate]`, `dropout[:rate]`, `adversarial[:norm]`. The command
line checks specs with `split_view` before TensorFlow starts; the ConSERT
objective and method build their layers with `view_from_spec`. Standard
library only (the layers are imported when one is built).

Example:
```python
from kcse.layers.view_specs import split_view, view_from_spec

split_view("feature_cutoff:0.2")    # ('feature_cutoff', 0.2)
split_view("shuffle")               # ('shuffle', None)
view_from_spec("token_cutoff:0.1")  # a kcse.layers.TokenCutoff of rate 0.1
view_from_spec("none")              # None: no view
```
"""

import argparse

from kcse.foundation import arguments

# name: (the layer in `kcse.layers.view_augmentation`, what its value is).
VIEWS = {
    "shuffle": ("TokenShuffle", None),
    "token_cutoff": ("TokenCutoff", "rate"),
    "feature_cutoff": ("FeatureCutoff", "rate"),
    "span_cutoff": ("SpanCutoff", "rate"),
    "dropout": ("EmbeddingDropout", "rate"),
    "adversarial": ("AdversarialPerturbation", "norm"),
}
NO_VIEW = "none"

# ConSERT's two views of each contrastive stage, from yym6472/ConSERT's run
# scripts: the `views` paper setting of the method registry
# (`kcse.experiments.methods.consert.PAPER_SETTINGS`, with its source) and
# `kcse.ConSERT`'s default. "sup" has no contrastive term.
CONSERT_SCRIPT_VIEWS = {
    # scripts/chinese/unsup-consert-base-*.sh: --da_final_1 feature_cutoff
    # --cutoff_rate_final_1 0.2 --da_final_2 shuffle
    "unsup": ["feature_cutoff:0.2", "shuffle"],
    # scripts/sup-consert-joint-base.sh: --data_augmentation_strategy cutoff
    # --cutoff_direction row --cutoff_rate 0.1 (against the sentence as is)
    "joint": ["none", "token_cutoff:0.1"],
    # second stage of scripts/sup-consert-sup-unsup-base.sh: cutoff, column, 0.1
    "sup-unsup": ["none", "feature_cutoff:0.1"],
    # second stage of scripts/sup-consert-joint-unsup-base.sh: shuffle
    "joint-unsup": ["none", "shuffle"],
}


def split_view(text):
    """`(name, value)` of a view spec `name[:value]`; `("none", None)`.

    Rates (cutoffs, dropout) must be in [0, 1), `adversarial`'s noise norm
    above 0; `shuffle` takes no value; a value left out is the layer's
    default (None here). Raises ValueError naming the spec.
    """
    name, colon, value = text.partition(":")
    if name == NO_VIEW and not colon:
        return name, None
    if name not in VIEWS:
        raise ValueError(f"unknown view {name!r}; choose from {NO_VIEW}, {', '.join(VIEWS)}")
    kind = VIEWS[name][1]
    if not colon:
        return name, None
    if kind is None:
        raise ValueError(f"the {name} view takes no value; got {text!r}")
    bounded = arguments.rate if kind == "rate" else arguments.positive_number
    try:
        return name, bounded(value)
    except argparse.ArgumentTypeError as error:
        raise ValueError(f"view {text!r}: the {kind} {error}") from None


def view_from_spec(text):
    """The view layer a spec names (its value, else the layer's default); None for `none`.

    Raises ValueError for a bad spec (`split_view`).
    """
    name, value = split_view(text)
    if name == NO_VIEW:
        return None
    from kcse.layers import view_augmentation

    layer = getattr(view_augmentation, VIEWS[name][0])
    return layer() if value is None else layer(value)
