"""CLEAR's text-level views: word deletion, span deletion, reordering, substitution.

CLEAR (Wu et al. 2020, "CLEAR: Contrastive Learning for Sentence
Representation", arXiv:2012.15466, §3.2) trains a sentence encoder on two
augmented views of each sentence with a contrastive loss. Its four sentence
augmentations are word deletion, span deletion, reordering and synonym
substitution. No authors' code was found (none is linked from the first
author's publication list or from paper indexes, and no repository of it
was found on GitHub), so every view here follows the paper's description;
where the paper leaves a choice open, the class docstring says what kcse
does. The paper's wording quoted in the docstrings is as we read it; its
full text could not be re-checked when this was written. The views edit *text*, before any tokenizer,
so they work with every kcse backbone.

Words. A sentence holding any CJK character is segmented with jieba
(`jieba.lcut(text, HMM=False)`, the global jieba tokenizer as in kcse's
WoBERT tokenizer, so it is deterministic given jieba's dictionary and words
added with `jieba.add_word` count); whitespace pieces are dropped and the
words are joined again without spaces, except that one space is put
between two words whose facing characters are both non-CJK letters or
digits (`"他说 Hello world"` becomes `"他说Hello world"`). Any other sentence is split
on whitespace (`str.split()`) and joined with single spaces. Punctuation is
a word like any other: jieba makes `"。"` a word of its own; whitespace
splitting leaves `"dog."` one word.

Edge cases, every view: a view that makes no edit returns the text exactly
as given (rate 0, an empty or one-word sentence, a sentence without
synonyms); deletion never deletes every word (a one-word sentence is never
changed); reordering needs two words.

Randomness: a view is called as `view(text, rng)` with a `random.Random`;
its edit depends only on the text and the generator's state, and the draws
it makes are listed in its docstring (`tests/clear_reference.py` makes the
same draws independently). `text_view_pairs(sentences, view_a, view_b, seed)`
draws both views of every sentence from one `random.Random(seed)`.

Views by name (`text_view_from_spec`, `TEXT_VIEWS`, `DEFAULT_RATES`) and
the pairs of views (`text_view_pairs`) are in `text_view_specs.py`; the
synonym tables (`read_synonym_table`) in `synonym_table.py`.

Example:
```python
import random

import kcse

view = kcse.data.text_view_from_spec("word_deletion:0.3")
view.spec, view("a man is playing a large flute .", random.Random(0))
a, b = kcse.data.text_view_pairs(["一个男人在吹一支大笛子。"], "span_deletion:0.3",
                                 "reordering:0.3", seed=0)
```
"""

import logging
import numbers
import random
import re

from kcse.foundation import digests
from kcse.foundation import optional_packages
from kcse.data.synonym_table import check_synonym_table

_CJK = re.compile(
    "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df"
    "\U0002a700-\U0002ceaf\U0002f800-\U0002fa1f]"
)
_JIEBA_READY = False


def _jieba():
    """jieba, its dictionary loaded once without its log lines; a
    `kcse.foundation.optional_packages.MissingPackageError` names its pip install."""
    global _JIEBA_READY
    jieba = optional_packages.require("jieba", "Segmenting Chinese sentences for CLEAR's text views")

    if not _JIEBA_READY:
        level = jieba.default_logger.level
        jieba.default_logger.setLevel(logging.WARNING)
        try:
            jieba.dt.initialize()
        finally:
            jieba.default_logger.setLevel(level)
        _JIEBA_READY = True
    return jieba


def _is_chinese(text):
    return _CJK.search(text) is not None


def _joins_with_space(left, right):
    """Whether two jieba words are joined by a space: both sides non-CJK alphanumerics."""
    a, b = left[-1], right[0]
    return a.isalnum() and b.isalnum() and not _is_chinese(a) and not _is_chinese(b)


def _segment(text):
    """`(words, chinese)`: `text`'s words and whether jieba segmented it.

    `"我喜欢北京的秋天。"` gives `(['我', '喜欢', '北京', '的', '秋天', '。'], True)`,
    `"A man  plays."` gives `(['A', 'man', 'plays.'], False)`.
    """
    if not isinstance(text, str):
        raise TypeError(f"a text view takes a str; got {type(text).__name__}.")
    if _is_chinese(text):
        words = [w for w in _jieba().lcut(text, HMM=False) if w.strip()]
        return words, True
    return text.split(), False


