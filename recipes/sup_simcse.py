"""The Chinese comparison with supervised SimCSE in column c.

The grid, data, protocols and results of `recipes/chinese_simcse.py`
(`--help` lists them), with column c trained by supervised SimCSE on
(anchor, positive, hard negative) triplets: from `--nli` (SNLI / CNSD JSON
lines: entailment positive, contradiction hard negative) or, without it,
from the task's labelled train pairs (`labelled_pair_triplets`: similar
pairs as anchor/positive, a dissimilar pair's second sentence as hard
negative). Labels of valid and test are never read, under any protocol.
The defaults are the method registry's paper settings
(`kcse.experiments.methods.sup_simcse.PAPER_SETTINGS`), listed with their
sources at the end of this help.

    python recipes/sup_simcse.py
    python recipes/sup_simcse.py --nli cnsd_snli_v1.0.train.jsonl --hard-negative-weight 0.5
"""

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def main(argv=None):
    from kcse.experiments.recipe_runs import recipe_main

    return recipe_main(
        "sup_simcse", __doc__, REPO / "runs" / "sup_simcse", argv
    )


if __name__ == "__main__":
    main()
