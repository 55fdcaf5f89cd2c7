"""ConSERT (Yan et al., 2021): embedding-level views, NT-Xent, NLI modes."""

import argparse
import dataclasses

from kcse import arguments
from kcse.data.nli import read_nli
from kcse.digests import content_digest
from kcse.experiments.methods.method import NLI_FLAG
from kcse.experiments.methods.method import OPTIMIZER_FLAG
from kcse.experiments.methods.method import Flag
from kcse.experiments.methods.method import Method
from kcse.experiments.methods.method import fit
from kcse.experiments.methods.method import script_optimizer
from kcse.layers.view_specs import split_view
from kcse.layers.view_specs import view_from_spec

# The objective's modes (`kcse.objectives.ConSERT`), then ConSERT's two-stage
# ones: a supervised stage, then `unsup` with the same encoder.
MODES = ("unsup", "sup", "joint", "sup-unsup", "joint-unsup")
# `--training-pooling`: a pooling of `kcse.layers.SentencePooling`, or "row",
# the grid row's (the scoring pooling).
TRAINING_POOLINGS = ("last_avg", "last2avg", "first_last_avg", "cls", "max", "row")


def two_views(text):
    """An argparse type: ConSERT's two views, each checked by `split_view`."""
    views = arguments.comma_list(text)
    if len(views) != 2:
        raise argparse.ArgumentTypeError(f"ConSERT takes two views; got {len(views)} in {text!r}")
    for view in views:
        try:
            split_view(view)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return views