def _join_words(words, chinese):
    """The text of `words`, joined as the module docstring says.

    `(["用", "Python", "写"], True)` gives `"用Python写"`; `(["A", "man"],
    False)` gives `"A man"`.
    """
    if not chinese:
        return " ".join(words)
    pieces = []
    for word in words:
        if pieces and _joins_with_space(pieces[-1], word):
            pieces.append(" ")
        pieces.append(word)
    return "".join(pieces)


def _count(rate, n):
    """`rate * n` rounded half up: how many of `n` words a rate edits."""
    return int(rate * n + 0.5)


def _check_rate(rate, name):
    if isinstance(rate, bool) or not isinstance(rate, numbers.Real) or not 0 <= rate < 1:
        raise ValueError(f"{name}: the rate must be a number in [0, 1); got {rate!r}.")
    return float(rate)


def _check_marker(marker, name):
    if marker is not None and (not isinstance(marker, str) or not marker.strip()
                               or marker != marker.strip() or ":" in marker):
        raise ValueError(
            f"{name}: the marker must be None or a non-empty str without spaces "
            f"at its ends or ':'; got {marker!r}.")
    return marker


def _format_rate(rate):
    return repr(float(rate))


class TextView:
    """What the four views share: segmentation, the call, spec and config."""

    name = None

    def __call__(self, text, rng):
        if not isinstance(rng, random.Random):
            raise TypeError(
                f"{self.spec}: rng must be a random.Random; got {type(rng).__name__}.")
        words, chinese = _segment(text)
        edited = self.edit_words(words, rng)
        return text if edited is None else _join_words(edited, chinese)

    def edit_words(self, words, rng):
        """The edited list of words, or None where the view makes no edit."""
        raise NotImplementedError

    def get_config(self):
        """The view's settings, as a dict (JSON-able; results can key on it)."""
        raise NotImplementedError

    @property
    def spec(self):
        raise NotImplementedError

    def __repr__(self):
        settings = ", ".join(
            f"{k}={v!r}" for k, v in self.get_config().items() if k != "name")
        return f"{type(self).__name__}({settings})"

    def __eq__(self, other):
        return type(self) is type(other) and self.get_config() == other.get_config()

    def __hash__(self):
        return hash(self.spec)


class _Deletion(TextView):
    """What word and span deletion share: a rate, a marker, the count."""

    def __init__(self, rate, marker=None):
        self.rate = _check_rate(rate, self.name)
        self.marker = _check_marker(marker, self.name)

    def deleted_count(self, n):
        """Words deleted of `n`: `min(round_half_up(rate * n), n - 1)`, so
        never all of them (0 for an empty sentence)."""
        return min(_count(self.rate, n), n - 1) if n else 0

    def get_config(self):
        return {"name": self.name, "rate": self.rate, "marker": self.marker}

    @property
    def spec(self):
        spec = f"{self.name}:{_format_rate(self.rate)}"
        return spec if self.marker is None else f"{spec}:{self.marker}"


class WordDeletion(_Deletion):
    """Deletes `rate` of a sentence's words, chosen at random (CLEAR's del-word).

    Follows the paper's description (§3.2; no authors' code released):
    randomly chosen words are deleted; the paper replaces them by a special
    `[DEL]` token (like BERT's `[MASK]`) and, as we read it, merges
    consecutive deleted words into one `[DEL]` so that word deletion is not
    told apart from span deletion by the number of markers. kcse feeds text
    to pretrained tokenizers that have no `[DEL]` token, so by default the
    words are removed outright (`marker=None`); `marker="[DEL]"` gives the
    paper's form, one marker per run of deleted words.

    Count: `k = min(round_half_up(rate * n), n - 1)` of the `n` words (never
    every word; a one-word sentence is never changed).
    Draws: one `rng.sample(range(n), k)` (none when `k == 0`).

    Args:
        rate: float in [0, 1), the fraction of words deleted. The spec
            default, 0.7, is the ratio Wang et al. report for this CLEAR-style
            view ("randomly selects 70% of words ... and replace them with a
            special token [DEL]"; "Improving the Robustness of
            Knowledge-Grounded Dialogue via Contrastive Learning",
            github.com/kxinwang2023/EnCo, following Poddar et al. 2022) and
            our reading of CLEAR's setting; it could not be checked against
            CLEAR's own text here.
        marker: None (delete) or the str put where a run of deleted words
            was (`"[DEL]"` for the paper's form).

    Example:
    ```python
    import random

    import kcse

    view = kcse.data.WordDeletion(0.5)
    view("a man is playing a large flute .", random.Random(0))  # 'man is a large'
    marked = kcse.data.WordDeletion(0.5, marker="[DEL]")
    marked("我喜欢北京的秋天。", random.Random(0))  # '[DEL]喜欢北京[DEL]秋天[DEL]'
    marked.spec  # 'word_deletion:0.5:[DEL]'
    view.get_config()  # {'name': 'word_deletion', 'rate': 0.5, 'marker': None}
    ```
    """

    name = "word_deletion"

    def edit_words(self, words, rng):
        n = len(words)
        k = self.deleted_count(n)
        if k <= 0:
            return None
        deleted = set(rng.sample(range(n), k))
        out = []
        for i, word in enumerate(words):
            if i not in deleted:
                out.append(word)
            elif self.marker is not None and (i == 0 or i - 1 not in deleted):
                out.append(self.marker)
        return out


