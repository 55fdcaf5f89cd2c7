"""keras-hub's WordPiece tokenization as a Hugging Face `tokenizer.json`.

A folder's tokenizer must cut text as the encoder did in training, or the
exported model sees other tokens. keras-hub's `WordPieceTokenizer` (every
BERT-family tokenizer of kcse but the jieba ones) does not cut text as
transformers' `BertTokenizer` does: with `lowercase`, it folds each piece
with ICU's NFKC case folding (`tf_text.case_fold_utf8`), which also turns
full-width forms into ASCII ("，" → ",", "：" → ":", "１" → "1"); HF only
lowercases. On the Chinese STS-B test sentences 726 of 2,456 differ with
all-MiniLM-L6-v2's vocabulary. So the folder does not name `BertTokenizer`
(whose `vocab.txt` reading would give HF's cuts): it ships a
`tokenizer.json` for the `tokenizers` library that does keras-hub's steps,
loaded by `transformers.AutoTokenizer` as a `PreTrainedTokenizerFast`:

- normalizer: `BertNormalizer` (control characters removed, whitespace to
  spaces, spaces around CJK characters when `split_on_cjk`, accents
  stripped when `strip_accents`; no lowercasing) then, with `lowercase`,
  `NFKC` and `Lowercase` (NFKC case folding's two halves);
- pre-tokenizer: `BertPreTokenizer` (whitespace and punctuation, which it
  defines as keras-hub does: ASCII non-alphanumerics and Unicode P*);
- model: `WordPiece` with the tokenizer's vocabulary, unknown token and
  suffix indicator;
- post-processor: `[CLS] text [SEP]`, as the preprocessor packs a sentence.

kcse's folding differs from `NFKC` + `Lowercase` in three ways, each
written into the JSON: keras-hub folds a piece after cutting, so "…" is
one piece that folds to "..." (and 18 more punctuation marks that fold to
several marks: "‼", "︙", ...), where HF would cut "..." in three; such a
mark is replaced by placeholder characters (plane-15 private use) that the
vocabulary maps to the ids kcse gives the mark. Case folding is more than
lowercasing for 183 characters ("ß" → "ss", "ς" → "σ"): a `Replace` each.
Control and format characters (Cc, Cf: zero-width spaces) cut words in
keras-hub and are deleted by HF's `BertNormalizer`: they become spaces.

Still different: a letter, digit or symbol that folds to punctuation ("⒈" → "1.", "㈱" → "(株)")
or to a space ("¨"), within a word; keras-hub's limit on a word is 100
bytes, HF's 100 characters. None of them is in Chinese STS-B.
With `special_tokens_in_strings=False` (keras-hub's default) a "[CLS]"
typed in a sentence is text, not a token: `split_special_tokens` keeps it so.

Jieba (WoBERT, RoFormer: `kcse.models.JiebaWordPieceTokenizer`, bert4keras'
rule). A `tokenizer.json` cannot hold a jieba step, but transformers'
`RoFormerTokenizerFast` installs one when it loads (rjieba, jieba's Rust
port, with its HMM off, as WoBERT's rule), so the folder's
`tokenizer_config.json` names `RoFormerTokenizer` and `AutoTokenizer`
(hence sentence-transformers) cuts with rjieba; `rjieba` must be installed
where the folder is loaded. Its `tokenizer.json` holds the other steps:
control and format characters (and U+FFFD) to spaces, lowercasing and
accent stripping on the whole text (bert4keras' `do_lower_case`), rjieba,
then a word in the vocabulary is one token and any other is cut at spaces
and CJK characters into word pieces. Measured on the 2,456 Chinese STS-B
test sentences: jieba's and rjieba's cuts (HMM off) are the same for all
2,456, and the folder's ids equal kcse's for all 2,456 with word
vocabularies of jieba's 30,000 most frequent words and of all its 349,046
(plus the sentences' characters). What it cannot reproduce:
- jieba's HMM (`jieba_hmm=True`): rjieba cuts without it, and jieba's cuts
  with it are rjieba's on only 1,940 of the 2,456 sentences: refused;
- words added to jieba's dictionary in the training process
  (`jieba.add_word`, `jieba.load_userdict`): rjieba has jieba's built-in
  dictionary only;
- an out-of-vocabulary jieba word with punctuation inside (5 words of
  jieba's dictionary: "c++", "c#", "at&t"): kcse cuts it at the
  punctuation, transformers does not;
- plain `tokenizers` readers of `tokenizer.json` (text-embeddings-inference)
  run no jieba: they get characters and WordPiece.
"""

import functools
import json
import sys
import unicodedata

from kcse.export.formats import UnsupportedExportError
from kcse.models.huggingface_normalization import EXPORTED_TOKENIZER_FIELD

