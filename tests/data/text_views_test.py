"""kcse.data's CLEAR text views against an independent transcription.

`tests/clear_reference.py` transcribes CLEAR's four augmentations (Wu et al.
2020, §3.2; no authors' code released) apart from kcse; here kcse's exact
edits on seeded English and Chinese sentences equal the reference's, for
every view and several seeds, and the documented counts, permutations and
errors hold. Specs and pairs: text_view_specs_test.py; synonym files:
synonym_table_test.py.
"""

import random

import pytest

import clear_reference as ref
from clear_sentences import CHINESE
from clear_sentences import ENGLISH
from clear_sentences import SEEDS
from clear_sentences import SENTENCES
from clear_sentences import TABLE
from kcse.data import Reordering
from kcse.data import SpanDeletion
from kcse.data import SynonymSubstitution
from kcse.data import WordDeletion
from kcse.data.text_views import _segment


def kcse_and_reference():
    """(kcse view, reference function) for every view and a few settings."""
    cases = []
    for rate in (0.1, 0.3, 0.5, 0.7, 0.9):
        for marker in (None, "[DEL]"):
            cases.append((WordDeletion(rate, marker=marker),
                          lambda s, rng, r=rate, m=marker: ref.del_word(s, r, rng, m)))
            cases.append((SpanDeletion(rate, marker=marker),
                          lambda s, rng, r=rate, m=marker: ref.del_span(s, r, rng, m)))
        for pairs in (1, 2):
            cases.append((Reordering(rate, pairs=pairs),
                          lambda s, rng, r=rate, p=pairs: ref.reorder(s, r, rng, p)))
        cases.append((SynonymSubstitution(TABLE, rate),
                      lambda s, rng, r=rate: ref.subs(s, r, rng, TABLE)))
    return cases


CASES = kcse_and_reference()


@pytest.mark.parametrize("case", range(len(CASES)), ids=lambda i: CASES[i][0].spec)
def test_edits_equal_the_reference(case):
    view, reference = CASES[case]
    for seed in SEEDS:
        for sentence in SENTENCES:
            rng_kcse, rng_ref = random.Random(seed), random.Random(seed)
            got = view(sentence, rng_kcse)
            assert got == reference(sentence, rng_ref), (view.spec, seed, sentence)
            # Same draws: both generators are left in the same state.
            assert rng_kcse.random() == rng_ref.random()


def test_every_view_edits_something():
    """The comparison above is not vacuous: each view changes these sentences."""
    for view in (WordDeletion(0.3), SpanDeletion(0.3), Reordering(0.5),
                 SynonymSubstitution(TABLE, 0.3)):
        for sentence in (ENGLISH[1], CHINESE[2]):
            assert view(sentence, random.Random(0)) != sentence, view.spec


def test_chinese_is_segmented_with_jieba_and_joined_without_spaces():
    words, chinese = _segment("我喜欢北京的秋天。")
    assert chinese and words == ["我", "喜欢", "北京", "的", "秋天", "。"]
    assert _segment("A man  plays.") == (["A", "man", "plays."], False)
    # A space stays only between two non-CJK letters or digits.
    out = Reordering(0.01)(CHINESE[1], random.Random(0))  # no edit: text as given
    assert out == CHINESE[1]
    out = WordDeletion(0.1)(CHINESE[1], random.Random(3))
    assert " " not in out.replace("Hello world", "")


def test_rate_zero_and_no_edit_return_the_text_as_given():
    for sentence in SENTENCES + ["", "   ", "a  b   c", "一"]:
        for view in (WordDeletion(0), SpanDeletion(0), Reordering(0),
                     SynonymSubstitution(TABLE, 0)):
            rng = random.Random(5)
            state = rng.getstate()
            assert view(sentence, rng) == sentence
            assert rng.getstate() == state  # no draw


def test_one_word_and_empty_sentences_never_lose_every_word():
    for view in (WordDeletion(0.9), SpanDeletion(0.9), Reordering(0.9),
                 WordDeletion(0.9, marker="[DEL]")):
        for sentence in ("hello", "你好", "", "。"):
            assert view(sentence, random.Random(0)) == sentence
    # Two words at rate 0.9: one is deleted, never both.
    assert WordDeletion(0.9)("hello world", random.Random(0)) in ("hello", "world")