class SpanDeletion(_Deletion):
    """Deletes one random span of consecutive words (CLEAR's del-span).

    Follows the paper's description (§3.2; no authors' code released):
    span deletion is word deletion on consecutive words; the paper puts a
    `[DEL]` in their place. As we read it, the paper does not fix the
    number of spans; kcse deletes one span covering `rate` of the words.
    By default the span is removed (`marker=None`, see `WordDeletion`);
    `marker="[DEL]"` puts one marker where it was.

    Count: the span has `k = min(round_half_up(rate * n), n - 1)` words.
    Draws: one `rng.randrange(n - k + 1)`, the span's first word (none when
    `k == 0`).

    Args:
        rate: float in [0, 1), the fraction of words in the span. The spec
            default, 0.3, is kcse's choice (no value found in a source):
            a third of a sentence keeps most of its meaning.
        marker: None (delete) or the str put where the span was.

    Example:
    ```python
    import random

    import kcse

    view = kcse.data.SpanDeletion(0.4)
    view("a man is playing a large flute .", random.Random(0))  # 'a man is flute .'
    view("一个男人在吹一支大笛子。", random.Random(0))        # '一个男人在笛子。'
    ```
    """

    name = "span_deletion"

    def edit_words(self, words, rng):
        n = len(words)
        k = self.deleted_count(n)
        if k <= 0:
            return None
        start = rng.randrange(n - k + 1)
        middle = [] if self.marker is None else [self.marker]
        return words[:start] + middle + words[start + k:]


class Reordering(TextView):
    """Swaps random pairs of equal-length spans of words (CLEAR's reorder).

    Follows the paper's description (§3.2; no authors' code released):
    "randomly sample several pairs of span and switch them pairwise". The
    paper does not give the spans' lengths or placement; kcse swaps
    `pairs` pairs of non-overlapping spans of one length, which together
    hold `rate` of the words, placed uniformly. The result is always a
    permutation of the words.

    Count: `m = round_half_up(rate * n)` words move, in `2 * pairs` spans of
    `L = m // (2 * pairs)` words; no edit when `L == 0` (fewer than two
    words, or a small rate).
    Draws: `slots = sorted(rng.sample(range(n - 2*pairs*L + 2*pairs), 2*pairs))`
    places the spans (span `i` starts at `slots[i] + i * (L - 1)`), then
    `rng.shuffle(order)` of `order = list(range(2 * pairs))` pairs them:
    spans `order[0]` and `order[1]` swap, then `order[2]` and `order[3]`, ...

    Args:
        rate: float in [0, 1), the fraction of words moved. The spec
            default, 0.3, is the ratio Wang et al. report for the CLEAR-style
            reordering view ("randomly samples several pairs of words ...
            (about 30% of context words), and switch them pairwise"; see
            `WordDeletion`); not checked against CLEAR's own text.
        pairs: int >= 1, how many pairs of spans are swapped (spec default 1).

    Example:
    ```python
    import random

    import kcse

    view = kcse.data.Reordering(0.5)
    view("a man is playing a large flute .", random.Random(0))
    # 'a man is flute . large playing a': "playing a" and "flute ." swapped
    two = kcse.data.Reordering(0.6, pairs=2)
    two("一个男人在吹一支大笛子。", random.Random(0))  # '吹男人在一个一支大。笛子'
    two.spec  # 'reordering:0.6:2'
    ```
    """

    name = "reordering"

    def __init__(self, rate, pairs=1):
        self.rate = _check_rate(rate, self.name)
        if isinstance(pairs, bool) or not isinstance(pairs, numbers.Integral) or pairs < 1:
            raise ValueError(f"{self.name}: pairs must be an int >= 1; got {pairs!r}.")
        self.pairs = int(pairs)

    def edit_words(self, words, rng):
        n = len(words)
        spans = 2 * self.pairs
        length = _count(self.rate, n) // spans
        if length == 0:
            return None
        slots = sorted(rng.sample(range(n - spans * length + spans), spans))
        starts = [slot + i * (length - 1) for i, slot in enumerate(slots)]
        order = list(range(spans))
        rng.shuffle(order)
        out = list(words)
        for j in range(0, spans, 2):
            a, b = starts[order[j]], starts[order[j + 1]]
            out[a:a + length] = words[b:b + length]
            out[b:b + length] = words[a:a + length]
        return out

    def get_config(self):
        return {"name": self.name, "rate": self.rate, "pairs": self.pairs}

    @property
    def spec(self):
        spec = f"{self.name}:{_format_rate(self.rate)}"
        return spec if self.pairs == 1 else f"{spec}:{self.pairs}"


