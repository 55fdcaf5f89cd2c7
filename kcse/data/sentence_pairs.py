"""Readers for labelled sentence-pair files (STS and Chinese similarity tasks)."""

import csv
import dataclasses
import errno
import io
import os
import warnings

import numpy as np

FORMATS = ("senteval_cn", "stsb_csv", "sts_tsv", "sick")
SICK_HEADER = "pair_ID\tsentence_A\tsentence_B\trelatedness_score"


class MalformedLineError(ValueError):
    """A line of a pair file that cannot be read; names file and line.

    Example:
    ```python
    import pathlib

    import kcse

    pathlib.Path("pairs.data").write_text(
        "一个女孩在梳头。\\t一个女孩在做发型。\\t4\\n只有一个句子\\n", encoding="utf-8")
    try:
        kcse.data.read_pairs("pairs.data")  # on_error="raise", the default
    except kcse.data.MalformedLineError as error:
        message = str(error)
    message  # 'pairs.data:2: expected 3 tab-separated fields (s1, s2, label); got 1.'

    pairs = kcse.data.read_pairs("pairs.data", on_error="skip")  # warns: skipped 1 malformed line
    len(pairs), pairs.skipped  # (1, [2])
    ```
    """


@dataclasses.dataclass
class SentencePairs:
    """Sentence pairs with gold scores, as read from one file.

    Attributes:
        sentences1, sentences2: lists of str, the two sides.
        scores: float64 numpy array of gold labels/scores.
        source: the file they were read from.
        skipped: line numbers (1-based) that were not read: malformed lines
            skipped with `on_error="skip"`, and STS pairs without a gold
            score (which have no label and are always left out).

    Example:
    ```python
    import numpy as np

    import kcse

    pairs = kcse.data.SentencePairs(
        ["A cat sits.", "A dog runs."], ["A cat is sitting.", "A man sings."],
        np.array([4.5, 0.2]))
    len(pairs)  # 2
    pairs.sentences()  # ['A cat sits.', 'A cat is sitting.', 'A dog runs.', 'A man sings.']
    ```
    """

    sentences1: list
    sentences2: list
    scores: np.ndarray
    source: str = ""
    skipped: list = dataclasses.field(default_factory=list)

    def __len__(self):
        return len(self.scores)

    def sentences(self):
        """Both sides, in file order: s1 and s2 of the first pair, then ..."""
        return [s for pair in zip(self.sentences1, self.sentences2) for s in pair]


def detect_format(path, first_line):
    """Guesses the layout of a pair file from its name and first line.

    The name decides where it says: `.csv` is stsb-multi-mt's, `.data` Su's
    (senteval_cn), `.tsv` SemEval STS's; so a first line misread is blamed
    on itself in the layout the file has, not on a later line in another.
    """
    if first_line.startswith("pair_ID"):  # SICK's header, misread or not: line 1 says.
        return "sick"
    if path.endswith(".csv"):
        return "stsb_csv"
    if path.endswith(".data"):
        return "senteval_cn"
    if path.endswith(".tsv"):
        return "sts_tsv"
    fields = first_line.rstrip("\r\n").split("\t")
    first_is_score = not fields[0].strip() or _is_number(fields[0])
    if len(fields) == 3 and first_is_score and not _is_number(fields[2]):
        return "sts_tsv"
    return "senteval_cn"


