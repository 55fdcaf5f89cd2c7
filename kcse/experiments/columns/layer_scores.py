"""SG-OPT's layer × pooling analysis of a cell's raw and trained encoder."""

from kcse.experiments.columns.column import Column
from kcse.experiments.columns.diagnostics import DIAGNOSED_SPLIT

# The revision of the scores a cell holds: its "layer_scores" setting, so
# part of its identity; bumped when kcse's code changes their numbers.
LAYER_SCORES_REVISION = 1


def layer_scores(encoder, data, prefix, batch_size):
    """`kcse.evaluation.layer_poolings.layer_pooling_scores` of `encoder` on
    `data`'s test split, every sentence with the model's `prefix`."""
    from kcse.evaluation.layer_poolings import layer_pooling_scores

    pairs = data[DIAGNOSED_SPLIT]
    return layer_pooling_scores(encoder, ([prefix + s for s in pairs.sentences1],
                                          [prefix + s for s in pairs.sentences2],
                                          pairs.scores), batch_size)


class LayerScoresColumn(Column):
    """`--layer-scores`: every hidden state × pooling ([CLS], mean, max) of
    the raw and of the trained encoder scored on the test split (SG-OPT's
    Figure 1), in results.json and results.md's "Layers × pooling"."""

    name = field = "layer_scores"
    in_su_table = False

    def add_arguments(self, group):
        group.add_argument("--layer-scores", action="store_true",
                           help="SG-OPT's analysis per cell (Kim et al. 2021, Figure 1): "
                           "Spearman on the test split of every hidden state pooled as "
                           "[CLS], mean and max, raw and trained, in results.json and "
                           "results.md")

    def from_args(self, args):
        return self if getattr(args, "layer_scores", False) else None

    def settings(self, seed):
        return {"layer_scores": LAYER_SCORES_REVISION}

    def prepare(self, cell):
        cell.restore_weights()
        return {"layer_scores": {"raw": layer_scores(
            cell.encoder, cell.data, cell.spec.prefix, cell.encode_batch_size), "trained": None}}

    def score(self, cell):
        scores = cell.record["layer_scores"]
        if cell.trained_ok:
            scores["trained"] = layer_scores(cell.trained_encoder, cell.data, cell.spec.prefix,
                                             cell.encode_batch_size)
        return {"layer_scores": scores}

    def shown(self, cells):
        return False