class SynonymSubstitution(TextView):
    """Replaces random words by synonyms from a table you give (CLEAR's subs).

    Follows the paper's description (§3.2; no authors' code released):
    some randomly chosen words are replaced by synonyms. The paper takes its
    synonyms from a published English list; kcse downloads nothing: the
    table is a dict `word -> synonyms` (`read_synonym_table` reads one from
    a file). Words are matched exactly as segmented (a jieba word; an
    English word with its punctuation, `"dog."` is not `"dog"`). In the
    table, a word's own entry is dropped from its list, repeats are
    dropped (first kept) and words left without synonyms are ignored.

    Count: `k = min(round_half_up(rate * n), c)` of the `c` words that have
    synonyms (`n` words in all); no edit when `k == 0`.
    Draws: `rng.sample(candidates, k)` of the candidate positions (in
    sentence order), then, for the chosen positions in sentence order, one
    `rng.choice(synonyms[word])` each.

    Args:
        synonyms: a mapping `word -> list of synonyms` (str).
        rate: float in [0, 1), the fraction of the sentence's words
            replaced (at most every word that has synonyms). The spec
            default, 0.3, is kcse's choice (no value found in a source).

    `get_config()` holds `synonyms_digest`, a digest of the table, so results
    keyed on the config tell tables apart (the spec does not).

    Example:
    ```python
    import random

    import kcse

    table = {"喜欢": ["喜爱", "爱"], "秋天": ["秋季"], "large": ["big", "huge"]}
    view = kcse.data.SynonymSubstitution(table, 0.5)
    view("我喜欢北京的秋天。", random.Random(0))                 # '我喜爱北京的秋季。'
    view("a man is playing a large flute .", random.Random(0))  # '... a huge flute .'
    ```
    """

    name = "synonym_substitution"

    def __init__(self, synonyms, rate):
        self.rate = _check_rate(rate, self.name)
        self.synonyms = check_synonym_table(synonyms, self.name)
        self.synonyms_digest = digests.content_digest(self.synonyms)

    def edit_words(self, words, rng):
        n = len(words)
        candidates = [i for i, word in enumerate(words) if word in self.synonyms]
        k = min(_count(self.rate, n), len(candidates))
        if k <= 0:
            return None
        out = list(words)
        for i in sorted(rng.sample(candidates, k)):
            out[i] = rng.choice(self.synonyms[words[i]])
        return out

    def get_config(self):
        return {"name": self.name, "rate": self.rate,
                "synonyms_digest": self.synonyms_digest}

    @property
    def spec(self):
        return f"{self.name}:{_format_rate(self.rate)}"

    def __repr__(self):
        return (f"SynonymSubstitution(<{len(self.synonyms)} words, "
                f"{self.synonyms_digest}>, rate={self.rate!r})")
