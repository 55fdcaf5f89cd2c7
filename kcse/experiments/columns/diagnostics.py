"""The anisotropy diagnostics of a cell's raw and trained encoder."""

from kcse.experiments.columns.column import Column
from kcse.experiments.protocols import SPLITS

# The revision of the diagnostics a cell holds: its "diagnostics" setting,
# so part of its identity. Bumped whenever a change in kcse's code changes
# their numbers, so that older diagnostics are never reused.
#   True: the first (no model prefix on the sentences).
#   2: the sentences carry the model's prefix, as the cell encodes them.
DIAGNOSTICS_REVISION = 2
# The split the diagnostics are computed on, and their plot shows.
DIAGNOSED_SPLIT = "test"


def positive_threshold(scores):
    """Gold above which a pair is a positive for alignment: 0.5 for 0/1
    labels, else 4.0 (of 0–5, as SimCSE's analysis)."""
    import numpy as np

    return 0.5 if set(np.unique(scores)) <= {0.0, 1.0} else 4.0


def diagnose(encoder, data, split, prefix):
    """`kcse.evaluation.anisotropy_report` of `encoder` on `data[split]`,
    with token frequencies counted on the sentences of all the task's splits.

    Every sentence gets the model's `prefix`, as the cell encodes it (e5's
    `"query: "`), so the removal curve at k = 0 is the cell's P3 score and
    the prefix's tokens are counted among the frequent ones.
    """
    from kcse.evaluation.anisotropy import anisotropy_report

    corpus = [prefix + s for name in SPLITS if data.get(name) is not None
              for s in data[name].sentences()]
    pairs = data[split]
    prefixed = ([prefix + s for s in pairs.sentences1],
                [prefix + s for s in pairs.sentences2], pairs.scores)
    return anisotropy_report(
        encoder, prefixed, corpus_sentences=corpus,
        threshold=positive_threshold(pairs.scores),
    )


class DiagnosticsColumn(Column):
    """`--diagnostics`: `kcse.evaluation.anisotropy_report` of the raw and
    of the trained encoder on the test split, in results.json only (and, with
    `--plot`, a PNG of them beside the cell's plot)."""

    name = field = "diagnostics"
    in_su_table = False
    settings_before_precision = True

    def add_arguments(self, group):
        group.add_argument("--diagnostics", action="store_true",
                           help="anisotropy diagnostics of the raw and trained encoder "
                           "per cell, in results.json: token-embedding norm and "
                           "3-NN distance by frequency rank (BERT-flow's Table 2), "
                           "Spearman with the top-k frequent tokens removed from "
                           "average pooling (ConSERT's Table 1), alignment and "
                           "uniformity (Wang & Isola) on the test split "
                           "(kcse.evaluation.anisotropy_report; ~1 min per report "
                           "for e5-small)")

    def from_args(self, args):
        return self if getattr(args, "diagnostics", False) else None

    def settings(self, seed):
        # A cell without them does not answer a run that asks.
        return {"diagnostics": DIAGNOSTICS_REVISION}

    def prepare(self, cell):
        cell.restore_weights()
        return {"diagnostics": {"raw": diagnose(cell.encoder, cell.data, DIAGNOSED_SPLIT,
                                                cell.spec.prefix), "trained": None}}

    def score(self, cell):
        reports = cell.record["diagnostics"]
        if cell.trained_ok:
            reports["trained"] = diagnose(cell.trained_encoder, cell.data, DIAGNOSED_SPLIT,
                                          cell.spec.prefix)
        if cell.plot_path is not None:
            from kcse.experiments.plots import plot_diagnostics
            from kcse.experiments.results.plot_files import diagnostics_path
            from kcse.foundation import atomic_files

            path = diagnostics_path(cell.plot_path)
            with atomic_files.replacing(path) as temporary:
                plot_diagnostics(temporary, reports, cell.spec.name, cell.pooling,
                                 cell.task, cell.data[DIAGNOSED_SPLIT], cell.method.title,
                                 DIAGNOSED_SPLIT)
        return {"diagnostics": reports}

    def shown(self, cells):
        return False
