"""Supervised SimCSE: (anchor, positive, hard negative) triplets."""

import collections
import random

from kcse.foundation import arguments
from kcse.data.chinese import LABEL_SCALES
from kcse.data.nli import NLITriplets
from kcse.data.nli import nli_triplets
from kcse.foundation.digests import content_digest
from kcse.experiments.methods.method import NLI_FLAG
from kcse.experiments.methods.method import Flag
from kcse.experiments.methods.method import Method
from kcse.experiments.methods.method import PaperSetting
from kcse.experiments.methods.simcse import PAPER_SETTINGS as UNSUPERVISED
from kcse.experiments.methods.simcse import SIMCSE_CITATION


# Supervised SimCSE (Gao et al., 2021) in Su's comparison: princeton-nlp's
# loss and dropout, Su's protocol for the rest (princeton's own supervised
# runs, train.py with run_sup_example.sh: batch 512, lr 5e-5, 3 epochs,
# [CLS] with its MLP, max length 32).
PRINCETON = "princeton-nlp/SimCSE"
PAPER_SETTINGS = {
    "scoring_pooling": UNSUPERVISED["scoring_pooling"],
    "training_pooling": PaperSetting(
        "row", f"the pooling it scores (the grid's rows; {PRINCETON}: cls with its MLP, "
        "--keep-mlp)"),
    "temperature": PaperSetting(0.05, f"{PRINCETON} train.py --temp 0.05"),
    "hard_negative_weight": PaperSetting(
        0.0, f"{PRINCETON}: --hard_negative_weight 0 (log-weight on each anchor's own "
        "hard negative)"),
    "optimizer": UNSUPERVISED["optimizer"],
    "learning_rate": PaperSetting(
        UNSUPERVISED["learning_rate"].value,
        f"Su's protocol, as unsupervised SimCSE ({PRINCETON}: 5e-5)"),
    "batch_size": PaperSetting(
        UNSUPERVISED["batch_size"].value,
        f"Su's protocol, as unsupervised SimCSE ({PRINCETON}: 512)"),
    "epochs": PaperSetting(
        UNSUPERVISED["epochs"].value,
        f"Su's protocol, as unsupervised SimCSE ({PRINCETON}: 3)"),
    "hidden_dropout": PaperSetting(0.1, f"BERT's, as {PRINCETON}"),
    "max_length": UNSUPERVISED["max_length"],
    "long_max_length": UNSUPERVISED["long_max_length"],
}


def labelled_pair_triplets(pairs, task, seed=0):
    """(anchor, positive, hard negative) triplets from labelled task pairs.

    A pair labelled similar (binary tasks: 1; STS-B: ≥ 4 of 5) gives
    (s1, s2) as anchor and positive; its hard negative is the second
    sentence of a pair labelled dissimilar (0; STS-B: ≤ 1) with the same
    first sentence when there is one (LCQMC, BQ: a question that looks
    alike), else of a dissimilar pair drawn with `seed`.
    """
    low, high, binary = LABEL_SCALES[task]
    positive_at = high if binary else high - 1
    negative_at = low if binary else low + 1
    dissimilar = [
        (s1, s2)
        for s1, s2, label in zip(pairs.sentences1, pairs.sentences2, pairs.scores)
        if label <= negative_at
    ]
    if not dissimilar:
        raise ValueError(
            f"{pairs.source or task}: no pair labelled ≤ {negative_at}, so no "
            "hard negatives for supervised SimCSE."
        )
    same_anchor = collections.defaultdict(list)
    for s1, s2 in dissimilar:
        same_anchor[s1].append(s2)
    draw = random.Random(seed)
    triplets = NLITriplets([], [], [])
    for s1, s2, label in zip(pairs.sentences1, pairs.sentences2, pairs.scores):
        if label < positive_at:
            continue
        negatives = same_anchor.get(s1) or [draw.choice(dissimilar)[1]]
        triplets.anchors.append(s1)
        triplets.entailments.append(s2)
        triplets.contradictions.append(draw.choice(negatives))
    return triplets


