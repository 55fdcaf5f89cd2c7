"""Every sentence of every data set in ../shared/data, by data set.

The tokenizers of the Google-format checkpoints are checked on all of them
against bert4keras (`bert4keras_reference`): Chinese STS-B (all splits),
the 11 languages of stsb-multi-mt (all splits), English STS12–16 and SICK.
"""

import functools
import pathlib
import unicodedata

import kcse
from kcse.data import english

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@functools.lru_cache(maxsize=None)
def data_set_sentences(data_dir):
    """`{data set: its distinct sentences, sorted}` of `data_dir`."""
    data_dir = pathlib.Path(data_dir)
    pairs = {"Chinese STS-B": [
        kcse.data.read_pairs(data_dir / f"senteval_cn/STS-B/STS-B.{split}.data")
        for split in ("train", "valid", "test")]}
    for language in english.STSB_MULTI_MT_LANGUAGES:
        pairs[f"stsb-multi-mt {language}"] = [
            kcse.data.read_stsb_multi_mt(data_dir, language, split)
            for split in english.STSB_MULTI_MT_SPLITS
            if (data_dir / f"stsb_multi_mt/stsb-{language}-{split}.csv").is_file()]
    for name in english.STS_YEARS + ("SICK-R",):
        pairs[name] = [kcse.data.read_english_sts(data_dir, name)]
    return {name: sorted({text for split in splits
                          for text in list(split.sentences1) + list(split.sentences2)})
            for name, splits in pairs.items()}


def lowercased(text):
    """bert4keras' `do_lower_case`: lowercase, NFD, drop marks (Mn)."""
    text = unicodedata.normalize("NFD", text.lower())
    return "".join(c for c in text if unicodedata.category(c) != "Mn")


def character_vocabulary(texts, words, held_out=frozenset()):
    """Special tokens, every character of `texts` (as written and
    lowercased) alone and as a `##` piece, then `words`; none of `held_out`."""
    characters = sorted({c for text in texts for c in text + lowercased(text)
                         if not c.isspace() and c not in held_out
                         and unicodedata.category(c) not in ("Cc", "Cf")})
    vocabulary = SPECIAL_TOKENS + characters + ["##" + c for c in characters] + list(words)
    return list(dict.fromkeys(vocabulary))
