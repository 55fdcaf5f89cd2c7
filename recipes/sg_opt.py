"""The Chinese comparison with SG-OPT in column c: raw / whitening / SG-OPT.

The grid, data, protocols and results of `recipes/chinese_simcse.py`
(`--help` lists them), with column c trained by SG-OPT (Kim et al., 2021):
a frozen copy's mean-pooled layer states are the pivots of the trained
encoder's sentence vector, through a shared projection head, τ on NT-Xent,
λ on Σ‖θ_T − θ_F‖². Every default is SG-OPT's (the method registry's paper
settings, `kcse.experiments.methods.sg_opt.PAPER_SETTINGS`, listed with their
sources at the end of this help), the row [CLS] (P1) included.

    python recipes/sg_opt.py
    python recipes/sg_opt.py --projection-dim 1024 --poolings P1,P3
"""

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def main(argv=None):
    from kcse.experiments.recipe_runs import recipe_main

    return recipe_main(
        "sg_opt", __doc__, REPO / "runs" / "sg_opt", argv
    )


if __name__ == "__main__":
    main()
