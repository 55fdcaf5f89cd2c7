"""Checking that gold labels lie on their dataset's scale."""

import os
import warnings

import numpy as np

from kcse.data import MalformedLineError
from kcse.data import sentence_pairs as _sentence_pairs


class LabelScaleError(MalformedLineError):
    """A label outside its dataset's scale; names file, line and value.

    Example:
    ```python
    import pathlib

    import kcse

    pathlib.Path("ATEC").mkdir()
    pathlib.Path("ATEC/ATEC.test.data").write_text(
        "花呗怎么还款\\t借呗怎么还款\\t0\\n花呗冻结以后还能开通吗\\t花呗冻结了怎么开通\\t3\\n",
        encoding="utf-8")
    try:
        kcse.data.read_chinese_task(".", "ATEC", "test")
    except kcse.data.LabelScaleError as error:  # a MalformedLineError
        message = str(error)
    message  # 'ATEC/ATEC.test.data:2: label 3 is outside the ATEC scale (0 or 1).'
    len(kcse.data.read_chinese_task(".", "ATEC", "test", on_error="skip"))  # 1 (and a warning)
    ```
    """


def check_scale(pairs, low, high, *, binary, what, on_error, format, stacklevel=3):
    """Raises for (or drops, with `on_error="skip"`) labels off the scale.

    Binary scales accept exactly `low` or `high`; others `low <= x <= high`.
    Dropped pairs' line numbers are added to `pairs.skipped` and a warning
    gives their count. Returns `pairs` (changed in place when dropping).
    """
    scores = pairs.scores
    if binary:
        ok = (scores == low) | (scores == high)
        scale = f"{low:g} or {high:g}"
    else:
        ok = (scores >= low) & (scores <= high)
        scale = f"{low:g}..{high:g}"
    bad = np.flatnonzero(~ok)
    if not bad.size:
        return pairs
    lines = pair_line_numbers(pairs, format)
    if on_error == "raise":
        index = bad[0]
        more = f"; {bad.size} such lines in the file" if bad.size > 1 else ""
        raise LabelScaleError(
            f"{pairs.source}:{lines[index]}: label {scores[index]:g} is outside "
            f"the {what} scale ({scale}){more}."
        )
    bad_lines = [lines[i] for i in bad]
    pairs.sentences1 = [s for s, keep in zip(pairs.sentences1, ok) if keep]
    pairs.sentences2 = [s for s, keep in zip(pairs.sentences2, ok) if keep]
    pairs.scores = scores[ok]
    if getattr(pairs, "line_numbers", None) is not None:
        pairs.line_numbers = [n for n, keep in zip(pairs.line_numbers, ok) if keep]
    pairs.skipped = sorted(pairs.skipped + bad_lines)
    warnings.warn(
        f"{pairs.source}: skipped {len(bad_lines)} line(s) with a label outside "
        f"the {what} scale ({scale}), first at line(s) {bad_lines[:5]}.",
        stacklevel=stacklevel,
    )
    return pairs


def pair_line_numbers(pairs, format, encoding="utf-8-sig"):
    """1-based line number (CSV: the line its record starts on) of each pair, in order.

    Uses `pairs.line_numbers` when the reader recorded them; otherwise walks
    the same records `kcse.data.read_pairs` read, minus the skipped ones.
    """
    known = getattr(pairs, "line_numbers", None)
    if known is not None:
        return list(known)
    path = os.fspath(pairs.source)
    with open(path, encoding=encoding, newline="") as file:
        text = file.read()
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    skipped = set(pairs.skipped)
    numbers = [
        number
        for number, _ in _sentence_pairs._records(text, lines, format, path)
        if number not in skipped
    ]
    if len(numbers) != len(pairs):
        raise AssertionError(
            f"{path}: found {len(numbers)} records for {len(pairs)} pairs."
        )
    return numbers
