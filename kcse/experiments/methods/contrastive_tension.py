"""Contrastive Tension (Carlsson et al., ICLR 2021)."""

from kcse import arguments
from kcse.experiments.methods.method import Flag
from kcse.experiments.methods.method import Method
from kcse.experiments.protocols import protocol_from_args


class ContrastiveTensionMethod(Method):
    """Contrastive Tension with its authors' settings.

    From FreddeFrallan/Contrastive-Tension (`ContrastiveTension/Training.py`,
    `ContrastiveTensionModel.py`): batches of 16 sentence pairs with K = 7
    negative pairs per positive, RMSprop at 1e-5 stepping down by 2e-6
    after every 500 steps to 2e-6 (`PiecewiseConstantDecay`), both models
    without dropout, mean pooling of the last layer (the grid's P3), 75
    tokens. The authors train 10 × 500 steps and keep whichever of the two
    models scores better on STS-B dev; here the protocol's sentences make
    one epoch (a pair per sentence) and the encoder, their second model,
    is the one scored (as sentence-transformers).

    Args:
        negatives: K, negative pairs per positive pair.
    """

    name = "ct"
    title = "CT"
    protocol_defaults = {"batch_size": 16, "learning_rate": 1e-5, "max_length": 75}
    flag_group = "Contrastive Tension"
    flags = (
        Flag("--negative-pairs", type=arguments.positive_integer, default=7,
             help="K, negative sentence pairs per positive pair; "
             "--batch-size (pairs) must be a multiple of K + 1 "
             "(default 7, with batch 16: Contrastive-Tension's Training.py)"),
    )
    # ContrastiveTension/Training.py: the learning rate's steps.
    SCHEDULE_BOUNDARIES = (500, 1000, 1500, 2000)
    SCHEDULE_FACTORS = (1.0, 0.8, 0.6, 0.4, 0.2)

    def __init__(self, negatives=7, rematerialize=False):
        super().__init__(rematerialize)
        self.negatives = negatives

    @classmethod
    def check_arguments(cls, args):
        batch = protocol_from_args(args, cls).batch_size
        if batch % (args.negative_pairs + 1):
            raise arguments.UsageError(
                f"--batch-size {batch} must be a multiple of --negative-pairs + 1 "
                f"({args.negative_pairs + 1}): each batch holds whole groups of "
                "one positive and K negative pairs")

    @classmethod
    def from_args(cls, args, rematerialize=False):
        return cls(args.negative_pairs, rematerialize)

    def objective(self, encoder, protocol):
        from kcse.objectives.contrastive_tension import ContrastiveTension

        return ContrastiveTension(encoder, negatives=self.negatives,
                                  rematerialize=self.rematerialize)

    def optimizer(self, protocol, samples):
        import keras

        schedule = keras.optimizers.schedules.PiecewiseConstantDecay(
            list(self.SCHEDULE_BOUNDARIES),
            [protocol.learning_rate * factor for factor in self.SCHEDULE_FACTORS],
        )
        return keras.optimizers.RMSprop(schedule)

    def settings(self):
        return super().settings() | {
            "negative_pairs": self.negatives,
            "optimizer": "rmsprop, lr steps ×"
            + ",".join(map(str, self.SCHEDULE_FACTORS)) + " at "
            + ",".join(map(str, self.SCHEDULE_BOUNDARIES)),
        }
