"""The Chinese comparison with Contrastive Tension in column c: raw / whitening / CT.

The grid, data, protocols and results of `recipes/chinese_simcse.py`
(`--help` lists them), with column c trained by Contrastive Tension
(Carlsson et al., ICLR 2021; BERT-CT in ConSERT's comparison): two copies
of the model read sentence pairs, one positive (the same sentence) and K
negatives (two sentences) per group, and learn by the logistic loss of the
dot product of their mean-pooled vectors whether they read the same
sentence. Every default is the authors', from
FreddeFrallan/Contrastive-Tension (the method registry's paper settings,
`kcse.experiments.methods.contrastive_tension.PAPER_SETTINGS`, listed with
their sources at the end of this help: K, batch, RMSprop's steps, length,
the row P3, their mean pooling). They train 10 × 500 steps; here the
protocol's sentences make the epoch (one pair per sentence; `--sentences`,
`--epochs`).

    python recipes/contrastive_tension.py
    python recipes/contrastive_tension.py --poolings P3 --sentences 10000 --epochs 10
"""

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def main(argv=None):
    from kcse.experiments.recipe_runs import recipe_main

    return recipe_main(
        "ct", __doc__, REPO / "runs" / "contrastive_tension", argv
    )


if __name__ == "__main__":
    main()
