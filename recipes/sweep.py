"""Any method's setting swept: the comparison grid once per value, one table.

The grid of the method's recipe (`recipes/chinese_simcse.py` and its
siblings: `--help` lists the flags of every method), run once per value of
`--sweep` into one results folder (default `runs/<method>_ablations`),
then `ablation_<sweep>.md`: column c per value under the untrained a and
b, per model and pooling, with each task and the average. `--sweep
NAME=V1,V2,...` sweeps any flag of the recipe, each value read as the flag
reads it (a switch: yes or no); `--sweep NAME` runs a preset with its
paper's values:

- simcse: dropout (0, 0.05, 0.1, 0.15, 0.2, 0.3 and fixed 0.1: one
  dropout mask for both views; seed 003), batch-size (32 to 512);
- sg_opt: temperature (0.001, 0.01, 0.1), regularization (0, 0.1, 1) and
  projection-head (yes, no): seed 001's ablation;
- consert: views, temperature, batch-size, sentences and nli-max-square
  (`recipes/consert_ablations.py`).

    python recipes/sweep.py --method simcse --sweep dropout
    python recipes/sweep.py --method sg_opt --sweep temperature --models BERT
    python recipes/sweep.py --method simcse --sweep learning-rate=1e-5,3e-5

A value's cells are kept in results.json like any recipe's, keyed by their
settings: a rerun skips them, and a longer sweep reuses the shorter one's.
"""

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def main(argv=None):
    from kcse.experiments.sweeps import sweep_main

    return sweep_main(__doc__, REPO / "runs", argv)


if __name__ == "__main__":
    main()
