"""The Chinese comparison with ConSERT in column c: raw / whitening / ConSERT.

The grid, data, protocols and results of `recipes/chinese_simcse.py`
(`--help` lists them), with column c trained by ConSERT (Yan et al., 2021):
two embedding-level views per sentence, NT-Xent with the two directions
summed, weighted by α. Every default is ConSERT's, from yym6472/ConSERT's
scripts and `main.py` or its paper: the method registry's paper settings
(`kcse.experiments.methods.consert.PAPER_SETTINGS`), listed with their
sources at the end of this help: the views of each stage, batch, length,
learning rates, temperature, α, the NLI head, AdamW at WarmupLinear
(`--optimizer adam`: Keras' Adam at the constant rate), last-layer mean
pooling in training (`--training-pooling`) and the grid's row `last2avg`,
the pooling ConSERT's tables report. Su's protocol decides the training
sentences and epochs (1 epoch over `--sentences`).

    python recipes/consert.py
    python recipes/consert.py --views shuffle,token_cutoff:0.15 --learning-rate 5e-6
    python recipes/consert.py --mode joint-unsup --nli cnsd_snli_v1.0.train.jsonl

`--mode`: `unsup` trains on the task's sentences (as the protocol says);
`sup` and `joint` train on `--nli` pairs (SNLI / CNSD JSON lines) with an NLI
softmax head (`joint` adds α · NT-Xent of the premises' and of the
hypotheses' views); `sup-unsup` and `joint-unsup` do that, then `unsup`.
Views: none, shuffle, token_cutoff:R, feature_cutoff:R, span_cutoff:R,
dropout:R, adversarial:NORM (adversarial needs labels: the joint modes,
TensorFlow backend). The shuffle view permutes position ids: on NEZHA and
RoFormer, whose positions are relative, c is left out with the reason.
"""

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def main(argv=None):
    from kcse.experiments.recipe_runs import recipe_main

    return recipe_main(
        "consert", __doc__, REPO / "runs" / "consert", argv
    )


if __name__ == "__main__":
    main()
