"""View specs: one vocabulary for ConSERT's views, checked without Keras."""

import subprocess
import sys

import pytest

import kcse
from kcse.layers.view_specs import split_view
from kcse.layers.view_specs import view_from_spec
from kcse.experiments.methods.consert import PAPER_SETTINGS
from kcse.objectives.consert import consert_views


def test_view_from_spec_makes_the_layers():
    assert view_from_spec("none") is None
    assert isinstance(view_from_spec("shuffle"), kcse.layers.TokenShuffle)
    cutoff = view_from_spec("span_cutoff:0.3")
    assert isinstance(cutoff, kcse.layers.SpanCutoff) and cutoff.rate == 0.3
    assert view_from_spec("adversarial:2").noise_norm == 2.0
    assert view_from_spec("dropout").rate == kcse.layers.EmbeddingDropout().rate


@pytest.mark.parametrize("spec, message", [
    ("shuffle:0.1", "the shuffle view takes no value"),
    ("blur", "unknown view 'blur'"),
    ("token_cutoff:1", "the rate must be a finite number >= 0 and < 1"),
    ("adversarial:0", "the norm must be"),
    ("none:0.1", "unknown view 'none'"),
])
def test_bad_specs_are_named(spec, message):
    with pytest.raises(ValueError, match=message):
        split_view(spec)


def test_consert_views_are_its_scripts_specs():
    """yym6472/ConSERT's scripts: unsup feature_cutoff 0.2 + shuffle,
    joint the sentence as it is + token (row) cutoff 0.1; sup keeps unsup's."""
    unsup = consert_views("unsup")
    assert isinstance(unsup[0], kcse.layers.FeatureCutoff) and unsup[0].rate == 0.2
    assert isinstance(unsup[1], kcse.layers.TokenShuffle)
    joint = consert_views("joint")
    assert joint[0] is None and joint[1].rate == 0.1
    assert [type(view) for view in consert_views("sup")] == [type(view) for view in unsup]
    for specs in PAPER_SETTINGS["views"].value.values():  # The registry's.
        for spec in specs:
            split_view(spec)


def test_specs_are_checked_without_keras():
    code = ("import sys; from kcse.layers.view_specs import split_view; "
            "split_view('feature_cutoff:0.2'); print('keras' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr[-2000:]
