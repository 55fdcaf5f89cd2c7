"""Column c: the encoder trained by the grid's method, once per seed."""

from kcse.experiments.cell_record import DONE
from kcse.experiments.cell_record import FAILED
from kcse.experiments.cell_record import cell_columns
from kcse.experiments.columns.column import Column
from kcse.experiments.protocols import SPLITS


class TrainedColumn(Column):
    """c: the method's encoder, trained once per seed from the model's
    initial weights with all randomness drawn from that seed, scored on the
    protocol's `trained_splits`; the mean and sample std over seeds.

    A loss that turns NaN/Inf makes the cell `"failed"` (with the reason)
    instead of a number. A task without the data the method trains on
    (stsb-multi-mt languages without a train split), or a model the method
    cannot train (SG-OPT's --pivot-layers beyond its layers), has no c: its
    `"untrained"` says why. The other columns' `encoded_splits` and
    `score_run` see each seed's trained vectors.
    """

    name = field = "trained"
    headings = ("c trained", "c std")
    label = "c"
    mteb_suffix = "{method}"
    always = trained = True

    def score(self, cell):
        from kcse.experiments.cell_scoring import trained_summary

        untrained = (cell.method.missing_training_data(cell.data, cell.protocol)
                     or cell.method.encoder_problem(cell.encoder))
        for seed in () if untrained else cell.seeds:
            if not self.train_seed(cell, seed):
                break
        if cell.plot_path is not None and cell.trained_ok:
            self.plot(cell)
        return {
            "status": FAILED if cell.error else DONE,
            "error": cell.error,
            "trained": trained_summary(cell.runs) if cell.trained_ok else None,
            "untrained": untrained,
            "runs": cell.runs,
            "training_samples": cell.runs[0]["training_samples"] if cell.runs else None,
        }

    def train_seed(self, cell, seed):
        """Trains and scores one seed (False: its loss turned non-finite)."""
        import gc

        from kcse.experiments import cell_scoring
        from kcse.experiments.training import train_once
        from kcse.foundation.training_stops import NonFiniteLossError

        cell.restore_weights()
        try:
            run = train_once(cell.method, cell.encoder, cell.data, cell.protocol, cell.task,
                             seed, cell.spec.prefix, cell.encode_batch_size)
        except NonFiniteLossError as failure:
            cell.error = f"seed {seed}: {failure}"
            return False
        cell.trained_encoder = trained = run.encoder
        # The objective, its optimizer state and traced training steps sit
        # in reference cycles: free them now, not at some later collection
        # while the next run trains beside them.
        gc.collect()
        cell.trained_vectors = vectors = cell_scoring.encode_splits(
            trained, trained.preprocessor, cell.data, cell.spec.prefix,
            cell.encode_batch_size, self.splits(cell))
        scored = {split: vectors[split] for split in cell.protocol.trained_splits
                  if split in vectors}
        run_record = {
            "seed": seed,
            "scores": cell_scoring.score_splits(cell.data, scored),
            "kept_step": run.kept_step,
            "training_seconds": run.seconds,
            "training_samples": run.samples,
        }
        for column in cell.columns:
            run_record |= column.score_run(cell, vectors, scored)
        cell.runs.append(run_record)
        return True

    @staticmethod
    def splits(cell):
        """The splits of the trained vectors: c's, and those other columns
        need (one encoding: a sentence in both is encoded once)."""
        needed = tuple(split for column in cell.columns
                       for split in column.encoded_splits(cell))
        if not needed:
            return cell.protocol.trained_splits
        return tuple(split for split in SPLITS
                     if split in cell.protocol.trained_splits + needed)

    @staticmethod
    def plot(cell):
        """The cell's PNG: gold against raw and trained cosines."""
        from kcse.evaluation.sts import cosine_scores
        from kcse.experiments.plots import plot_cell
        from kcse.foundation import atomic_files

        split = cell.record["reported_split"]
        with atomic_files.replacing(cell.plot_path) as temporary:
            plot_cell(
                temporary,
                cell.data[split].scores,
                cosine_scores(*cell.raw_vectors[split]),
                cosine_scores(*cell.trained_vectors[split]),
                cell.spec.name, cell.pooling, cell.task,
                cell.record["raw"][split]["spearman"],
                cell.runs[-1]["scores"][split]["spearman"],
                split, cell.method.title, cell.data[split].source,
            )

    def entries(self, cell):
        return cell_columns(cell)[2:4]

    def log_text(self, record):
        c, std, runs = cell_columns(record)[2:5]
        return f"c {c}" + ("" if std == "-" else f" ± {std} over {runs} seeds")
