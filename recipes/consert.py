"""The Chinese comparison with ConSERT in column c: raw / whitening / ConSERT.

The grid, data, protocols and results of `recipes/chinese_simcse.py`
(`--help` lists them), with column c trained by ConSERT (Yan et al., 2021):
two embedding-level views per sentence (default: token shuffle and feature
cutoff 0.2), NT-Xent at temperature 0.1, ConSERT's batch 96, hidden dropout
0.1 (BERT's). ConSERT's learning rate for BERT-base is 5e-7; the default
here is the protocol's (1e-5).

    python recipes/consert.py
    python recipes/consert.py --views shuffle,token_cutoff:0.15 --learning-rate 5e-6
    python recipes/consert.py --mode joint-unsup --nli cnsd_snli_v1.0.train.jsonl

`--mode`: `unsup` trains on the task's sentences (as the protocol says);
`sup` and `joint` train on `--nli` pairs (SNLI / CNSD JSON lines) with an NLI
softmax head (`joint` adds α · NT-Xent, `--contrastive-weight`);
`sup-unsup` and `joint-unsup` do that, then `unsup`. Views: none, shuffle,
token_cutoff:R, feature_cutoff:R, span_cutoff:R, dropout:R, adversarial:NORM
(adversarial needs labels: the joint modes, TensorFlow backend).
"""

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def main(argv=None):
    from kcse.datasets.nli import read_nli
    from kcse.experiments.comparison import comma_list
    from kcse.experiments.comparison import comparison_parser
    from kcse.experiments.comparison import run_comparison
    from kcse.experiments.methods import CONSERT_MODES
    from kcse.experiments.methods import ConSERTMethod

    parser = comparison_parser(__doc__, REPO / "runs" / "consert")
    group = parser.add_argument_group("ConSERT")
    group.add_argument("--views", type=comma_list,
                       default=["shuffle", "feature_cutoff:0.2"],
                       help="two views (default: shuffle,feature_cutoff:0.2)")
    group.add_argument("--mode", choices=CONSERT_MODES, default="unsup")
    group.add_argument("--nli", type=pathlib.Path,
                       help="SNLI / CNSD JSON-lines file for the supervised modes")
    group.add_argument("--contrastive-weight", type=float, default=1.0,
                       help="α of the joint modes")
    args = parser.parse_args(argv)
    if args.mode != "unsup" and args.nli is None:
        parser.error(f"--mode {args.mode} trains on NLI pairs: give --nli FILE")
    try:
        method = ConSERTMethod(
            args.views, args.mode, read_nli(args.nli) if args.nli else None,
            args.contrastive_weight,
        )
    except (OSError, ValueError) as error:
        parser.error(str(error))
    return run_comparison(
        args,
        method,
        method_defaults={"temperature": 0.1, "batch_size": 96, "hidden_dropout": 0.1},
    )


if __name__ == "__main__":
    main()
