"""Column a: the un-tuned encoder's vectors, scored as they are."""

from kcse.experiments.columns.column import Column


class RawColumn(Column):
    """a: cosine Spearman of the raw vectors on every split."""

    name = field = mteb_suffix = "raw"
    headings = ("a raw",)
    label = "a"
    always = True

    def prepare(self, cell):
        from kcse.experiments import cell_scoring

        return {"raw": cell_scoring.score_splits(cell.data, cell.raw_vectors)}
