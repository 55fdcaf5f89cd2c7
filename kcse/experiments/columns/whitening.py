"""Column b: BERT-whitening of the raw vectors (Su et al., 2021)."""

from kcse.experiments.columns.column import Column


class WhiteningColumn(Column):
    """b: the raw vectors whitened with the statistics of the protocol's
    whitening splits (`cell_scoring.adapted_whitening`); null where the
    task has none of them. The cell also records how many vectors the
    whitening was fitted on and how many numerically null directions it
    zeroed (`kcse.layers.Whitening`)."""

    name = field = mteb_suffix = "whitening"
    headings = ("b whitening",)
    label = "b"
    always = True
    unfitted = "n/a"
    postprocess = "BERT-whitening, column b, always"

    def prepare(self, cell):
        from kcse.experiments import cell_scoring
        from kcse.layers.whitening import null_directions

        whitening = cell.raw_whitening
        return {
            "whitening": None if whitening is None else cell_scoring.score_splits(
                cell.data, cell.raw_vectors, cell_scoring.whitened(whitening)),
            "whitening_sentences": 0 if cell.fit_vectors is None else len(cell.fit_vectors),
            "whitening_null_directions": None if whitening is None
            else null_directions(whitening[1]),
        }