class SupervisedSimCSEMethod(Method):
    """Supervised SimCSE on NLI triplets, or on the task's train labels.

    Args:
        triplets: `kcse.data.NLITriplets` (e.g. `nli_triplets` of a
            CNSD file), or None for `labelled_pair_triplets` of the task's
            train split.
        hard_negative_weight: float, added to each anchor's own hard
            negative logit.
        keep_mlp: train and score [CLS] through princeton's MLP, kept as
            the trained encoder's pooler (`kcse.SupervisedSimCSE`'s
            `keep_mlp`); the cls row only.
    """

    name = "sup_simcse"
    title = "sup-SimCSE"
    citation = SIMCSE_CITATION
    paper_settings = PAPER_SETTINGS
    flag_group = "supervised SimCSE"
    flags = (
        Flag("--hard-negative-weight", type=arguments.number(),
             default=PAPER_SETTINGS["hard_negative_weight"].value,
             help=PAPER_SETTINGS["hard_negative_weight"].help),
        NLI_FLAG,
        Flag("--keep-mlp", action="store_true", default=False,
             help="train [CLS] through a new MLP (Dense + tanh) and keep it at test time as "
             "the trained encoder's pooler, so it encodes and exports with it (princeton-"
             "nlp/SimCSE's supervised setting: --pooler_type cls without --mlp_only_train; "
             "simcse/models.py MLPLayer, cl_forward, sentemb_forward); --pooling cls, on a "
             "backbone with a pooler layer (BERT-family)"),
    )

    def __init__(self, triplets=None,
                 hard_negative_weight=PAPER_SETTINGS["hard_negative_weight"].value,
                 rematerialize=False, keep_mlp=False):
        super().__init__(rematerialize)
        self.triplets = triplets
        self.hard_negative_weight = hard_negative_weight
        self.keep_mlp = keep_mlp

    @classmethod
    def from_args(cls, args, rematerialize=False):
        triplets = nli_triplets(args.nli) if args.nli else None
        if triplets is not None and not triplets.anchors:
            raise arguments.UsageError(
                f"--nli {args.nli}: no triplet: no premise has both an entailment and a "
                "contradiction hypothesis (supervised SimCSE pairs them, as "
                "princeton-nlp/SimCSE's NLI data does)")
        return cls(triplets, args.hard_negative_weight, rematerialize, args.keep_mlp)

    def encoder_problem(self, encoder):
        if not self.keep_mlp:
            return None
        from kcse.layers.pooling_rules import POOLER_LAYER

        if encoder.pooling != "cls":
            return ("--keep-mlp trains [CLS] through princeton's MLP: pooling cls (P1) only, "
                    f"not {encoder.pooling}")
        if not any(layer.name == POOLER_LAYER for layer in encoder.backbone.layers):
            return (f"--keep-mlp keeps the MLP as the pooler, and {type(encoder.backbone).__name__}"
                    " has no pooler layer (WoBERT, RoFormer and RoBERTa-style backbones)")
        return None

    def encoder_to_train(self, encoder, seed):
        """With `keep_mlp`: an encoder on `encoder`'s backbone whose pooling
        is the new MLP (the backbone's pooler, drawn anew, tanh)."""
        if not self.keep_mlp:
            return encoder
        from kcse.objectives.supervised_simcse import draw_mlp_pooler

        problem = self.encoder_problem(encoder)
        if problem:
            raise ValueError(problem)
        draw_mlp_pooler(encoder.backbone)  # A zero pooler (e5's) is refused as P2.
        return encoder.with_changes(pooling="pooler", pooler_activation="tanh", whitening=None)

    def objective(self, encoder, protocol):
        from kcse.objectives.supervised_simcse import SupervisedSimCSE

        return SupervisedSimCSE(encoder, protocol.temperature, self.hard_negative_weight,
                                keep_mlp=self.keep_mlp, rematerialize=self.rematerialize)

    @classmethod
    def trains_on_sentences(cls, args):
        return False  # NLI triplets or the train split's labelled pairs.

    def missing_training_data(self, data, protocol):
        if self.triplets is None and data.get("train") is None:
            return "no labelled train split for triplets (give NLI triplets)"
        return None

    def training_data(self, data, protocol, task, seed, prefix):
        triplets = self.triplets
        if triplets is None:
            triplets = labelled_pair_triplets(data["train"], task, seed)
        columns = (triplets.anchors, triplets.entailments, triplets.contradictions)
        return tuple([prefix + s for s in column] for column in columns), None

    def settings(self):
        return super().settings() | {
            "hard_negative_weight": self.hard_negative_weight,
            "triplets": "nli" if self.triplets is not None else "train labels",
            "triplets_digest": None if self.triplets is None else content_digest(
                [self.triplets.anchors, self.triplets.entailments,
                 self.triplets.contradictions]),
        } | ({"keep_mlp": True} if self.keep_mlp else {})  # Cells from before stay valid.
