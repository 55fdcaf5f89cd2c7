"""Supervised SimCSE: (anchor, positive, hard negative) triplets."""

import collections
import random

from kcse import arguments
from kcse.data.chinese import LABEL_SCALES
from kcse.data.nli import NLITriplets
from kcse.data.nli import nli_triplets
from kcse.digests import content_digest
from kcse.experiments.methods.method import NLI_FLAG
from kcse.experiments.methods.method import Flag
from kcse.experiments.methods.method import Method


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
    """

    name = "sup_simcse"
    title = "sup-SimCSE"
    protocol_defaults = {"hidden_dropout": 0.1}  # BERT's, as princeton-nlp.
    flag_group = "supervised SimCSE"
    flags = (
        Flag("--hard-negative-weight", type=arguments.number(), default=0.0),
        NLI_FLAG,
    )

    def __init__(self, triplets=None, hard_negative_weight=0.0, rematerialize=False):
        super().__init__(rematerialize)
        self.triplets = triplets
        self.hard_negative_weight = hard_negative_weight

    @classmethod
    def from_args(cls, args, rematerialize=False):
        triplets = nli_triplets(args.nli) if args.nli else None
        return cls(triplets, args.hard_negative_weight, rematerialize)

    def objective(self, encoder, protocol):
        from kcse.objectives.supervised_simcse import SupervisedSimCSE

        return SupervisedSimCSE(encoder, protocol.temperature, self.hard_negative_weight,
                                rematerialize=self.rematerialize)

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
        }
