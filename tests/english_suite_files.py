"""Tiny English STS suites on disk, in ../shared/data's layout, for the
tests of `kcse evaluate --suite english-sts` and the English recipes."""

from conftest import tiny_vocabulary


def random_pairs(rng, count, low=0.0):
    """`count` (s1, s2, score) of the tiny vocabulary's words, scores drawn
    in [low, 5]."""
    words = tiny_vocabulary()[5:]

    def sentence():
        return " ".join(rng.choice(words, size=rng.integers(2, 7)))

    return [(sentence(), sentence(), round(float(rng.uniform(low, 5.0)), 2))
            for _ in range(count)]


def write_english_suite(data, years, rng):
    """Writes under `data` each year's sub-corpora (`years`: {year: corpus
    names}, 12 pairs each, and a line without gold score that SentEval
    leaves out too), STS-B test (20 pairs) and SICK test (20). Returns
    `(sets, corpora_pairs)`: each set's pairs as read, and each (year,
    corpus)'s."""
    sets, corpora_pairs = {}, {}
    for year, corpora in years.items():
        (data / "sts_en" / year).mkdir(parents=True)
        sets[year] = []
        for corpus in corpora:
            pairs = random_pairs(rng, 12)
            sets[year] += pairs
            corpora_pairs[year, corpus] = pairs
            lines = [f"{score}\t{a}\t{b}" for a, b, score in pairs]
            lines.insert(3, "\tno gold score\tleft out")
            (data / "sts_en" / year / f"{corpus}.test.tsv").write_text(
                "\n".join(lines) + "\n", encoding="utf-8")
    sets["STS-B"] = random_pairs(rng, 20)
    write_stsb(data, "test", sets["STS-B"])
    sets["SICK-R"] = random_pairs(rng, 20, low=1.0)
    (data / "sts_en" / "SICK").mkdir()
    (data / "sts_en" / "SICK" / "SICK_test_annotated.txt").write_text(
        "pair_ID\tsentence_A\tsentence_B\trelatedness_score\tentailment_judgment\n"
        + "".join(f"{i}\t{a}\t{b}\t{score}\tNEUTRAL\n"
                  for i, (a, b, score) in enumerate(sets["SICK-R"])), encoding="utf-8")
    return sets, corpora_pairs


def write_stsb(data, split, pairs):
    """stsb_multi_mt/stsb-en-<split>.csv of `pairs`."""
    (data / "stsb_multi_mt").mkdir(exist_ok=True)
    (data / "stsb_multi_mt" / f"stsb-en-{split}.csv").write_text(
        "".join(f"{a},{b},{score}\n" for a, b, score in pairs), encoding="utf-8")