# The longest word WordPiece cuts; longer ones are one unknown token.
MAX_WORD_LENGTH = 100
TOKENIZER_FILE = "tokenizer.json"
VOCABULARY_FILE = "vocab.txt"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"
SPECIAL_TOKEN_NAMES = ("cls_token", "sep_token", "pad_token", "mask_token")
# The first placeholder of a punctuation mark that folds to several
# (supplementary private use area A: never in a vocabulary or in text).
PLACEHOLDER_START = 0xF0000
# What keras-hub's pre-tokenizer cuts words at and drops (its WHITESPACE_REGEX).
CONTROL_AND_FORMAT = r"[\p{Cc}\p{Cf}]"
# What bert4keras' rule (kcse's Google and jieba tokenizers) drops: also U+FFFD.
JIEBA_DROPPED = "[\\p{Cc}\\p{Cf}\ufffd]"
# The same but tab, newline and carriage return, which separate words there.
GOOGLE_DROPPED = "[\\x{0}-\\x{8}\\x{b}\\x{c}\\x{e}-\\x{1f}\\x{7f}-\\x{9f}\\p{Cf}\\x{fffd}]"
# Python's `str.lower` makes a capital sigma that ends a word final (ς);
# the `Lowercase` normalizer lowercases character by character (σ).
FINAL_SIGMA = "(?<=[\\p{Lu}\\p{Ll}\\p{Lt}])\u03a3(?![\\p{Lu}\\p{Ll}\\p{Lt}])"
# The transformers tokenizer that cuts with (r)jieba when it loads.
JIEBA_TOKENIZER_CLASS = "RoFormerTokenizer"
# How many of the 2,456 Chinese STS-B test sentences jieba with its HMM cuts as rjieba.
JIEBA_HMM_SAME_CUTS = 1940


def is_punctuation(character):
    """BERT's punctuation, as keras-hub's PUNCTUATION_REGEX and HF define it."""
    code = ord(character)
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(character).startswith("P")


def folds_to_several(character):
    """Whether NFKC case folding makes `character` several characters."""
    return len(unicodedata.normalize("NFKC", character).casefold()) > 1


def characters(test):
    """Every Unicode character for which `test` holds, in code point order."""
    return [chr(code) for code in range(sys.maxunicode + 1) if test(chr(code))]


@functools.cache
def expanding_punctuation():
    """Punctuation marks that fold to several characters ("…" → "...")."""
    return characters(lambda c: is_punctuation(c) and folds_to_several(c))


@functools.cache
def case_folds_beyond_lowercase():
    """`{lowercase character: its case folding}` where the two differ."""
    return {c: c.casefold() for c in characters(lambda c: c == c.lower() != c.casefold())}


def is_jieba(tokenizer):
    """Whether `tokenizer` cuts words with jieba first (WoBERT, RoFormer)."""
    from kcse.models.wobert.jieba_word_piece_tokenizer import JiebaWordPieceTokenizer

    return isinstance(tokenizer, JiebaWordPieceTokenizer)


def is_google(tokenizer):
    """Whether `tokenizer` cuts as bert4keras does (Google-format checkpoints)."""
    from kcse.models.google_word_piece_tokenizer import GoogleWordPieceTokenizer

    return isinstance(tokenizer, GoogleWordPieceTokenizer) and not is_jieba(tokenizer)


def check_tokenizer(tokenizer):
    """Raises `UnsupportedExportError` unless `tokenizer_json` can express `tokenizer`."""
    import keras_hub

    if is_jieba(tokenizer) and tokenizer.jieba_hmm:
        raise UnsupportedExportError(
            "the tokenizer cuts words with jieba's HMM (jieba_hmm=True); transformers' "
            "RoFormerTokenizer cuts with rjieba without it, which cuts only "
            f"{JIEBA_HMM_SAME_CUTS:,} of the 2,456 Chinese STS-B test sentences as "
            "jieba's HMM does, so the folder would tokenize otherwise than the encoder "
            "was trained"
        )
    if not isinstance(tokenizer, keras_hub.tokenizers.WordPieceTokenizer):
        raise UnsupportedExportError(
            f"{type(tokenizer).__name__} is not exported to Hugging Face yet: kcse "
            "writes WordPiece (BERT-family) tokenizers"
        )
    if not tokenizer.split:
        raise UnsupportedExportError(
            "the WordPiece tokenizer has split=False (text pre-split by the caller), "
            "which a Hugging Face tokenizer cannot reproduce"
        )


def special_tokens(tokenizer):
    """`{name: token}` of the tokenizer's unknown and BERT special tokens."""
    tokens = {"unk_token": tokenizer.oov_token}
    for name in SPECIAL_TOKEN_NAMES:
        tokens[name] = getattr(tokenizer, name)
    return tokens


def replace(pattern, content, regex=False):
    """A `Replace` normalizer of `pattern` (a string, or a regex) by `content`."""
    return {"type": "Replace", "pattern": {"Regex" if regex else "String": pattern},
            "content": content}


def folding_normalizers(tokenizer, placeholders):
    """The normalizers of keras-hub's case folding; adds to `placeholders`.

    `placeholders` (`{placeholder: id}`) gets the vocabulary entries of the
    punctuation marks that fold to several characters: each mark is
    replaced by one placeholder per id kcse's tokenizer gives it alone.
    """
    marks = expanding_punctuation()
    normalizers = []
    for mark, ids in zip(marks, tokenizer(marks)):
        ids = [int(i) for i in ids]
        names = [chr(PLACEHOLDER_START + len(placeholders) + i) for i in range(len(ids))]
        placeholders.update(zip(names, ids))
        normalizers.append(replace(mark, " " + " ".join(names) + " "))
    normalizers += [{"type": "NFKC"}, {"type": "Lowercase"}]
    normalizers += [replace(lower, folded)
                    for lower, folded in case_folds_beyond_lowercase().items()]
    return normalizers


