"""Column c+w: BERT-whitening of the trained encoder (kexue.fm 8348)."""

from kcse.experiments.columns.column import Column


class TrainedWhiteningColumn(Column):
    """c+w: each seed's trained encoder whitened on its own vectors of the
    protocol's whitening splits (`cell_scoring.adapted_whitening`, as b on
    the raw vectors), scored on the splits c is scored on: an encoding pass
    of the whitening splits per seed. Null without b (nothing to whiten
    on) or without c."""

    name = "trained-whitening"
    field = "trained_whitening"
    label = "c+w"
    mteb_suffix = "{method}-whitening"
    headings = ("c+w",)
    trained = True
    postprocess = (
        "column c+w: BERT-whitening of the trained encoder, its statistics "
        "from the trained vectors of the protocol's whitening splits, as b's "
        "from the raw ones: bojone/BERT-whitening's compute_kernel_bias on "
        "bojone/SimCSE's trained encoder, the combination Su suggests in "
        "kexue.fm 8348; an encoding pass of those splits per cell and seed")

    def settings(self, seed):
        return {"trained_whitening": True}

    def encoded_splits(self, cell):
        return () if cell.raw_whitening is None else cell.protocol.whitening_splits

    def score_run(self, cell, vectors, scored):
        from kcse.experiments import cell_scoring
        from kcse.layers.whitening import null_directions

        if cell.raw_whitening is None:
            return {}
        whitening = cell_scoring.adapted_whitening(
            cell_scoring.whitening_vectors(vectors, cell.protocol.whitening_splits))
        return {"whitened_scores": cell_scoring.score_splits(
                    cell.data, scored, cell_scoring.whitened(whitening)),
                "whitening_null_directions": null_directions(whitening[1])}

    def score(self, cell):
        from kcse.experiments.cell_scoring import trained_summary

        ready = cell.trained_ok and cell.raw_whitening is not None
        return {"trained_whitening":
                trained_summary(cell.runs, "whitened_scores") if ready else None}

    def entries(self, cell):
        return (self.text(cell),)
