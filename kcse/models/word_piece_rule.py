"""Google BERT's text-to-ids rule, as bert4keras runs it, in plain Python.

The tokenizers of kcse's Google-format checkpoints
(`GoogleWordPieceTokenizer`; `JiebaWordPieceTokenizer` with jieba in
front) cut text as bert4keras 0.11.5's `Tokenizer(vocab, do_lower_case=...)`,
the tokenizer of Su Jianlin's evaluation scripts, which follows Google's
`tokenization.py`:

1. with `do_lower_case`, `text.lower()`, then NFD and every combining
   mark (category Mn) dropped, on the whole text; nothing else is folded
   (full-width "，" "？" "２" "Ａ" stay themselves, where keras-hub's
   `lowercase=True` folds them with NFKC to "," "?" "2" "a");
2. optionally a pre-tokenizer (jieba for WoBERT / RoFormer): a piece in
   the vocabulary is one token, any other is cut by steps 3-4;
3. punctuation (ASCII non-alphanumerics, Unicode P*) and CJK ideographs
   become words of their own, whitespace (space, tab, newlines, Zs)
   separates words, NUL, U+FFFD and categories Cc / Cf are dropped (a
   zero-width space inside a word joins its halves);
4. greedy longest-match word pieces with `##` continuations; a word
   longer than `word_maxlen` (200) characters, or with a part no piece
   matches, is one token: the whole word, i.e. the unknown token.

This module is the rule for the Python paths (and jieba's graph path,
through `tf.numpy_function`); `GoogleWordPieceTokenizer` computes steps
1 and 3 in the graph too, checked against this and bert4keras.
"""

import unicodedata

# Entries kept in the per-word cache before it is emptied (a bound on
# memory for endless streams of new numbers, URLs, ...).
_CACHE_LIMIT = 1 << 20

# bert4keras' and Google's limit on a word, in characters.
WORD_MAXLEN = 200

# bert4keras `Tokenizer._is_cjk_character` (Google's `_is_chinese_char`).
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def is_punctuation_or_cjk(character):
    """bert4keras `Tokenizer._is_punctuation(ch) or _is_cjk_character(ch)`."""
    code = ord(character)
    return (
        33 <= code <= 47
        or 58 <= code <= 64
        or 91 <= code <= 96
        or 123 <= code <= 126
        or unicodedata.category(character).startswith("P")
        or any(low <= code <= high for low, high in CJK_RANGES)
    )


class _BasicCharMap(dict):
    """`str.translate` table for step 3.

    Maps a code point to what bert4keras' `_tokenize` puts in its `spaced`
    string: punctuation and CJK characters get a space on both sides,
    whitespace (space, `\\n`, `\\r`, `\\t`, category Zs) becomes a space, NUL,
    U+FFFD and categories Cc/Cf are dropped, anything else is kept. Entries
    are computed on first use, so the table only holds characters seen.
    """

    def __missing__(self, code):
        character = chr(code)
        if is_punctuation_or_cjk(character):
            out = f" {character} "
        elif character in " \n\r\t" or unicodedata.category(character) == "Zs":
            out = " "
        elif code == 0 or code == 0xFFFD or unicodedata.category(character) in ("Cc", "Cf"):
            out = ""
        else:
            out = character
        self[code] = out
        return out


_BASIC_CHAR_MAP = _BasicCharMap()


def strip_accents(text):
    """NFD, then every combining mark (category Mn) dropped."""
    if text.isascii():
        return text
    text = unicodedata.normalize("NFD", text)
    return "".join([c for c in text if unicodedata.category(c) != "Mn"])


class WordPieceRule:
    """The rule of the module, as ids, with a cache per word.

    Args:
        token_to_id: dict of token to id (the vocabulary).
        oov_id: the unknown token's id.
        lowercase: bert4keras' `do_lower_case`: `str.lower` the text.
        strip_accents: strip accents after lowercasing (None: `lowercase`,
            as bert4keras' `do_lower_case` does both).
        suffix_indicator: the continuation prefix, `"##"`.
        word_maxlen: longer words (in characters) are one token.
        pre_tokenize: None, or a function of the normalised text giving
            its pieces (jieba's `cut`); a piece in the vocabulary is one
            token.
        special_pattern: None, or a compiled regex of special tokens kept
            as tokens when they appear in a text (before lowercasing).

    Example:
    ```python
    from kcse.models.word_piece_rule import WordPieceRule

    vocabulary = ["[UNK]", "一", "，", ",", "a", "##b"]
    rule = WordPieceRule({t: i for i, t in enumerate(vocabulary)}, oov_id=0)
    assert rule.encode("一，AB") == [1, 2, 4, 5]  # "，" stays full-width
    ```
    """

    def __init__(self, token_to_id, oov_id, lowercase=True, strip_accents=None,
                 suffix_indicator="##", word_maxlen=WORD_MAXLEN, pre_tokenize=None,
                 special_pattern=None):
        self.token_to_id = token_to_id
        self.oov_id = oov_id
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.suffix = suffix_indicator
        self.word_maxlen = word_maxlen
        self.pre_tokenize = pre_tokenize
        self.special_pattern = special_pattern
        self.cache = {}

    def normalize(self, text):
        """bert4keras' `lowercase_and_normalize` (step 1)."""
        if self.lowercase:
            text = text.lower()
        return strip_accents(text) if self.strip_accents else text

    def word_pieces(self, word):
        """bert4keras `_word_piece_tokenize`, as ids."""
        vocab = self.token_to_id
        if len(word) > self.word_maxlen:
            return [vocab.get(word, self.oov_id)]
        ids = []
        start, n = 0, len(word)
        while start < n:
            for end in range(n, start, -1):
                piece = word[start:end]
                piece_id = vocab.get(piece if start == 0 else self.suffix + piece)
                if piece_id is not None:
                    break
            else:
                return [vocab.get(word, self.oov_id)]
            ids.append(piece_id)
            start = end
        return ids

    def word_ids(self, word):
        """Ids of one word of step 3 (computed once, then cached)."""
        ids = self.cache.get(word)
        if ids is None:
            ids = tuple(self.word_pieces(word))
            if len(self.cache) >= _CACHE_LIMIT:
                self.cache.clear()
            self.cache[word] = ids
        return ids

    def encode_text(self, text, out):
        """Appends the ids of `text` (no special tokens added) to `out`."""
        text = self.normalize(text)
        pieces = [text] if self.pre_tokenize is None else self.pre_tokenize(text)
        for piece in pieces:
            token_id = self.token_to_id.get(piece) if self.pre_tokenize else None
            if token_id is not None:
                out.append(token_id)
                continue
            # bert4keras `_tokenize(piece, pre_tokenize=False)`: normalise
            # (again, after a pre-tokenizer), steps 3 and 4.
            if self.pre_tokenize is not None:
                piece = self.normalize(piece)
            for word in piece.translate(_BASIC_CHAR_MAP).split():
                out.extend(self.word_ids(word))
        return out

    def encode(self, text):
        """The ids of `text` as a list."""
        if self.special_pattern is None:
            return self.encode_text(text, [])
        out = []
        for i, part in enumerate(self.special_pattern.split(text)):
            if i % 2:
                out.append(self.token_to_id[part])
            elif part:
                self.encode_text(part, out)
        return out