def tokenizer_json(tokenizer):
    """The `tokenizers` library's JSON (a dict) cutting text as `tokenizer`."""
    vocabulary = tokenizer.get_vocabulary()
    ids = {token: index for index, token in enumerate(vocabulary)}
    tokens = special_tokens(tokenizer)
    placeholders = {}
    if is_jieba(tokenizer):
        # bert4keras lowercases and strips accents before jieba; the
        # pre-tokenizer is RoFormerTokenizerFast's (rjieba), set at load.
        normalizers = [
            replace(JIEBA_DROPPED, " ", regex=True),
            {"type": "BertNormalizer", "clean_text": False, "handle_chinese_chars": False,
             "strip_accents": bool(tokenizer.strip_accents),
             "lowercase": bool(tokenizer.lowercase)},
        ]
    elif is_google(tokenizer):
        # bert4keras: drop control and format characters, lowercase, then
        # strip accents (BertNormalizer strips before it lowercases).
        normalizers = [replace(GOOGLE_DROPPED, "", regex=True)]
        if tokenizer.lowercase:
            normalizers += [replace(FINAL_SIGMA, "\u03c2", regex=True), {"type": "Lowercase"}]
        normalizers.append(
            {"type": "BertNormalizer", "clean_text": False, "handle_chinese_chars": True,
             "strip_accents": bool(tokenizer.strip_accents), "lowercase": False})
    else:
        normalizers = [
            replace(CONTROL_AND_FORMAT, " ", regex=True),
            {"type": "BertNormalizer", "clean_text": True,
             "handle_chinese_chars": bool(tokenizer.split_on_cjk),
             "strip_accents": bool(tokenizer.strip_accents), "lowercase": False},
        ]
        if tokenizer.lowercase:
            normalizers += folding_normalizers(tokenizer, placeholders)
    cls, sep = tokens["cls_token"], tokens["sep_token"]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": ids[token], "content": token, "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": True}
            for token in sorted(set(tokens.values()), key=ids.__getitem__)
        ],
        "normalizer": {"type": "Sequence", "normalizers": normalizers},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": cls, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": sep, "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": cls, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": sep, "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": sep, "type_id": 1}}],
            "special_tokens": {
                token: {"id": token, "ids": [ids[token]], "tokens": [token]}
                for token in (cls, sep)
            },
        },
        "decoder": {"type": "WordPiece", "prefix": tokenizer.suffix_indicator,
                    "cleanup": True},
        "model": {
            "type": "WordPiece",
            "unk_token": tokens["unk_token"],
            "continuing_subword_prefix": tokenizer.suffix_indicator,
            "max_input_chars_per_word": getattr(tokenizer, "word_maxlen", MAX_WORD_LENGTH),
            "vocab": {**ids, **placeholders},
        },
    }


def tokenizer_files(tokenizer, sequence_length):
    """`{file name: text}` of the tokenizer files of a transformers folder.

    `tokenizer.json` (see the module), `tokenizer_config.json` naming
    `PreTrainedTokenizerFast` (`RoFormerTokenizer` for a jieba tokenizer,
    which transformers loads as `RoFormerTokenizerFast` cutting with
    rjieba) with `model_max_length` = `sequence_length`
    (the preprocessor's, [CLS] and [SEP] included), and
    `special_tokens_map.json`, and `vocab.txt` with `do_lower_case` and
    `strip_accents` in the config, which keras-hub (and so kcse's
    `from_preset`) reads the folder back by; transformers does not read
    them when `tokenizer.json` is there.
    """
    tokens = special_tokens(tokenizer)
    config = {
        "tokenizer_class": (JIEBA_TOKENIZER_CLASS if is_jieba(tokenizer)
                            else "PreTrainedTokenizerFast"),
        "model_max_length": sequence_length,
        "split_special_tokens": not tokenizer.special_tokens_in_strings,
        "clean_up_tokenization_spaces": False,
        "do_lower_case": bool(tokenizer.lowercase),
        "strip_accents": bool(tokenizer.strip_accents),
        **tokens,
    }
    if is_google(tokenizer) or is_jieba(tokenizer):
        config[EXPORTED_TOKENIZER_FIELD] = type(tokenizer).__name__
    return {
        TOKENIZER_FILE: json.dumps(tokenizer_json(tokenizer), ensure_ascii=False) + "\n",
        TOKENIZER_CONFIG_FILE: json.dumps(config, indent=2, ensure_ascii=False) + "\n",
        SPECIAL_TOKENS_FILE: json.dumps(tokens, indent=2, ensure_ascii=False) + "\n",
        VOCABULARY_FILE: "".join(token + "\n" for token in tokenizer.get_vocabulary()),
    }
