"""CLEAR's text views by name, and the pairs of views training takes.

A spec (`name[:rate[:extra]]`) gives a view (`text_view_from_spec`); two
views give two edited copies of every sentence (`text_view_pairs`). The
views themselves are in `text_views.py`; `layers/view_specs.py` names the
embedding-level views alike.
"""

import numbers
import random

from kcse.data.text_views import Reordering
from kcse.data.text_views import SpanDeletion
from kcse.data.text_views import SynonymSubstitution
from kcse.data.text_views import TextView
from kcse.data.text_views import WordDeletion

TEXT_VIEWS = ("word_deletion", "span_deletion", "reordering", "synonym_substitution")
# The rate a spec without a value gets (see each class for the reason).
DEFAULT_RATES = {
    "word_deletion": 0.7,
    "span_deletion": 0.3,
    "reordering": 0.3,
    "synonym_substitution": 0.3,
}


def text_view_from_spec(spec, synonyms=None):
    """The view a spec names: `name[:rate[:extra]]`.

    Names (`TEXT_VIEWS`): `word_deletion`, `span_deletion` (extra: the
    marker, e.g. `word_deletion:0.7:[DEL]`), `reordering` (extra: pairs,
    e.g. `reordering:0.3:2`), `synonym_substitution` (needs `synonyms`).
    A name alone takes `DEFAULT_RATES[name]`. A view's `spec` gives it back:
    `text_view_from_spec(view.spec, synonyms) == view`. Errors are
    `ValueError`s naming the spec: an unknown name, a rate that is not a
    number in [0, 1), a bad extra field, `synonym_substitution` without a
    table.

    Example:
    ```python
    import kcse

    kcse.data.text_view_from_spec("word_deletion")          # WordDeletion(rate=0.7, marker=None)
    kcse.data.text_view_from_spec("reordering:0.3:2")       # Reordering(rate=0.3, pairs=2)
    kcse.data.text_view_from_spec("synonym_substitution:0.2", synonyms={"好": ["佳"]})
    try:
        kcse.data.text_view_from_spec("word_deletion:1.5")
    except ValueError as error:
        message = str(error)  # "text view spec 'word_deletion:1.5': ..."
    ```
    """
    if isinstance(spec, TextView):
        return spec
    if not isinstance(spec, str):
        raise TypeError(f"a text view spec is a str such as 'word_deletion:0.3'; "
                        f"got {type(spec).__name__}.")
    name, *fields = spec.strip().split(":", 2)
    where = f"text view spec {spec!r}"
    if name not in TEXT_VIEWS:
        raise ValueError(f"{where}: unknown view {name!r}; "
                         f"known: {', '.join(TEXT_VIEWS)}.")
    if fields:
        try:
            rate = float(fields[0])
        except ValueError:
            raise ValueError(f"{where}: the rate {fields[0]!r} is not a number.") from None
    else:
        rate = DEFAULT_RATES[name]
    extra = fields[1] if len(fields) > 1 else None
    try:
        if name in ("word_deletion", "span_deletion"):
            view_class = WordDeletion if name == "word_deletion" else SpanDeletion
            return view_class(rate, marker=extra)
        if name == "reordering":
            if extra is None:
                return Reordering(rate)
            if not extra.isdigit():
                raise ValueError(f"pairs must be an int >= 1; got {extra!r}.")
            return Reordering(rate, pairs=int(extra))
        if extra is not None:
            raise ValueError(f"takes no field after the rate; got {extra!r}.")
        if synonyms is None:
            raise ValueError("synonym_substitution needs a synonym table: "
                             "pass synonyms= (see read_synonym_table).")
        return SynonymSubstitution(synonyms, rate)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{where}: {error}") from None


def text_view_pairs(sentences, view_a, view_b, seed, synonyms=None):
    """Two views of every sentence, drawn from one `random.Random(seed)`.

    Order of the draws: sentence by sentence, its view A then its view B
    (`a[0], b[0], a[1], b[1], ...`) from one generator, so the result
    depends only on the sentences, the views and `seed`.

    Args:
        sentences: an iterable of str.
        view_a, view_b: views, or specs for `text_view_from_spec`.
        seed: int, the seed of the generator.
        synonyms: the table for a `synonym_substitution` spec.

    Returns:
        `(views_a, views_b)`: two lists of str, one entry per sentence.

    Example:
    ```python
    import kcse

    a, b = kcse.data.text_view_pairs(
        ["a man is playing a large flute .", "我喜欢北京的秋天。"],
        "word_deletion:0.3", "reordering:0.3", seed=1)
    a  # ['a man playing large flute .', '我喜欢北京秋天']
    b  # ['a is man playing a large flute .', '我喜欢北京。秋天的']
    ```
    """
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int; got {seed!r}.")
    view_a = text_view_from_spec(view_a, synonyms)
    view_b = text_view_from_spec(view_b, synonyms)
    rng = random.Random(int(seed))
    views_a, views_b = [], []
    for sentence in sentences:
        views_a.append(view_a(sentence, rng))
        views_b.append(view_b(sentence, rng))
    return views_a, views_b
