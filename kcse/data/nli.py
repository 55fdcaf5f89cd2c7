"""Natural language inference data: SNLI and its Chinese translation (CNSD).

Both ship as JSON lines with (at least) the fields `sentence1` (premise),
`sentence2` (hypothesis) and `gold_label` (`entailment`, `neutral`,
`contradiction`, or `-` where the annotators did not agree). Data cards:
`data_cards/snli.md`, `data_cards/nli_zh.md`.
"""

import collections
import dataclasses
import json
import os

import numpy as np

from kcse.data.sentence_pairs import collect_pairs
from kcse.data.sentence_pairs import read_text

NLI_LABELS = ("entailment", "neutral", "contradiction")
NO_GOLD_LABEL = "-"


@dataclasses.dataclass
class NLIPairs:
    """Premise–hypothesis pairs with integer labels, as read from one file.

    Attributes:
        sentences1: premises (`sentence1`).
        sentences2: hypotheses (`sentence2`).
        labels: int64 array, an index into `NLI_LABELS` (0 entailment,
            1 neutral, 2 contradiction; TFDS's ClassLabel order).
        source: the file read.
        skipped: 1-based line numbers not read: pairs without a gold label
            and malformed lines skipped with `on_error="skip"`.
        no_gold: the line numbers whose `gold_label` was `-` (SNLI: 785
            train, 158 dev, 176 test).

    Example:
    ```python
    import json
    import pathlib

    import kcse

    pathlib.Path("train.jsonl").write_text(
        json.dumps({"sentence1": "A man sleeps.", "sentence2": "A man runs.",
                    "gold_label": "contradiction"}) + "\\n")
    pairs = kcse.data.read_nli("train.jsonl")
    pairs.sentences2, pairs.label_names()  # (['A man runs.'], ['contradiction'])
    ```
    """

    sentences1: list
    sentences2: list
    labels: np.ndarray
    source: str = ""
    skipped: list = dataclasses.field(default_factory=list)
    no_gold: list = dataclasses.field(default_factory=list)

    def __len__(self):
        return len(self.labels)

    def label_names(self):
        """The label of every pair as a string."""
        return [NLI_LABELS[label] for label in self.labels]


@dataclasses.dataclass
class NLITriplets:
    """(anchor, entailment, contradiction) triplets for supervised SimCSE.

    Example:
    ```python
    import json
    import pathlib

    import kcse

    rows = [("A man sleeps.", "A person rests.", "entailment"),
            ("A man sleeps.", "A man runs.", "contradiction"),
            ("A dog barks.", "An animal is loud.", "entailment")]
    pathlib.Path("train.jsonl").write_text("".join(
        json.dumps({"sentence1": a, "sentence2": b, "gold_label": g}) + "\\n"
        for a, b, g in rows))
    triplets = kcse.data.nli_triplets("train.jsonl")
    len(triplets)  # 1 (the dog has no contradiction)
    for anchor, positive, negative in triplets:
        print(anchor, positive, negative)  # A man sleeps. A person rests. A man runs.
    ```
    """

    anchors: list
    entailments: list
    contradictions: list

    def __len__(self):
        return len(self.anchors)

    def __iter__(self):
        return iter(zip(self.anchors, self.entailments, self.contradictions))


