"""SG-OPT (Kim et al., 2021): self-guided contrastive learning."""

import argparse

from kcse.foundation import arguments
from kcse.experiments.methods.method import OPTIMIZER_FLAG
from kcse.experiments.methods.method import Flag
from kcse.experiments.methods.method import Method
from kcse.experiments.methods.method import PaperSetting
from kcse.experiments.methods.method import script_optimizer
from kcse.layers.pooling_rules import PIVOT_POOLINGS
from kcse.losses.self_guided_variants import VARIANTS

# The BibTeX of galsang/SG-BERT's README, its title, authors, venue, year and link.
SG_OPT_CITATION = """@inproceedings{kim-etal-2021-self,
    title = "Self-Guided Contrastive Learning for {BERT} Sentence Representations",
    author = "Kim, Taeuk and Yoo, Kang Min and Lee, Sang-goo",
    booktitle = "Proceedings of the 59th Annual Meeting of the Association for Computational Linguistics and the 11th International Joint Conference on Natural Language Processing (Volume 1: Long Papers)",
    year = "2021",
    url = "https://aclanthology.org/2021.acl-long.197",
}"""


# SG-OPT (Kim et al., ACL 2021; seed 001, its slides) as galsang/SG-BERT
# runs it, each setting with its source.
SG_BERT = "galsang/SG-BERT training.py"
PAPER_SETTINGS = {
    "scoring_pooling": PaperSetting(
        "P1", "SG-OPT's sentence vector: BERT_T's [CLS], in training and scoring"),
    "training_pooling": PaperSetting("row", "the pooling it scores, [CLS]"),
    "temperature": PaperSetting(
        0.01, "τ = 0.01 (seed 001: BERT-base + SG-OPT (τ = 0.01, λ = 0.1))"),
    "regularization": PaperSetting(0.1, "λ = 0.1 on Σ‖θ_T − θ_F‖² (seed 001)"),
    "projection_dim": PaperSetting(
        4096, "the projection head Linear(768→4096)–GELU–Linear(4096→4096)–GELU "
        "(galsang/SG-BERT loss.py)"),
    "optimizer": PaperSetting(
        "adamw", f"{SG_BERT}: transformers.AdamW, betas (0.9, 0.9), correct_bias True, "
        "at WarmupLinear through sentence-transformers' fit"),
    "learning_rate": PaperSetting(5e-5, SG_BERT),
    "batch_size": PaperSetting(16, SG_BERT),
    "epochs": PaperSetting(1, "Su's protocol, 1 epoch"),
    "hidden_dropout": PaperSetting(0.1, f"BERT's, kept by {SG_BERT}"),
    # The ablation of seed 001's table (`recipes/sweep.py --method sg_opt`).
    "ablation_temperatures": PaperSetting(
        (0.001, 0.01, 0.1), "seed 001's ablation: τ = 0.01, + τ = 0.1, + τ = 0.001"),
    "ablation_regularizations": PaperSetting(
        (0.0, 0.1, 1.0), "seed 001's ablation: λ = 0.1, + λ = 0.0, + λ = 1.0"),
    "ablation_projection_head": PaperSetting(
        (True, False), "seed 001's ablation: − Projection head (f)"),
}