@pytest.mark.parametrize("view_class", [WordDeletion, SpanDeletion])
def test_deleted_words_equal_the_documented_count(view_class):
    """English text: k = min(round_half_up(rate * n), n - 1) words fewer, in order."""
    for rate in (0.1, 0.25, 0.5, 0.7, 0.95):
        for seed in SEEDS:
            for sentence in ENGLISH:
                words = sentence.split()
                n = len(words)
                expected = min(int(rate * n + 0.5), n - 1)
                out_words = view_class(rate)(sentence, random.Random(seed)).split()
                assert len(out_words) == n - expected
                it = iter(words)  # what is left is a subsequence, in order
                assert all(word in it for word in out_words)


def test_deletion_count_on_words():
    """The count, on the word lists themselves (Chinese included)."""
    for rate in (0.1, 0.3, 0.7):
        for seed in SEEDS:
            for sentence in SENTENCES:
                words, _ = _segment(sentence)
                n = len(words)
                expected = max(min(int(rate * n + 0.5), n - 1), 0)
                for view in (WordDeletion(rate), SpanDeletion(rate)):
                    out = view.edit_words(words, random.Random(seed))
                    assert len(out if out is not None else words) == n - expected
                marked = WordDeletion(rate, marker="[DEL]").edit_words(words, random.Random(seed))
                if marked is not None:
                    assert len([w for w in marked if w != "[DEL]"]) == n - expected
                    assert "[DEL] [DEL]" not in " ".join(marked)  # runs merged


def test_span_deletion_removes_consecutive_words():
    words = [f"w{i}" for i in range(20)]
    for seed in SEEDS:
        out = SpanDeletion(0.3).edit_words(words, random.Random(seed))
        gone = [i for i, w in enumerate(words) if w not in out]
        assert len(gone) == 6 and gone == list(range(gone[0], gone[0] + 6))
        marked = SpanDeletion(0.3, marker="[DEL]").edit_words(words, random.Random(seed))
        assert marked.count("[DEL]") == 1 and marked.index("[DEL]") == gone[0]


def test_reordering_is_a_permutation_of_the_words():
    words = [f"w{i}" for i in range(23)]
    for rate in (0.1, 0.3, 0.6, 0.99):
        for pairs in (1, 2, 3):
            for seed in SEEDS:
                out = Reordering(rate, pairs=pairs).edit_words(words, random.Random(seed))
                if out is None:
                    assert int(rate * 23 + 0.5) // (2 * pairs) == 0
                    continue
                assert sorted(out) == sorted(words)
                moved = sum(a != b for a, b in zip(out, words))
                assert moved == 2 * pairs * (int(rate * 23 + 0.5) // (2 * pairs))
    for sentence in SENTENCES:
        for seed in SEEDS:
            words, _ = _segment(sentence)
            out = Reordering(0.5).edit_words(words, random.Random(seed))
            assert out is None or sorted(out) == sorted(words)


def test_substitution_uses_only_entries_of_the_table():
    for rate in (0.1, 0.5, 0.9):
        for seed in SEEDS:
            for sentence in SENTENCES:
                words, _ = _segment(sentence)
                out = SynonymSubstitution(TABLE, rate).edit_words(words, random.Random(seed))
                if out is None:
                    continue
                assert len(out) == len(words)
                changed = [(a, b) for a, b in zip(words, out) if a != b]
                assert changed
                for before, after in changed:
                    assert after in TABLE[before]
                n = len(words)
                candidates = sum(w in TABLE for w in words)
                assert len(changed) == min(int(rate * n + 0.5), candidates)


def test_substitution_table_is_normalised():
    view = SynonymSubstitution({"a": ["a", "b", "b", "c"], "x": ["x"]}, 0.5)
    assert view.synonyms == {"a": ["b", "c"]}
    other = SynonymSubstitution({"a": ["b", "d"]}, 0.5)
    assert view.get_config()["synonyms_digest"] != other.get_config()["synonyms_digest"]
    with pytest.raises(TypeError, match="synonyms must be a dict"):
        SynonymSubstitution(["a"], 0.5)
    with pytest.raises(ValueError, match="synonyms of 'a'"):
        SynonymSubstitution({"a": "b"}, 0.5)


def test_bad_arguments():
    with pytest.raises(ValueError, match="rate"):
        WordDeletion(1)
    with pytest.raises(ValueError, match="rate"):
        SpanDeletion(True)
    with pytest.raises(ValueError, match="pairs"):
        Reordering(0.3, pairs=0)
    with pytest.raises(TypeError, match="random.Random"):
        WordDeletion(0.3)("a b c", 0)
    with pytest.raises(TypeError, match="takes a str"):
        WordDeletion(0.3)(None, random.Random(0))
