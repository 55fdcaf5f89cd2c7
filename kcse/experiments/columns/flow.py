"""BERT-flow (Li et al., 2020) beside b: a flow fitted on the raw vectors."""

from kcse.experiments.columns.column import Column

FLOW_ARCHITECTURE = ("n_levels", "depth", "coupling_width", "coupling", "permutation", "seed")


def flow_settings(seed):
    """BERT-flow's settings in the grid: `kcse.layers.BertFlow`'s defaults
    (the authors' `config_l3_d3_w32` and training), its weights seeded."""
    from kcse.layers import bert_flow

    config = bert_flow.BertFlow(seed=seed).get_config()
    return {name: config[name] for name in FLOW_ARCHITECTURE} | {
        "epochs": bert_flow.EPOCHS, "batch_size": bert_flow.BATCH_SIZE,
        "learning_rate": bert_flow.LEARNING_RATE}


def flow_scores(data, raw_vectors, fit_vectors, seed):
    """BERT-flow's scores: a flow trained by maximum likelihood on
    `fit_vectors` (the raw vectors b whitens with; the backbone is not
    touched), every split's pairs scored by the cosine of their latent
    vectors."""
    import keras

    from kcse.experiments.cell_scoring import score_splits
    from kcse.layers.bert_flow import BertFlow

    settings = flow_settings(seed)
    flow = BertFlow(**{name: settings[name] for name in FLOW_ARCHITECTURE})
    flow.adapt(fit_vectors, epochs=settings["epochs"],
               batch_size=settings["batch_size"],
               learning_rate=settings["learning_rate"], seed=seed)
    return score_splits(data, raw_vectors,
                        lambda v: keras.ops.convert_to_numpy(flow(v)))


class FlowColumn(Column):
    """BERT-flow's scores (`flow_scores`, trained on the protocol's
    whitening splits, seeded with the first seed); null where the task has
    none of those splits. Not in su_table.md."""

    name = field = label = mteb_suffix = "flow"
    headings = ("flow",)
    in_su_table = False
    unfitted = "n/a"
    postprocess = ("BERT-flow, Li et al. 2020: a Glow flow trained by maximum "
                   "likelihood on the vectors b whitens with; a column beside b")

    def settings(self, seed):
        return {"flow": flow_settings(seed)}

    def prepare(self, cell):
        if cell.fit_vectors is None:
            return {"flow": None}
        return {"flow": flow_scores(cell.data, cell.raw_vectors, cell.fit_vectors,
                                    cell.seeds[0])}
