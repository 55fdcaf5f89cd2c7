"""English STS as SentEval's own download script lays it out.

facebookresearch/SentEval `data/downstream/get_transfer_data.bash` unpacks
each SemEval year into `STS/<year>-en-test/` with, per sub-corpus, the
sentence pairs in `STS.input.<corpus>.txt` (`s1<TAB>s2` a line) and their
gold scores, line for line, in `STS.gs.<corpus>.txt` (an empty line: no
gold, which `senteval/sts.py` leaves out); STS16's `STS2016.*` files are
renamed to that pattern. STS-B is `STS/STSBenchmark/sts-<split>.csv`
(tab-separated, score in field 5, sentences in 6 and 7: `STSBenchmarkEval`)
and SICK `SICK/SICK_<split>.txt`. SentEval reads them from its
`data/downstream` folder.

Example:
```python
import pathlib

from kcse.data.senteval_sts import read_senteval_year

folder = pathlib.Path("STS/STS13-en-test")
folder.mkdir(parents=True)
(folder / "STS.input.FNWN.txt").write_text("a man plays .\\ta man is playing .\\n")
(folder / "STS.gs.FNWN.txt").write_text("3.8\\n")
[(name, pairs)] = read_senteval_year(folder)
name, pairs.sentences2, pairs.scores.tolist()  # ('FNWN', ['a man is playing .'], [3.8])
```
"""

import pathlib

import numpy as np

from kcse.data.sentence_pairs import MalformedLineError
from kcse.data.sentence_pairs import SentencePairs
from kcse.data.sentence_pairs import collect_pairs
from kcse.data.sentence_pairs import read_text
from kcse.data.sentence_pairs import score_value

# Where SentEval's `STS/` folder may sit under a data_dir: the data_dir
# itself, SentEval's `data/downstream`, or SentEval's `data` folder.
SENTEVAL_PARENTS = ("", "downstream", "data/downstream")
INPUT_PREFIX, GOLD_PREFIX, SUFFIX = "STS.input.", "STS.gs.", ".txt"


def senteval_year_folders(data_dir, year):
    """The folders where SentEval's layout keeps `year` ("STS12"...)."""
    data_dir = pathlib.Path(data_dir)
    return [data_dir / parent / "STS" / f"{year}-en-test" for parent in SENTEVAL_PARENTS]


def senteval_candidates(relative):
    """`relative` (e.g. "SICK/SICK_test_annotated.txt") under each of
    `SENTEVAL_PARENTS`, for `_paths.find_file`."""
    return [str(pathlib.PurePosixPath(parent) / relative) for parent in SENTEVAL_PARENTS]


def read_senteval_year(folder, on_error="raise"):
    """`[(sub-corpus, SentencePairs)]` of every `STS.input.<corpus>.txt` in
    `folder` with its `STS.gs.<corpus>.txt`, in name order.

    Raises:
        FileNotFoundError: an input file without its gold file (both named).
        MalformedLineError: a line that is not two tab-separated sentences,
            a gold score that is not a number (file and line), or files of
            different lengths; with `on_error="skip"` bad lines are left out
            and counted in one warning.
    """
    folder = pathlib.Path(folder)
    parts = []
    for inputs in sorted(folder.glob(f"{INPUT_PREFIX}*{SUFFIX}")):
        name = inputs.name[len(INPUT_PREFIX):-len(SUFFIX)]
        gold = folder / f"{GOLD_PREFIX}{name}{SUFFIX}"
        if not gold.is_file():
            raise FileNotFoundError(
                f"{inputs}: its gold scores are missing: no {gold.name} beside it "
                "(SentEval's layout pairs them line for line)")
        parts.append((name, read_senteval_pair_files(inputs, gold, on_error)))
    return parts


def read_senteval_pair_files(inputs, gold, on_error="raise"):
    """The pairs of one SentEval input file and its gold file."""
    lines = read_text(inputs, "utf-8-sig").splitlines()
    scores = read_text(gold, "utf-8-sig").splitlines()
    if len(lines) != len(scores):
        raise MalformedLineError(
            f"{inputs}: {len(lines)} lines, but {gold}: {len(scores)}; SentEval pairs "
            "them line for line")

    def parse(record):
        fields, score = record
        if len(fields) != 2:
            raise ValueError(f"expected 2 tab-separated sentences (s1, s2); got {len(fields)}.")
        if not score.strip():
            return fields[0], fields[1], None  # No gold: SentEval leaves it out.
        return fields[0], fields[1], score_value(score, f"gold score in {gold.name}")

    records = ((number, (line.split("\t"), score))
               for number, (line, score) in enumerate(zip(lines, scores), start=1))
    sentences1, sentences2, values, skipped, _ = collect_pairs(inputs, records, parse,
                                                               on_error)
    return SentencePairs(sentences1, sentences2, np.asarray(values, "float64"),
                         source=str(inputs), skipped=skipped)


def read_stsbenchmark_file(path, on_error="raise"):
    """SentEval's `STSBenchmark/sts-<split>.csv`: tab-separated, the score
    in field 5 and the sentences in fields 6 and 7 (`STSBenchmarkEval.
    loadFile`; some lines carry more fields after them)."""
    lines = read_text(path, "utf-8-sig").splitlines()

    def parse(fields):
        if len(fields) < 7:
            raise ValueError(f"expected at least 7 tab-separated fields (genre, file, year, "
                             f"id, score, s1, s2); got {len(fields)}.")
        return fields[5], fields[6], score_value(fields[4], "score")

    records = ((number, line.strip().split("\t"))
               for number, line in enumerate(lines, start=1) if line.strip())
    sentences1, sentences2, values, skipped, _ = collect_pairs(path, records, parse, on_error)
    return SentencePairs(sentences1, sentences2, np.asarray(values, "float64"),
                         source=str(path), skipped=skipped)