class ConSERTMethod(Method):
    """ConSERT in one of its modes, with the settings of ConSERT's scripts.

    `unsup` trains on the task's sentences; `sup` and `joint` on `nli`
    pairs (`kcse.data.NLIPairs`); `sup-unsup` and `joint-unsup` do
    that, then `unsup`, with the same encoder (ConSERT's two-stage modes).

    Defaults, from yym6472/ConSERT: temperature 0.1, batch 96, max length 64
    (PAWSX too) and learning rate 5e-7 for the contrastive stage
    (`scripts/chinese/unsup-consert-base-*.sh`), hidden dropout 0.1 (those
    scripts keep BERT's), NLI stage one epoch at 2e-5 (`main.py`'s defaults
    `--num_epochs 1 --learning_rate 2e-5`, kept by
    `scripts/sup-consert-joint-base.sh`), α 0.15 (`--cl_rate 0.15`), views
    by stage (`kcse.objectives.consert.SCRIPT_VIEWS`). ConSERT's scripts
    train 10 epochs (STS-B 100) with early stopping on valid every 20 steps
    (patience 10), which `--protocol clean --epochs 10 --eval-every 20`
    approaches. ConSERT trains with last-layer mean pooling (`main.py`'s
    `models.Pooling(pooling_mode_mean_tokens=True)`) and reports the mean
    of the last two layers (`eval_*_unsup(..., last2avg=True)`): every
    stage trains with `training_pooling` over the encoder's backbone, and
    the encoder, with its own pooling, is scored. Every stage trains as
    `main.py` does, with transformers'
    AdamW (eps 1e-6, `correct_bias=False`, weight decay 0.01 but on biases
    and LayerNorm, gradients clipped to norm 1) at a linear warm-up over
    the first ceil(10%) of the stage's steps, then a linear decay to 0
    (`kcse.layers.adam_weight_decay.sentence_transformers_adamw`);
    `optimizer="adam"`: Keras' Adam at the constant rate.

    Args:
        views: two view specs (`kcse.layers.view_specs`), used by every
            contrastive stage; None: ConSERT's by stage.
        mode: one of `MODES`.
        nli: `NLIPairs` for the supervised modes.
        contrastive_weight: α, ConSERT's `cl_rate`.
        nli_learning_rate: the NLI stage's learning rate.
        optimizer: "adamw" (ConSERT's) or "adam".
        training_pooling: one of `TRAINING_POOLINGS`; "row": the
            encoder's own.
        max_square: the NLI head's max(r1, r2)² feature (`kcse.ConSERT`).
    """

    name = "consert"
    title = "ConSERT"
    protocol_defaults = {"temperature": 0.1, "batch_size": 96, "learning_rate": 5e-7,
                         "hidden_dropout": 0.1, "max_length": 64, "long_max_length": 64}
    flag_group = "ConSERT"
    flags = (
        Flag("--views", type=two_views,
             help="two views for every contrastive stage: none, "
             "shuffle, token_cutoff:R, feature_cutoff:R, "
             "span_cutoff:R, dropout:R, adversarial:NORM (default: "
             "ConSERT's scripts' by stage: unsup "
             "feature_cutoff:0.2,shuffle (chinese/unsup-consert-"
             "base-*.sh); joint none,token_cutoff:0.1 "
             "(sup-consert-joint-base.sh); the unsup stage of "
             "sup-unsup none,feature_cutoff:0.1 and of joint-unsup "
             "none,shuffle (sup-consert-*-unsup-base.sh))"),
        Flag("--mode", choices=MODES, default="unsup"),
        Flag("--contrastive-weight", type=arguments.non_negative_number, default=0.15,
             help="α, ConSERT's cl_rate, on its NT-Xent (the two "
             "directions summed) in every contrastive stage "
             "(default 0.15: --cl_rate 0.15 in ConSERT's scripts)"),
        Flag("--nli-learning-rate", type=arguments.positive_number, default=2e-5,
             help="learning rate of the NLI stage, one epoch (default "
             "2e-5: ConSERT's main.py, which sup-consert-joint-"
             "base.sh keeps)"),
        OPTIMIZER_FLAG,
        Flag("--training-pooling", choices=TRAINING_POOLINGS, default="last_avg",
             help="the pooling every stage trains with; the grid row's pooling "
             "scores (default last_avg: main.py's models.Pooling(pooling_mode_mean_"
             "tokens=True), while main.py reports last2avg, the recipe's default "
             "row); row: train with the row's pooling (kcse's before)"),
        Flag("--nli-max-square", action=argparse.BooleanOptionalAction, default=True,
             help="the NLI head's features include max(r1, r2)² (default: yes, "
             "--concatenation_sent_max_square in sup-consert-*.sh); "
             "--no-nli-max-square: (r1, r2, |r1 − r2|), the paper's eq. 2 and SBERT's"),
        NLI_FLAG,
    )

    def __init__(self, views=None, mode="unsup", nli=None, contrastive_weight=0.15,
                 nli_learning_rate=2e-5, optimizer="adamw", training_pooling="last_avg",
                 max_square=True, rematerialize=False):
        super().__init__(rematerialize)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}; got {mode!r}.")
        if mode != "unsup" and nli is None:
            raise ValueError(f"ConSERT mode {mode!r} trains on NLI pairs: give nli.")
        if training_pooling not in TRAINING_POOLINGS:
            raise ValueError(f"training_pooling must be one of {TRAINING_POOLINGS}; "
                             f"got {training_pooling!r}.")
        if views is not None:
            views = tuple(views)
            if len(views) != 2:
                raise ValueError(f"ConSERT needs two views; got {list(views)}.")
            for view in views:
                split_view(view)  # Bad names fail before any training.
        self.views = views
        self.mode = mode
        self.nli = nli
        self.contrastive_weight = contrastive_weight
        self.nli_learning_rate = nli_learning_rate
        self.optimizer_name = optimizer
        self.training_pooling = training_pooling
        self.max_square = max_square

    @classmethod
    def check_arguments(cls, args):
        if args.mode != "unsup" and args.nli is None:
            raise arguments.UsageError(f"--mode {args.mode} trains on NLI pairs: give --nli FILE")

    @classmethod
    def from_args(cls, args, rematerialize=False):
        nli = read_nli(args.nli) if args.nli else None
        return cls(args.views, args.mode, nli, args.contrastive_weight,
                   args.nli_learning_rate, args.optimizer, args.training_pooling,
                   args.nli_max_square, rematerialize)

    def stage_views(self):
        """The two view specs of each contrastive stage: `{"nli"|"unsup": [...]}`."""
        from kcse.objectives.consert import SCRIPT_VIEWS

        supervised, _, then = self.mode.partition("-")
        stages = {}
        if supervised == "joint":
            stages["nli"] = SCRIPT_VIEWS["joint"]
        if supervised == "unsup" or then == "unsup":
            stages["unsup"] = SCRIPT_VIEWS[self.mode]
        if self.views is not None:
            stages = {stage: list(self.views) for stage in stages}
        return stages

    @classmethod
    def trains_on_sentences(cls, args):
        return args.mode.startswith("unsup") or args.mode.endswith("-unsup")

    def encoder_problem(self, encoder):
        from kcse.models.layer_taps import has_absolute_positions

        shuffled = [stage for stage, views in self.stage_views().items() if "shuffle" in views]
        if shuffled and not has_absolute_positions(encoder.backbone):
            return (f"the shuffle view ({' and '.join(shuffled)} stage) permutes position "
                    f"ids, which {type(encoder.backbone).__name__} does not have (its "
                    "positions are relative, inside the attention); choose other views "
                    "with --views")
        return None

    def missing_training_data(self, data, protocol):
        if self.mode.startswith("unsup") or self.mode.endswith("-unsup"):
            return super().missing_training_data(data, protocol)
        return None  # Trains on the NLI pairs only.

    def objective(self, encoder, protocol, mode="unsup"):
        from kcse.objectives.consert import ConSERT

        views = self.stage_views().get("unsup" if mode == "unsup" else "nli")
        return ConSERT(
            self.training_encoder(encoder),
            views=[view_from_spec(view) for view in views or ("none", "none")],
            temperature=protocol.temperature,
            mode=mode,
            contrastive_weight=self.contrastive_weight,
            max_square=self.max_square,
            rematerialize=self.rematerialize,
        )

    def training_encoder(self, encoder):
        """`encoder`'s backbone pooled by `training_pooling` (`encoder`
        itself for "row" or its own pooling): training it trains `encoder`."""
        from kcse.sentence_encoder import SentenceEncoder

        if self.training_pooling in ("row", encoder.pooling):
            return encoder
        return SentenceEncoder(encoder.backbone, encoder.preprocessor,
                               pooling=self.training_pooling,
                               pooler_activation=encoder.pooler_activation,
                               normalize=encoder.normalize)

    def train(self, encoder, data, protocol, task, seed, prefix, callbacks=(),
              verbose=0):
        count = 0
        supervised, _, then = self.mode.partition("-")
        if supervised != "unsup":
            x = tuple(
                [prefix + s for s in side]
                for side in (self.nli.sentences1, self.nli.sentences2)
            )
            nli_protocol = dataclasses.replace(
                protocol, learning_rate=self.nli_learning_rate, epochs=1
            )
            fit(self.objective(encoder, protocol, supervised), x,
                self.nli.labels, nli_protocol, verbose=verbose,
                optimizer=self.optimizer(nli_protocol, len(self.nli)))
            count += len(self.nli)
        if supervised == "unsup" or then == "unsup":
            count += super().train(encoder, data, protocol, task, seed, prefix,
                                   callbacks, verbose)
        return count

    def optimizer(self, protocol, samples):
        return script_optimizer(self.optimizer_name, protocol, samples)

    def settings(self):
        # Adam's cells keep the key they had before the optimizer was a choice.
        # Likewise the cells trained with the row's pooling and the max-square head.
        changed = {} if self.optimizer_name == "adam" else {"optimizer": self.optimizer_name}
        if self.training_pooling != "row":
            changed["training_pooling"] = self.training_pooling
        if not self.max_square:
            changed["nli_max_square"] = False
        return super().settings() | changed | {
            "views": self.stage_views(),
            "mode": self.mode,
            "contrastive_weight": self.contrastive_weight,
            "nli_learning_rate": self.nli_learning_rate,
            "nli": getattr(self.nli, "source", None),
            "nli_digest": None if self.nli is None else content_digest(
                [self.nli.sentences1, self.nli.sentences2, self.nli.labels]),
        }
