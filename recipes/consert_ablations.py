"""ConSERT's ablations: one setting swept, one table (or heatmap) each.

The grid of `recipes/consert.py` (its flags and defaults, rows last2avg;
`--help` lists them) run once per value of `--sweep`, into one results
folder, then
`ablation_<sweep>.md` with column c per value (and, for `views`, ConSERT's
Figure 5 as `ablation_views_<model>_<pooling>_<task>.png`):

- views: every pair of none, shuffle, token_cutoff, feature_cutoff, dropout
  (Figure 5; `--values` picks the views and their rates);
- temperature: 0.01, 0.05, 0.1, 0.2, 0.5 (Figure 7);
- batch-size: 16, 48, 96, 192, 288 (Table 4);
- sentences: 100, 1000, 10000 training sentences per task (few-shot);
- nli-max-square: the NLI head with and without max(r1, r2)² (the supervised
  modes, `--mode joint --nli FILE`).

    python recipes/consert_ablations.py --sweep views
    python recipes/consert_ablations.py --sweep temperature=0.05,0.1,0.2
    python recipes/consert_ablations.py --sweep views \\
        --values none,shuffle,feature_cutoff:0.2 --sentences 1000

A value's cells are kept in results.json like any recipe's, keyed by their
settings: a rerun skips them, and a longer sweep reuses the shorter one's.
`recipes/sweep.py --method consert` is this recipe; it sweeps the other
methods' settings too.
"""

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def main(argv=None):
    from kcse.experiments.sweeps import sweep_main

    return sweep_main(__doc__, REPO / "runs", argv, method="consert")


if __name__ == "__main__":
    main()
