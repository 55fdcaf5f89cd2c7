"""The English STS table of the SimCSE and ConSERT papers (`kcse evaluate --suite english-sts`).

Seven columns and their average, Spearman ×100 of cosine similarity, as
princeton-nlp/SimCSE's `evaluation.py --task_set sts --mode test` prints
them through SentEval:

- STS12 … STS16: every sub-corpus of the year pooled into one set and one
  Spearman over all its pairs, "all" (princeton's SentEval,
  `results[task]['all']['spearman']['all']`); beside it, SentEval's own
  aggregates of the per-sub-corpus Spearman: "mean" and "wmean", the mean
  weighted by each sub-corpus's pairs (`STSEval.run`'s `np.average(list_spr,
  weights=nsamples)`);
- STS-B: the test split (SentEval's `STSBenchmarkEval` reads `sts-test.csv`,
  the 1,379 pairs that stsb-multi-mt's `stsb-en-test.csv` holds);
- SICK-R: `SICK_test_annotated.txt` (4,927 pairs);
- Avg.: the mean of the seven.

Sentences are fed as SentEval's batcher does: split at whitespace and
joined with single spaces (`' '.join(s.split())`). The data are read by
`kcse.data.read_english_sts`, from brmson/dataset-sts's layout or
SentEval's own, every sub-corpus present: brmson/dataset-sts lacks STS12
MSRvid and STS13 SMT (SentEval's STS13 lacks SMT too), so from it STS12
pools 4 sub-corpora where SentEval pools 5; `files` in the results says
which were read.
"""

import numpy as np

from kcse.data.english import ENGLISH_STS
from kcse.data.english import STS_YEARS
from kcse.data.english import read_english_sts
from kcse.data.sentence_pairs import SentencePairs

SUITE = "english-sts"
AVERAGE = "Avg."


def senteval_sentence(sentence):
    """A sentence as SentEval's batcher gives it to the encoder: its
    whitespace-separated words joined by single spaces."""
    return " ".join(sentence.split())


def read_english_suite(data_dir):
    """`{name: pairs}` of the seven test sets of `ENGLISH_STS` under
    `data_dir` (laid out like `../shared/data`), in the papers' order.

    Raises what `read_english_sts` raises: FileNotFoundError naming the
    paths tried, ValueError for a malformed line (file and line).
    """
    return {name: read_english_sts(data_dir, name) for name in ENGLISH_STS}


def suite_pairs(pairs):
    """`pairs` with SentEval's whitespace (`senteval_sentence`) on both sides."""
    return SentencePairs([senteval_sentence(s) for s in pairs.sentences1],
                         [senteval_sentence(s) for s in pairs.sentences2],
                         pairs.scores, source=pairs.source)


def evaluate_english_suite(encoder, sets, prefix="", batch_size=64):
    """Scores `encoder` on `sets` (`read_english_suite`'s dict).

    Returns `{"sets": {name: {"spearman", "pearson", "n", "files"}},
    "average": mean Spearman, "average_wmean": the same with each year's
    wmean}`; a pooled year (STS12–16) adds `"parts"` (each sub-corpus's
    `{"spearman", "pearson", "n"}`), `"mean"` and `"wmean"` of their
    Spearman. `files` lists the sub-corpora pooled or the file read.
    `prefix` is prepended to every sentence (e5's `"query: "`). Raises
    `UndefinedCorrelationError` for an encoder whose cosines are all equal
    on a set or sub-corpus (named).
    """
    from kcse.evaluation.sts import pair_cosines
    from kcse.evaluation.sts import scored_cosines

    scores = {}
    for name, pairs in sets.items():
        normalised = suite_pairs(pairs)
        cosines = pair_cosines(encoder, SentencePairs(
            [prefix + s for s in normalised.sentences1],
            [prefix + s for s in normalised.sentences2], normalised.scores), batch_size)
        result = scored_cosines(normalised.scores, cosines)
        parts = getattr(pairs, "parts", None)
        if parts:
            result |= sub_corpus_scores(name, parts, cosines)
        scores[name] = result | {"files": list(parts) if parts else [str(pairs.source)]}
    return {"sets": scores,
            "average": float(np.mean([result["spearman"] for result in scores.values()])),
            "average_wmean": float(np.mean([result.get("wmean", result["spearman"])
                                            for result in scores.values()]))}


def sub_corpus_scores(name, parts, cosines):
    """`{"parts", "mean", "wmean"}` of a pooled year whose `cosines` follow
    its `parts` in order, as SentEval's `STSEval.run` aggregates them."""
    from kcse.evaluation.sts import scored_cosines

    results, start = {}, 0
    for part, pairs in parts.items():
        stop = start + len(pairs)
        try:
            results[part] = scored_cosines(pairs.scores, cosines[start:stop])
        except ValueError as error:
            raise type(error)(f"{name} {part}: {error}") from None
        start = stop
    spearman = [result["spearman"] for result in results.values()]
    return {"parts": results, "mean": float(np.mean(spearman)),
            "wmean": float(np.average(spearman, weights=[r["n"] for r in results.values()]))}


def suite_markdown(model, results):
    """The papers' table in markdown: a header row, `model`'s rows of
    Spearman ×100 with 2 decimals, "all" (each year pooled) then "wmean"
    (SentEval's weighted mean of the years' sub-corpora), a row of pair
    counts, then a paragraph saying how each column was computed and which
    sub-corpora were pooled."""
    from kcse.experiments.results.tables import _markdown_table

    sets = results["sets"]
    rows = [["model", "aggregate", *sets, AVERAGE],
            [model, "all", *(f"{result['spearman']:.2f}" for result in sets.values()),
             f"{results['average']:.2f}"],
            [model, "wmean", *(f"{result.get('wmean', result['spearman']):.2f}"
                               for result in sets.values()),
             f"{results['average_wmean']:.2f}"],
            ["pairs", "", *(str(result["n"]) for result in sets.values()), ""]]
    pooled = "; ".join(f"{name} {', '.join(result['files'])}"
                       for name, result in sets.items() if name in STS_YEARS)
    note = ("Spearman ×100 of cosine similarity. STS12–STS16, \"all\": each year's "
            "sub-corpora pooled into one set, one Spearman (as princeton-nlp/SimCSE "
            "reports); \"wmean\": SentEval's mean of the sub-corpora's Spearman weighted "
            "by their pairs (results.json also has the unweighted \"mean\" and each "
            "sub-corpus); STS-B and SICK-R: their test sets, one Spearman in both rows; "
            "sentences whitespace-normalised as SentEval's batcher does. "
            f"Pooled: {pooled}.")
    return "\n".join(_markdown_table(rows)) + "\n\n" + note + "\n"
