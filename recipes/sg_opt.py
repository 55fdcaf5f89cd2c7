"""The Chinese comparison with SG-OPT in column c: raw / whitening / SG-OPT.

The grid, data, protocols and results of `recipes/chinese_simcse.py`
(`--help` lists them), with column c trained by SG-OPT (Kim et al., 2021):
a frozen copy's mean-pooled layer states are the pivots of the trained
encoder's sentence vector, through a shared projection head, temperature
0.01, λ = 0.1 on Σ‖θ_T − θ_F‖². SG-OPT's batch 16, lr 5e-5 and BERT's hidden
dropout 0.1 are the defaults here; SG-OPT pools [CLS] (P1), the default pooling.

    python recipes/sg_opt.py
    python recipes/sg_opt.py --projection-dim 1024 --poolings P1,P3
"""

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def main(argv=None):
    from kcse.experiments.command_line import recipe_main

    return recipe_main(
        "sg_opt", __doc__, REPO / "runs" / "sg_opt", argv
    )


if __name__ == "__main__":
    main()
