"""ConSERT (Yan et al., 2021): embedding-level views, NT-Xent, NLI modes."""

import argparse
import dataclasses

from kcse.foundation import arguments
from kcse.data.nli import read_nli
from kcse.foundation.digests import content_digest
from kcse.experiments.methods.method import NLI_FLAG
from kcse.experiments.methods.method import OPTIMIZER_FLAG
from kcse.experiments.methods.method import Flag
from kcse.experiments.methods.method import Method
from kcse.experiments.methods.method import PaperSetting
from kcse.experiments.methods.method import fit
from kcse.experiments.methods.method import script_optimizer
from kcse.layers.view_specs import CONSERT_SCRIPT_VIEWS
from kcse.layers.view_specs import split_view
from kcse.layers.view_specs import view_from_spec

# The BibTeX of yym6472/ConSERT's README (its abstract left out).
CONSERT_CITATION = """@inproceedings{yan-etal-2021-consert,
    title = "{C}on{SERT}: A Contrastive Framework for Self-Supervised Sentence Representation Transfer",
    author = "Yan, Yuanmeng and Li, Rumei and Wang, Sirui and Zhang, Fuzheng and Wu, Wei and Xu, Weiran",
    booktitle = "Proceedings of the 59th Annual Meeting of the Association for Computational Linguistics and the 11th International Joint Conference on Natural Language Processing (Volume 1: Long Papers)",
    month = aug,
    year = "2021",
    address = "Online",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/2021.acl-long.393",
    doi = "10.18653/v1/2021.acl-long.393",
    pages = "5065--5075",
}"""

# The objective's modes (`kcse.objectives.ConSERT`), then ConSERT's two-stage
# ones: a supervised stage, then `unsup` with the same encoder.
MODES = ("unsup", "sup", "joint", "sup-unsup", "joint-unsup")
# `--training-pooling`: a pooling of `kcse.layers.SentencePooling`, or "row",
# the grid row's (the scoring pooling).
TRAINING_POOLINGS = ("last_avg", "last2avg", "first_last_avg", "cls", "max", "row")

