"""The Chinese comparison with ConSERT in column c: raw / whitening / ConSERT.

The grid, data, protocols and results of `recipes/chinese_simcse.py`
(`--help` lists them), with column c trained by ConSERT (Yan et al., 2021):
two embedding-level views per sentence, NT-Xent with the two directions
summed, weighted by α. Every default is ConSERT's, from the file of
yym6472/ConSERT named:

- views feature_cutoff:0.2 and shuffle, batch 96, max length 64 (PAWSX too),
  learning rate 5e-7, temperature 0.1, α 0.15 (`--cl_rate`), hidden dropout
  0.1 (BERT's; no `--no_dropout`): `scripts/chinese/unsup-consert-base-*.sh`;
- joint mode: views none and token_cutoff:0.1, NLI head on (a, b, |a − b|,
  max(a, b)²) (`--no-nli-max-square`: without the last):
  `scripts/sup-consert-joint-base.sh`; NLI stage one epoch at
  lr 2e-5 (`--nli-learning-rate`): `main.py`'s defaults, which that script
  keeps;
- second stage of sup-unsup: none and feature_cutoff:0.1; of joint-unsup:
  none and shuffle: `scripts/sup-consert-{sup,joint}-unsup-base.sh`.

Su's protocol decides the training sentences and epochs (1 epoch over
`--sentences`); ConSERT's scripts train 10 epochs (STS-B 100) with early
stopping on valid every 20 steps, which `--protocol clean --epochs 10
--eval-every 20` approaches. Every stage trains as `main.py` does: AdamW (eps
1e-6, no bias correction, weight decay 0.01 but on biases and LayerNorm) at a
10% linear warm-up then linear decay (`--optimizer adam`: Keras' Adam at the
constant rate), with last-layer mean pooling (`--training-pooling`); the
grid's rows are the scoring poolings, by default `last2avg`, the one
ConSERT's tables report (`eval_*_unsup(..., last2avg=True)` in `main.py`).

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
    from kcse.experiments.command_line import recipe_main

    return recipe_main(
        "consert", __doc__, REPO / "runs" / "consert", argv
    )


if __name__ == "__main__":
    main()
