"""CLEAR's synonym tables: read from a file (`word<TAB>syn1 syn2 ...`) and checked.

`SynonymSubstitution` (`text_views.py`) takes a table as `{word: [synonyms]}`;
`read_synonym_table` reads one from a file.
"""

import collections.abc

from kcse.data.sentence_pairs import MalformedLineError
from kcse.data.sentence_pairs import read_text


def check_synonym_table(synonyms, name):
    """The table as `{word: [synonyms]}`: own word and repeats out, empty rows out."""
    if not isinstance(synonyms, collections.abc.Mapping):
        raise TypeError(
            f"{name}: synonyms must be a dict word -> list of synonyms; "
            f"got {type(synonyms).__name__}.")
    table = {}
    for word, entries in synonyms.items():
        if not isinstance(word, str) or not word.strip():
            raise ValueError(f"{name}: a synonym table's word must be a non-empty str; "
                             f"got {word!r}.")
        if isinstance(entries, str) or not isinstance(entries, collections.abc.Iterable):
            raise ValueError(f"{name}: the synonyms of {word!r} must be a list of str; "
                             f"got {entries!r}.")
        kept = []
        for entry in entries:
            if not isinstance(entry, str) or not entry.strip():
                raise ValueError(f"{name}: a synonym of {word!r} is not a non-empty str: "
                                 f"{entry!r}.")
            if entry != word and entry not in kept:
                kept.append(entry)
        if kept:
            table[word] = kept
    return table


def read_synonym_table(path, encoding="utf-8-sig"):
    """Reads a synonym table: one `word<TAB>syn1 syn2 ...` per line.

    Layout: UTF-8 text; each line is a word, one tab, then its synonyms
    separated by spaces. Empty lines and lines starting with `#` are
    skipped; a word given on several lines gets the synonyms of all of them
    (in file order). A line without a tab, with an empty word or with no
    synonym raises `MalformedLineError` naming the file and line.

    Args:
        path: the file.
        encoding: defaults to UTF-8 (a byte-order mark is ignored).

    Returns:
        dict `word -> list of synonyms`, ready for `SynonymSubstitution`.

    Example:
    ```python
    import pathlib

    import kcse

    pathlib.Path("synonyms.txt").write_text(
        "# word<TAB>synonyms\\n喜欢\\t喜爱 爱\\nlarge\\tbig huge\\n", encoding="utf-8")
    kcse.data.read_synonym_table("synonyms.txt")
    # {'喜欢': ['喜爱', '爱'], 'large': ['big', 'huge']}
    pathlib.Path("bad.txt").write_text("喜欢 喜爱\\n", encoding="utf-8")
    try:
        kcse.data.read_synonym_table("bad.txt")
    except kcse.data.MalformedLineError as error:
        message = str(error)  # 'bad.txt:1: expected word<TAB>synonyms ...'
    ```
    """
    text = read_text(path, encoding)
    table = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if "\t" not in line:
            raise MalformedLineError(
                f"{path}:{number}: expected word<TAB>synonyms separated by spaces; "
                f"no tab in {line!r}.")
        word, _, rest = line.partition("\t")
        word = word.strip()
        entries = rest.split()
        if not word:
            raise MalformedLineError(f"{path}:{number}: the word before the tab is empty.")
        if not entries:
            raise MalformedLineError(f"{path}:{number}: {word!r} has no synonym after the tab.")
        if any(ch.isspace() for ch in word):
            raise MalformedLineError(
                f"{path}:{number}: the word {word!r} holds a space; one word per line.")
        table.setdefault(word, []).extend(entries)
    return table
