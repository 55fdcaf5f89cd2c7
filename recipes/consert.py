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
    from kcse.experiments.command_line import recipe_main

    return recipe_main(
        "consert", __doc__, REPO / "runs" / "consert", argv
    )


if __name__ == "__main__":
    main()