# ConSERT's settings, each from the file of yym6472/ConSERT named, or from
# the paper (Yan et al., ACL 2021; seeds 000, its slides, and 004, its
# translation), the one place the recipes, `kcse train`, the flags and the
# ablations read them from.
UNSUP_SCRIPTS = "scripts/chinese/unsup-consert-base-*.sh"
PAPER_SETTINGS = {
    "scoring_pooling": PaperSetting(
        "last2avg", "main.py reports the mean of the last two layers "
        "(eval_*_unsup(..., last2avg=True))"),
    "training_pooling": PaperSetting(
        "last_avg", "main.py trains with models.Pooling(pooling_mode_mean_tokens=True)"),
    "temperature": PaperSetting(0.1, "--temperature 0.1 in every script under scripts/"),
    "contrastive_weight": PaperSetting(
        0.15, "α, --cl_rate 0.15 in ConSERT's scripts, on its NT-Xent (the two "
        "directions summed) in every contrastive stage"),
    "optimizer": PaperSetting(
        "adamw", "main.py: transformers.AdamW (eps 1e-6, correct_bias False) at "
        "WarmupLinear, through sentence-transformers' fit"),
    "learning_rate": PaperSetting(5e-7, f"{UNSUP_SCRIPTS}: --learning_rate 5e-7"),
    "nli_learning_rate": PaperSetting(
        2e-5, "the NLI stage, one epoch: main.py's --learning_rate 2e-5 and "
        "--num_epochs 1, which scripts/sup-consert-joint-base.sh keeps"),
    "batch_size": PaperSetting(96, f"{UNSUP_SCRIPTS}: --batch_size 96"),
    "epochs": PaperSetting(
        1, "Su's protocol, 1 epoch; ConSERT's scripts train 10 (STS-B 100) with "
        "early stopping on valid every 20 steps, which --protocol clean --epochs 10 "
        "--eval-every 20 approaches"),
    "hidden_dropout": PaperSetting(0.1, f"BERT's: {UNSUP_SCRIPTS} have no --no_dropout"),
    "max_length": PaperSetting(64, f"{UNSUP_SCRIPTS}: --max_seq_length 64"),
    "long_max_length": PaperSetting(
        64, "scripts/chinese/unsup-consert-base-pawsx.sh: --max_seq_length 64"),
    "views": PaperSetting(
        CONSERT_SCRIPT_VIEWS,
        f"by stage: unsup feature_cutoff:0.2,shuffle ({UNSUP_SCRIPTS}); joint "
        "none,token_cutoff:0.1 (sup-consert-joint-base.sh); the unsup stage of "
        "sup-unsup none,feature_cutoff:0.1 and of joint-unsup none,shuffle "
        "(sup-consert-{sup,joint}-unsup-base.sh)"),
    "nli_max_square": PaperSetting(
        True, "the NLI head's features include max(r1, r2)²: "
        "--concatenation_sent_max_square in sup-consert-*.sh (the paper's eq. 2 and "
        "SBERT's: (r1, r2, |r1 − r2|))"),
    # The ablations (`recipes/consert_ablations.py`).
    "ablation_views": PaperSetting(
        ("none", "shuffle", "token_cutoff:0.15", "feature_cutoff:0.2", "dropout:0.2"),
        "Figure 5, every pair of data augmentations, at the rates of §3.2 Data "
        "Augmentation Strategies as the seed 000 slides give them: token cutoff "
        "p=0.15, feature cutoff p=0.2, dropout probability 0.2"),
    "ablation_temperatures": PaperSetting(
        (0.01, 0.05, 0.1, 0.2, 0.5),
        "Figure 7, NT-Xent's temperature (its caption, seed 000: best at 0.1; the "
        "seeds do not hold the temperatures it plots, so these are kcse's, around 0.1)"),
    "ablation_batch_sizes": PaperSetting((16, 48, 96, 192, 288), "Table 4, batch sizes"),
}


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

    Every default is ConSERT's, in `PAPER_SETTINGS` with its source in
    yym6472/ConSERT (temperature, batch, length and learning rate of the
    contrastive stage; the NLI stage's rate; α; views by stage; the
    poolings). Every stage trains with `training_pooling` over the
    encoder's backbone, and the encoder, with its own pooling, is scored.
    Every stage trains as `main.py` does, with transformers' AdamW (eps
    1e-6, `correct_bias=False`, weight decay 0.01 but on biases and
    LayerNorm, gradients clipped to norm 1) at a linear warm-up over the
    first ceil(10%) of the stage's steps, then a linear decay to 0
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
    citation = CONSERT_CITATION
    paper_settings = PAPER_SETTINGS
    flag_group = "ConSERT"
    flags = (
        Flag("--views", type=two_views,
             help="two views for every contrastive stage: none, "
             "shuffle, token_cutoff:R, feature_cutoff:R, "
             "span_cutoff:R, dropout:R, adversarial:NORM (default: "
             "ConSERT's scripts' " + PAPER_SETTINGS["views"].source + ")"),
        Flag("--mode", choices=MODES, default="unsup",
             help="the stages: unsup (contrastive on the task's sentences), sup "
             "(NLI), joint (both at once), sup-unsup and joint-unsup (then "
             "contrastive); the supervised ones need --nli"),
        Flag("--contrastive-weight", type=arguments.non_negative_number,
             default=PAPER_SETTINGS["contrastive_weight"].value,
             help="α, ConSERT's cl_rate " + PAPER_SETTINGS["contrastive_weight"].help),
        Flag("--nli-learning-rate", type=arguments.positive_number,
             default=PAPER_SETTINGS["nli_learning_rate"].value,
             help="learning rate of the NLI stage "
             + PAPER_SETTINGS["nli_learning_rate"].help),
        OPTIMIZER_FLAG,
        Flag("--training-pooling", choices=TRAINING_POOLINGS,
             default=PAPER_SETTINGS["training_pooling"].value,
             help="the pooling every stage trains with; the grid row's pooling "
             "scores; row: train with the row's pooling (kcse's before) "
             + PAPER_SETTINGS["training_pooling"].help),
        Flag("--nli-max-square", action=argparse.BooleanOptionalAction,
             default=PAPER_SETTINGS["nli_max_square"].value,
             help="--no-nli-max-square: (r1, r2, |r1 − r2|) "
             + PAPER_SETTINGS["nli_max_square"].help),
        NLI_FLAG,
    )

    def __init__(self, views=None, mode="unsup", nli=None,
                 contrastive_weight=PAPER_SETTINGS["contrastive_weight"].value,
                 nli_learning_rate=PAPER_SETTINGS["nli_learning_rate"].value,
                 optimizer=PAPER_SETTINGS["optimizer"].value,
                 training_pooling=PAPER_SETTINGS["training_pooling"].value,
                 max_square=PAPER_SETTINGS["nli_max_square"].value, rematerialize=False):
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
        adversarial = [view for view in args.views or () if split_view(view)[0] == "adversarial"]
        if adversarial and args.mode != "joint":
            # --views sets every stage's views: an unsup stage has no NLI loss.
            raise arguments.UsageError(
                f"--views {','.join(args.views)}: the adversarial view takes the gradient "
                f"of the NLI loss, which only --mode joint has (not --mode {args.mode}): give "
                "--mode joint --nli FILE, or other views")
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
        script_views = PAPER_SETTINGS["views"].value
        supervised, _, then = self.mode.partition("-")
        stages = {}
        if supervised == "joint":
            stages["nli"] = script_views["joint"]
        if supervised == "unsup" or then == "unsup":
            stages["unsup"] = script_views[self.mode]
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
        if self.training_pooling in ("row", encoder.pooling):
            return encoder
        return encoder.with_changes(pooling=self.training_pooling, whitening=None)

    def train(self, encoder, data, protocol, task, seed, prefix, callbacks=()):
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
                self.nli.labels, nli_protocol,
                optimizer=self.optimizer(nli_protocol, len(self.nli)))
            count += len(self.nli)
        if supervised == "unsup" or then == "unsup":
            count += super().train(encoder, data, protocol, task, seed, prefix, callbacks)
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
