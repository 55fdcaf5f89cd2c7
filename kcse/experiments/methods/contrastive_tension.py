"""Contrastive Tension (Carlsson et al., ICLR 2021)."""

from kcse.foundation import arguments
from kcse.experiments.methods.method import Flag
from kcse.experiments.methods.method import Method
from kcse.experiments.methods.method import PaperSetting
from kcse.experiments.protocols import protocol_from_args

# The paper (ICLR 2021, its OpenReview page), its authors as papers citing it list them.
CONTRASTIVE_TENSION_CITATION = """@inproceedings{carlsson2021semantic,
    title = {Semantic Re-tuning with Contrastive Tension},
    author = {Carlsson, Fredrik and Gyllensten, Amaru Cuba and Gogoulou, Evangelia and Hellqvist, Erik Ylip{\"a}{\"a} and Sahlgren, Magnus},
    booktitle = {International Conference on Learning Representations},
    year = {2021},
    url = {https://openreview.net/forum?id=Ov_sMNau-PF}
}"""

# Contrastive Tension as FreddeFrallan/Contrastive-Tension runs it, each
# setting with its source.
TRAINING = "ContrastiveTension/Training.py"
PAPER_SETTINGS = {
    "scoring_pooling": PaperSetting(
        "P3", "mean pooling of the last layer, ContrastiveTensionModel.py"),
    "training_pooling": PaperSetting("row", "the pooling it scores, the last layer's mean"),
    "negative_pairs": PaperSetting(7, f"K negative pairs per positive pair, {TRAINING}"),
    "optimizer": PaperSetting(
        "rmsprop", f"{TRAINING}: RMSprop, the rate stepping down by 20% of it every "
        "500 steps (PiecewiseConstantDecay)"),
    "learning_rate": PaperSetting(1e-5, TRAINING),
    "batch_size": PaperSetting(16, f"{TRAINING}: 16 sentence pairs"),
    "epochs": PaperSetting(
        1, "Su's protocol, a pair per sentence (the authors train 10 × 500 steps)"),
    "max_length": PaperSetting(75, TRAINING),
    "hidden_dropout": PaperSetting(
        0.3, "Su's protocol; both models run without dropout in training "
        "(ContrastiveTension, dropout=False)"),
}


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
    citation = CONTRASTIVE_TENSION_CITATION
    paper_settings = PAPER_SETTINGS
    flag_group = "Contrastive Tension"
    flags = (
        Flag("--negative-pairs", type=arguments.positive_integer,
             default=PAPER_SETTINGS["negative_pairs"].value,
             help="K, negative sentence pairs per positive pair; "
             "--batch-size (pairs) must be a multiple of K + 1 "
             + PAPER_SETTINGS["negative_pairs"].help),
    )
    # ContrastiveTension/Training.py: the learning rate's steps.
    SCHEDULE_BOUNDARIES = (500, 1000, 1500, 2000)
    SCHEDULE_FACTORS = (1.0, 0.8, 0.6, 0.4, 0.2)

    def __init__(self, negatives=PAPER_SETTINGS["negative_pairs"].value,
                 rematerialize=False):
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
