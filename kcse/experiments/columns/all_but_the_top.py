"""All-but-the-top (Mu & Viswanath, 2018) beside b: the raw vectors less
their mean and their top D principal directions."""

from kcse.foundation import arguments
from kcse.experiments.columns.column import Column


class AllButTheTopColumn(Column):
    """`--postprocess ...,all-but-the-top`: the raw vectors post-processed by
    `kcse.layers.all_but_the_top`, its mean and directions fitted on the
    vectors b whitens with (the protocol's whitening splits); null where the
    task has none of them. `directions`: D (`--abtt-directions`; None: the
    paper's dim / 100, at least 1), which the cell records."""

    name = mteb_suffix = "all-but-the-top"
    field = "all_but_the_top"
    label = "abtt"
    headings = ("abtt",)
    unfitted = "n/a"
    postprocess = ("Mu & Viswanath 2018: the vectors b whitens "
                   "with give a mean and their top D principal directions "
                   "(--abtt-directions), removed from the raw vectors; a column "
                   "beside b")
    legend = ("**abtt** (when run): all-but-the-top (Mu & Viswanath, 2018), the "
              "raw vectors less the mean and the top D principal directions of "
              "the vectors b whitens with.")

    def __init__(self, directions=None):
        self.directions = directions

    def add_arguments(self, group):
        group.add_argument("--abtt-directions", type=arguments.positive_integer,
                           metavar="D", help="principal directions all-but-the-top "
                           "removes (default: the paper's dim/100, at least 1)")

    def check_arguments(self, args):
        if (getattr(args, "abtt_directions", None) is not None
                and self.name not in getattr(args, "postprocess", ())):
            raise arguments.UsageError(
                "--abtt-directions: add all-but-the-top to --postprocess")

    def from_args(self, args):
        if self.name not in getattr(args, "postprocess", ()):
            return None
        return AllButTheTopColumn(getattr(args, "abtt_directions", None))

    def settings(self, seed):
        return {"all_but_the_top": "auto" if self.directions is None else self.directions}

    def prepare(self, cell):
        from kcse.experiments.cell_scoring import score_splits
        from kcse.layers.all_but_the_top import all_but_the_top
        from kcse.layers.all_but_the_top import all_but_the_top_statistics

        if cell.fit_vectors is None:
            return {"all_but_the_top": None, "all_but_the_top_directions": None}
        dim = cell.fit_vectors.shape[-1]
        if self.directions is not None and self.directions > dim:
            raise arguments.UsageError(
                f"--abtt-directions {self.directions}: {cell.spec.name} gives "
                f"{dim}-dimensional vectors; remove at most {dim} directions")
        mean, top = all_but_the_top_statistics(cell.fit_vectors, self.directions)
        return {"all_but_the_top": score_splits(
                    cell.data, cell.raw_vectors, lambda v: all_but_the_top(v, mean, top)),
                "all_but_the_top_directions": len(top)}
