"""The Chinese comparison with SBERT-NLI in column c.

The grid, data, protocols and results of `recipes/chinese_simcse.py`
(`--help` lists them), with column c trained by SBERT's classification
objective (Reimers & Gurevych, 2019: softmax over (u, v, |u − v|)) on the
NLI pairs of `--nli` (SNLI / CNSD JSON lines), the supervised baseline of
ConSERT's and SG-OPT's tables; the task's own sentences and labels are not
trained on. The defaults are the method registry's paper settings
(`kcse.experiments.methods.sbert_nli.PAPER_SETTINGS`), listed with their
sources at the end of this help.

    python recipes/sbert_nli.py --nli cnsd_snli_v1.0.train.jsonl
"""

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def main(argv=None):
    from kcse.experiments.recipe_runs import recipe_main

    return recipe_main(
        "sbert_nli", __doc__, REPO / "runs" / "sbert_nli", argv
    )


if __name__ == "__main__":
    main()