def read_nli(path, on_error="raise", encoding="utf-8-sig"):
    """Reads an SNLI / CNSD JSON-lines file.

    Lines whose `gold_label` is `-` (no annotator majority) carry no label:
    they are left out and counted in `no_gold` (and `skipped`). Blank lines
    are ignored. A line that is not a JSON object, lacks a field, has a
    non-string sentence or an unknown label raises `MalformedLineError`
    naming the file and line; with `on_error="skip"` it is left out instead
    and a warning gives the count and the first line numbers.

    Returns:
        `NLIPairs`.

    Example:
    ```python
    import json
    import pathlib

    import kcse

    rows = [("A man sleeps.", "A person rests.", "entailment"),
            ("A man sleeps.", "A man runs.", "contradiction"),
            ("A man sleeps.", "A man dreams.", "-")]
    pathlib.Path("dev.jsonl").write_text("".join(
        json.dumps({"sentence1": a, "sentence2": b, "gold_label": g}) + "\\n"
        for a, b, g in rows))
    pairs = kcse.data.read_nli("dev.jsonl")
    len(pairs), pairs.labels.tolist(), pairs.no_gold  # (2, [0, 2], [3])
    ```
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip'; got {on_error!r}.")
    path = os.fspath(path)
    text = read_text(path, encoding)
    records = (
        (number, line)
        for number, line in enumerate(text.split("\n"), start=1)
        if line.strip()
    )
    premises, hypotheses, labels, skipped, no_gold = collect_pairs(
        path, records, _parse_line, on_error
    )
    return NLIPairs(
        premises,
        hypotheses,
        np.asarray(labels, dtype="int64"),
        source=path,
        skipped=skipped,
        no_gold=no_gold,
    )


def _parse_line(line):
    """(premise, hypothesis, label index or None) of one line; ValueError."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON ({error.msg} at column {error.colno}).")
    if not isinstance(record, dict):
        raise ValueError(f"expected a JSON object; got {type(record).__name__}.")
    for field in ("sentence1", "sentence2", "gold_label"):
        if field not in record:
            raise ValueError(f"missing field {field!r}.")
        if not isinstance(record[field], str):
            raise ValueError(
                f"field {field!r} should be a string; got {record[field]!r}."
            )
    gold = record["gold_label"].strip().lower()
    if gold == NO_GOLD_LABEL:
        return record["sentence1"], record["sentence2"], None
    if gold not in NLI_LABELS:
        raise ValueError(
            f"gold_label {record['gold_label']!r} is not one of "
            f"{', '.join(NLI_LABELS)} or {NO_GOLD_LABEL!r}."
        )
    return record["sentence1"], record["sentence2"], NLI_LABELS.index(gold)


def nli_triplets(pairs, on_error="raise"):
    """(anchor, entailment, contradiction) triplets, one per entailment pair.

    The supervised data of princeton-nlp/SimCSE: each premise with an
    entailed hypothesis (positive) and a contradicted one (hard negative).
    An entailment pair becomes a triplet when its premise has at least one
    contradiction hypothesis in the file; the others are dropped (the
    authors' 314k entailment pairs gave 275,601 triplets this way: their
    issue #238). When a premise has several entailments and contradictions,
    the i-th entailment takes the (i mod n)-th of its n contradictions, in
    file order. Neutral pairs are not used. Premises are grouped by their
    exact text.

    Args:
        pairs: `NLIPairs`, or a path given to `read_nli` (with `on_error`).

    Returns:
        `NLITriplets`, in the order of the entailment pairs.

    Example:
    ```python
    import numpy as np

    import kcse

    pairs = kcse.data.NLIPairs(
        ["P", "P", "P", "Q"], ["p+", "p-", "p~", "q+"], np.array([0, 2, 1, 0]))
    list(kcse.data.nli_triplets(pairs))  # [('P', 'p+', 'p-')]
    ```
    """
    if not isinstance(pairs, NLIPairs):
        pairs = read_nli(pairs, on_error=on_error)
    entailment = NLI_LABELS.index("entailment")
    contradiction = NLI_LABELS.index("contradiction")
    contradictions = collections.defaultdict(list)
    for premise, hypothesis, label in zip(pairs.sentences1, pairs.sentences2, pairs.labels):
        if label == contradiction:
            contradictions[premise].append(hypothesis)
    triplets = NLITriplets([], [], [])
    seen = collections.Counter()
    for premise, hypothesis, label in zip(pairs.sentences1, pairs.sentences2, pairs.labels):
        if label != entailment or not contradictions[premise]:
            continue
        negatives = contradictions[premise]
        triplets.anchors.append(premise)
        triplets.entailments.append(hypothesis)
        triplets.contradictions.append(negatives[seen[premise] % len(negatives)])
        seen[premise] += 1
    return triplets
