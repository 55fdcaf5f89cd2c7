"""CLEAR's text views by name: specs round trip, bad specs name themselves,
and the pairs draw in the documented order (against `tests/clear_reference.py`)."""

import random

import pytest

import clear_reference as ref
from clear_sentences import SEEDS
from clear_sentences import SENTENCES
from clear_sentences import TABLE
from kcse.data import DEFAULT_RATES
from kcse.data import Reordering
from kcse.data import SpanDeletion
from kcse.data import SynonymSubstitution
from kcse.data import TEXT_VIEWS
from kcse.data import WordDeletion
from kcse.data import text_view_from_spec
from kcse.data import text_view_pairs


def test_spec_round_trip_and_config():
    views = [WordDeletion(0.7), WordDeletion(0.3, marker="[DEL]"), SpanDeletion(0.25),
             SpanDeletion(0.5, marker="<del>"), Reordering(0.3), Reordering(0.6, pairs=2),
             SynonymSubstitution(TABLE, 0.2)]
    for view in views:
        again = text_view_from_spec(view.spec, synonyms=TABLE)
        assert again == view and again.get_config() == view.get_config()
    assert WordDeletion(0.3).spec == "word_deletion:0.3"
    assert WordDeletion(0.3, marker="[DEL]").spec == "word_deletion:0.3:[DEL]"
    assert Reordering(0.6, pairs=2).spec == "reordering:0.6:2"
    assert text_view_from_spec("word_deletion:0.30").spec == "word_deletion:0.3"
    for name in TEXT_VIEWS:
        view = text_view_from_spec(name, synonyms=TABLE)
        assert view.name == name and view.rate == DEFAULT_RATES[name]
    assert WordDeletion(0.5).get_config() == {"name": "word_deletion", "rate": 0.5,
                                              "marker": None}


@pytest.mark.parametrize("spec, match", [
    ("word_dropout:0.3", "unknown view 'word_dropout'"),
    ("word_deletion:1.0", r"\[0, 1\)"),
    ("span_deletion:-0.1", r"\[0, 1\)"),
    ("reordering:abc", "not a number"),
    ("word_deletion:nan", r"\[0, 1\)"),
    ("reordering:0.3:0", "pairs must be an int >= 1"),
    ("reordering:0.3:two", "pairs must be an int >= 1"),
    ("word_deletion:0.3: [DEL]", "marker"),
    ("synonym_substitution:0.3", "needs a synonym table"),
    ("synonym_substitution:0.3:x", "no field after the rate"),
])
def test_bad_specs_raise_naming_the_spec(spec, match):
    with pytest.raises(ValueError, match=match) as error:
        text_view_from_spec(spec)
    assert repr(spec) in str(error.value)


def test_text_view_pairs_take_an_int_seed():
    with pytest.raises(TypeError, match="seed"):
        text_view_pairs(["a"], "word_deletion", "reordering", seed="0")


def test_text_view_pairs_draw_in_the_documented_order():
    sentences = SENTENCES * 2
    view_a = WordDeletion(0.3)
    view_b = SynonymSubstitution(TABLE, 0.3)
    for seed in SEEDS:
        a, b = text_view_pairs(sentences, view_a, "synonym_substitution:0.3", seed,
                               synonyms=TABLE)
        rng = random.Random(seed)
        expected_a, expected_b = [], []
        for sentence in sentences:
            expected_a.append(ref.del_word(sentence, 0.3, rng))
            expected_b.append(ref.subs(sentence, 0.3, rng, TABLE))
        assert (a, b) == (expected_a, expected_b)
        assert (a, b) == text_view_pairs(sentences, view_a, view_b, seed)
    assert text_view_pairs(sentences, "word_deletion", "reordering", 0) != \
        text_view_pairs(sentences, "word_deletion", "reordering", 1)
