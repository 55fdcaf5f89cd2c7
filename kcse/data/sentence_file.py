"""A text file of training sentences, one a line (`--train-file`), as
princeton-nlp/SimCSE's unsupervised runs train on wiki1m_for_simcse.txt."""

import dataclasses
import os

from kcse.foundation.digests import content_digest


@dataclasses.dataclass
class SentenceFile:
    """The sentences of a text file, in file order, for unsupervised training.

    Attributes:
        source: the file read.
        lines: the sentences (duplicates kept, as SimCSE trains on every
            line), each a line as written without its line ending.
        blank_lines: 1-based numbers of the lines left out: empty or only
            whitespace.
        digest: `kcse.foundation.digests.content_digest` of `lines`: what a cached
            result trained on the file is keyed by (the same sentences in
            another file, or with other line endings or blank lines, give
            the same digest; any other change gives another).

    `sentences()` gives `lines`, as `SentencePairs.sentences()` gives both
    sides of pairs, so a `SentenceFile` can stand where a training split
    stands (`kcse.experiments.protocols.training_sentences`).

    Example:
    ```python
    import pathlib

    import kcse

    pathlib.Path("wiki.txt").write_text(
        "A man plays the guitar.\\n\\nThe cat sleeps.\\r\\nA man plays the guitar.\\n",
        encoding="utf-8")
    file = kcse.data.read_sentence_file("wiki.txt")
    file.sentences()  # ['A man plays the guitar.', 'The cat sleeps.', 'A man plays the guitar.']
    file.blank_lines  # [2]
    len(file.digest)  # 16
    ```
    """

    source: str
    lines: list
    blank_lines: list
    digest: str

    def sentences(self):
        return list(self.lines)

    def __len__(self):
        return len(self.lines)


def read_sentence_file(path):
    """Reads a text file of one training sentence a line (UTF-8).

    Lines are read as `text_lines` reads them; empty and whitespace-only
    lines are left out (their numbers are in `blank_lines`).

    Raises:
        OSError: the file cannot be read.
        ValueError: a line is not UTF-8 (`path:line: not UTF-8 text ...`),
            or the file holds no sentence.

    Example:
    ```python
    import pathlib

    from kcse.data import read_sentence_file

    pathlib.Path("sentences.txt").write_bytes(b"Hello.\\n\\xe9t\\xe9\\n")  # Latin-1 "été".
    try:
        read_sentence_file("sentences.txt")
    except ValueError as error:
        message = str(error)
    message  # 'sentences.txt:2: not UTF-8 text (invalid continuation byte at byte 0 of the line)'
    ```
    """
    path = os.fspath(path)
    lines, blank = [], []
    for number, line in text_lines(path):
        if line.strip():
            lines.append(line)
        else:
            blank.append(number)
    if not lines:
        raise ValueError(f"{path}: no sentence to train on (one a line; "
                         f"{len(blank)} blank line{'s' * (len(blank) != 1)})")
    return SentenceFile(path, lines, blank, content_digest(lines))


class NotUTF8Error(ValueError):
    """A line of a text file is not UTF-8; the message names file and line."""


def text_lines(path):
    """Yields `(line number, line)` of a UTF-8 text file, lazily.

    A line ends at a line feed (or CR LF) only (str.splitlines would also
    split inside a sentence at U+2028, U+0085, form feeds...) and is given
    without it; a byte-order mark at the start is dropped. A line that is
    not UTF-8 raises `NotUTF8Error` (`path:line: not UTF-8 text ...`).
    """
    with open(path, "rb") as file:
        for number, raw in enumerate(file, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as error:
                raise NotUTF8Error(f"{path}:{number}: not UTF-8 text ({error.reason} at "
                                   f"byte {error.start} of the line)") from None
            yield number, line.removesuffix("\n").removesuffix("\r")
