"""The Chinese comparison with IS-BERT in column c.

The grid, data, protocols and results of `recipes/chinese_simcse.py`
(`--help` lists them), with column c trained by IS-BERT (Zhang et al.,
EMNLP 2020): a CNN over the last layer's tokens, drawn anew from each
seed, whose mean is the sentence vector, trained with the Jensen–Shannon
estimate of the mutual information between the two; on the task's
unlabelled sentences, or with `--nli FILE` on an NLI file's sentences
without their labels (the paper's IS-BERT-NLI). Its row is mean pooling of
the CNN (P3). The defaults are the method registry's paper settings
(`kcse.experiments.methods.is_bert.PAPER_SETTINGS`), listed with their
sources at the end of this help.

    python recipes/is_bert.py
    python recipes/is_bert.py --nli cnsd_snli_v1.0.train.jsonl
"""

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def main(argv=None):
    from kcse.experiments.recipe_runs import recipe_main

    return recipe_main(
        "is_bert", __doc__, REPO / "runs" / "is_bert", argv
    )


if __name__ == "__main__":
    main()