def read_pairs(path, format="auto", on_error="raise", encoding="utf-8-sig"):
    """Reads labelled sentence pairs from `path`.

    Layouts (`format`):
    - `"senteval_cn"`: `s1<TAB>s2<TAB>label`, the layout of Su Jianlin's
      Chinese tasks (`<TASK>/<TASK>.{train,valid,test}.data`).
    - `"stsb_csv"`: CSV without header, `sentence1,sentence2,score`
      (stsb-multi-mt).
    - `"sts_tsv"`: `score<TAB>s1<TAB>s2` (SemEval STS12–16). Pairs with an
      empty score have no gold label and are left out (as SentEval does);
      their line numbers are in `skipped`.
    - `"sick"`: SICK's TSV with its header; the relatedness score is used.
    - `"auto"` (default): chosen from SICK's header, else the extension
      (`.csv`, `.data`, `.tsv`), else the first non-blank line.

    Text is read as UTF-8 (a leading byte-order mark is dropped).

    A file that cannot be read raises an `OSError` naming `path`:
    `FileNotFoundError` (missing), `IsADirectoryError` ("is a folder, not a
    file"), `NotADirectoryError` (a parent of `path` is a file),
    `PermissionError`; a `path` that is not a str or path `TypeError`.

    A malformed line (wrong number of fields, a label that is not a number)
    raises `MalformedLineError` naming the file and line; with
    `on_error="skip"` it is skipped instead, and a warning gives the count
    and the first line numbers.

    Returns:
        A `SentencePairs`.

    Example:
    ```python
    import pathlib

    import kcse

    pairs = kcse.data.read_pairs(kcse.data.BUNDLED_CHINESE_STS / "STS-B" / "STS-B.test.data")
    len(pairs), pairs.sentences1[0], float(pairs.scores[0])  # (1361, '一个女孩在给她的头发做发型。', 2.0)

    # SemEval STS TSV (`score<TAB>s1<TAB>s2`), detected from the first line.
    pathlib.Path("MSRpar.test.tsv").write_text(
        "4.5\\tA cat sits.\\tA cat is sitting.\\n\\tNo gold score.\\tLeft out.\\n",
        encoding="utf-8")
    pairs = kcse.data.read_pairs("MSRpar.test.tsv")
    pairs.scores.tolist(), pairs.skipped  # ([4.5], [2])
    ```
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip'; got {on_error!r}.")
    if format != "auto" and format not in FORMATS:
        raise ValueError(f"format must be 'auto' or one of {FORMATS}; got {format!r}.")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(
            f"path must be a str or os.PathLike; got {type(path).__name__}."
        )
    path = os.fspath(path)
    text = read_text(path, encoding)
    # Only "\n" ends a line ("\r\n" too): str.splitlines would also break
    # sentences at characters such as U+2028 or \x85.
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    if format == "auto":
        format = detect_format(path, next((l for l in lines if l.strip()), ""))
    sentences1, sentences2, scores, skipped, _ = collect_pairs(
        path,
        _records(text, lines, format, path),
        lambda fields: _pair_from_fields(fields, format),
        on_error,
    )
    return SentencePairs(
        sentences1,
        sentences2,
        np.asarray(scores, dtype="float64"),
        source=path,
        skipped=skipped,
    )


def read_text(path, encoding):
    """The whole text of `path`; every error names the file.

    A folder raises `IsADirectoryError` ("is a folder, not a file"), a file
    that may not be read `PermissionError`, a missing one
    `FileNotFoundError`, a path through a file `NotADirectoryError`,
    undecodable text `MalformedLineError`.
    """
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, "Is a folder, not a file", path)
    try:
        file = open(path, "rb")
    except PermissionError as error:
        raise PermissionError(
            errno.EACCES, "Permission denied: this user may not read the file", path
        ) from error
    except NotADirectoryError as error:
        raise NotADirectoryError(
            errno.ENOTDIR, "Not a directory: a parent of this path is a file", path
        ) from error
    with file:
        data = file.read()
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1)
        raise MalformedLineError(
            f"{path}:{line}: not valid {encoding} text ({error.reason} at byte "
            f"{column} of the line)."
        ) from error


def collect_pairs(path, records, parse, on_error):
    """Parses numbered records into pairs, handling bad lines.

    `records` yields `(line_number, record)`; `parse(record)` returns
    `(s1, s2, value)`, with value None for a pair without a gold label, or
    raises ValueError. A bad record raises `MalformedLineError` naming
    `path` and the line, or with `on_error="skip"` is skipped and counted in
    one warning.

    Returns:
        `(sentences1, sentences2, values, skipped, unlabelled)`: skipped
        holds the line numbers of bad and unlabelled records, unlabelled
        those without a gold label.
    """
    sentences1, sentences2, values = [], [], []
    skipped, unlabelled, malformed = [], [], []
    for line_number, record in records:
        try:
            s1, s2, value = parse(record)
        except ValueError as error:
            if on_error == "raise":
                raise MalformedLineError(f"{path}:{line_number}: {error}") from None
            malformed.append(line_number)
            skipped.append(line_number)
            continue
        if value is None:
            unlabelled.append(line_number)
            skipped.append(line_number)
            continue
        sentences1.append(s1)
        sentences2.append(s2)
        values.append(value)
    if malformed:
        warnings.warn(
            f"{path}: skipped {len(malformed)} malformed line(s), first at "
            f"line(s) {malformed[:5]}.",
            stacklevel=3,
        )
    return sentences1, sentences2, values, skipped, unlabelled


def _records(text, lines, format, path):
    """Yields (line number, fields) for each data line of the file."""
    if format == "stsb_csv":
        # A record is named by the line it starts on: a quoted field may
        # run over several lines (an unclosed quote, to the end of the file).
        reader = csv.reader(io.StringIO(text))
        start = 1
        try:
            for fields in reader:
                if fields:
                    yield start, (fields if reader.line_num == start
                                  else _SpanningRecord(fields, reader.line_num))
                start = reader.line_num + 1
        except csv.Error as error:
            raise MalformedLineError(f"{path}:{start}: {error}") from error
        return
    start = 0
    if format == "sick":
        if not lines or not lines[0].startswith(SICK_HEADER):
            raise MalformedLineError(
                f"{path}:1: expected SICK's header starting with "
                f"{SICK_HEADER!r}."
            )
        start = 1
    for index in range(start, len(lines)):
        if lines[index].strip():
            yield index + 1, lines[index].split("\t")


class _SpanningRecord(list):
    """The fields of a CSV record over several lines; `last_line` its end."""

    def __init__(self, fields, last_line):
        super().__init__(fields)
        self.last_line = last_line


def _pair_from_fields(fields, format):
    """(s1, s2, score or None) from one record's fields; ValueError if bad."""
    if format == "sick":
        if len(fields) < 4:
            raise ValueError(
                f"expected at least 4 tab-separated fields (pair_ID, "
                f"sentence_A, sentence_B, relatedness_score); got {len(fields)}."
            )
        return fields[1], fields[2], score_value(fields[3], "relatedness_score")
    if len(fields) != 3:
        layout = {
            "senteval_cn": "tab-separated fields (s1, s2, label)",
            "stsb_csv": "comma-separated fields (sentence1, sentence2, score)",
            "sts_tsv": "tab-separated fields (score, s1, s2)",
        }[format]
        spans = (f" (a quoted field runs from this line to line {fields.last_line})"
                 if isinstance(fields, _SpanningRecord) else "")
        raise ValueError(f"expected 3 {layout}; got {len(fields)}{spans}.")
    if format == "sts_tsv":
        if not fields[0].strip():
            return fields[1], fields[2], None
        return fields[1], fields[2], score_value(fields[0], "score")
    field = "score" if format == "stsb_csv" else "label"
    return fields[0], fields[1], score_value(fields[2], field)


def score_value(value, field):
    """`value` as a finite float; ValueError naming `field` otherwise."""
    if not _is_number(value):
        raise ValueError(f"{field} {value!r} is not a number.")
    return float(value)


def _is_number(value):
    try:
        return np.isfinite(float(value))
    except ValueError:
        return False