def layer_range(text):
    """An argparse type: `FIRST,STOP` with 0 <= FIRST < STOP, as a tuple."""
    parts = arguments.comma_list(text)
    try:
        first, stop = (int(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected FIRST,STOP (two whole numbers); got {text!r}") from None
    if not 0 <= first < stop:
        raise argparse.ArgumentTypeError(
            f"expected 0 <= FIRST < STOP (layer 0 is the embeddings); got {text!r}")
    return first, stop


class SGOptMethod(Method):
    """SG-OPT with the protocol's temperature (SG-OPT's: `PAPER_SETTINGS`).

    Trains as galsang/SG-BERT's `training.py` does: transformers' AdamW
    with betas (0.9, 0.9), `correct_bias=True`, weight decay 0.01 but on
    biases and LayerNorm (`fit`'s default; the script's `weight_decay` 0 is
    overridden by `fit`'s parameter groups), gradients clipped to norm 1,
    a linear warm-up over the first ceil(10%) of the steps, then a linear
    decay to 0 (`kcse.layers.adam_weight_decay.sentence_transformers_adamw`);
    `optimizer="adam"`: Keras' Adam at the constant rate.

    Args:
        projection_dim: width of the projection head.
        regularization: λ on Σ‖θ_T − θ_F‖².
        variant, pivot_pooling, pivot_layers, projection: the ablation's
            choices, as `kcse.SGOpt` takes them.
        optimizer: "adamw" (SG-BERT's) or "adam".
    """

    name = "sg_opt"
    title = "SG-OPT"
    citation = SG_OPT_CITATION
    paper_settings = PAPER_SETTINGS
    flag_group = "SG-OPT"
    flags = (
        Flag("--projection-dim", type=arguments.positive_integer,
             default=PAPER_SETTINGS["projection_dim"].value,
             help="width of the projection head " + PAPER_SETTINGS["projection_dim"].help),
        Flag("--regularization", type=arguments.non_negative_number,
             default=PAPER_SETTINGS["regularization"].value,
             help="λ " + PAPER_SETTINGS["regularization"].help),
        Flag("--sg-loss", choices=VARIANTS, default="opt3",
             help="SG-OPT's loss, opt3, or one of its ablation's: opt2, opt1, "
             "base (SG); these three compare each sentence with one layer's pivot, "
             "drawn uniformly each step"),
        Flag("--pivot-pooling", choices=PIVOT_POOLINGS, default="mean",
             help="pooling of a layer's tokens into a pivot (mean)"),
        Flag("--pivot-layers", type=layer_range, metavar="FIRST,STOP",
             help="only the layers FIRST..STOP-1 give pivots, 0 being the "
             "embeddings (default: all; the authors' lmin, lmax)"),
        Flag("--projection-head", action=argparse.BooleanOptionalAction, default=True,
             help="pass the vectors through the projection head (default: yes)"),
        OPTIMIZER_FLAG,
    )

    # SG-BERT's training.py: optimizer_params={'correct_bias': True, 'betas': (0.9, 0.9)}.
    ADAMW = {"beta_2": 0.9, "bias_correction": True}

    def __init__(self, projection_dim=PAPER_SETTINGS["projection_dim"].value,
                 regularization=PAPER_SETTINGS["regularization"].value, variant="opt3",
                 pivot_pooling="mean", pivot_layers=None, projection=True,
                 optimizer=PAPER_SETTINGS["optimizer"].value, rematerialize=False):
        super().__init__(rematerialize)
        self.projection_dim = projection_dim
        self.regularization = regularization
        self.variant = variant
        self.pivot_pooling = pivot_pooling
        self.pivot_layers = None if pivot_layers is None else tuple(pivot_layers)
        self.projection = projection
        self.optimizer_name = optimizer

    @classmethod
    def from_args(cls, args, rematerialize=False):
        return cls(args.projection_dim, args.regularization, args.sg_loss,
                   args.pivot_pooling, args.pivot_layers, args.projection_head,
                   args.optimizer, rematerialize)

    def encoder_problem(self, encoder):
        layers = encoder.backbone.num_layers + 1
        if self.pivot_layers is not None and self.pivot_layers[1] > layers:
            first, stop = self.pivot_layers
            return (f"--pivot-layers {first},{stop}: the model has {layers} layers "
                    f"(the embeddings and {layers - 1} blocks), so STOP is at most {layers}")
        return None

    def objective(self, encoder, protocol):
        from kcse.objectives.sg_opt import SGOpt

        return SGOpt(encoder, self.projection_dim, protocol.temperature,
                     self.regularization, variant=self.variant,
                     pivot_pooling=self.pivot_pooling, pivot_layers=self.pivot_layers,
                     projection=self.projection, rematerialize=self.rematerialize)

    def optimizer(self, protocol, samples):
        return script_optimizer(self.optimizer_name, protocol, samples, **self.ADAMW)

    def settings(self):
        # Adam's cells keep the key they had before the optimizer was a choice.
        optimizer = {} if self.optimizer_name == "adam" else {"optimizer": self.optimizer_name}
        ablation = {  # Only where not SG-OPT's: cells before these options stay valid.
            name: value for name, value, default in (
                ("sg_loss", self.variant, "opt3"),
                ("pivot_pooling", self.pivot_pooling, "mean"),
                ("pivot_layers", self.pivot_layers and list(self.pivot_layers), None),
                ("projection_head", self.projection, True),
            ) if value != default
        }
        return super().settings() | {
            "projection_dim": self.projection_dim,
            "regularization": self.regularization,
        } | optimizer | ablation
