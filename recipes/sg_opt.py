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
    from kcse.experiments.comparison import comparison_parser
    from kcse.experiments.comparison import run_comparison
    from kcse.experiments.methods import SGOptMethod

    parser = comparison_parser(__doc__, REPO / "runs" / "sg_opt", poolings=("P1",))
    group = parser.add_argument_group("SG-OPT")
    group.add_argument("--projection-dim", type=int, default=4096,
                       help="width of the projection head (4096)")
    group.add_argument("--regularization", type=float, default=0.1,
                       help="λ on Σ‖θ_T − θ_F‖² (0.1)")
    args = parser.parse_args(argv)
    return run_comparison(
        args,
        SGOptMethod(args.projection_dim, args.regularization),
        method_defaults={"temperature": 0.01, "batch_size": 16,
                         "learning_rate": 5e-5, "hidden_dropout": 0.1},
    )


if __name__ == "__main__":
    main()
