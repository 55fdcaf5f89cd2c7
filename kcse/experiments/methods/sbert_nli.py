"""SBERT-NLI (Reimers & Gurevych, 2019): the softmax classifier on NLI pairs.

The supervised baseline of ConSERT's and SG-OPT's tables: a siamese
encoder whose two sentence vectors u, v feed a classifier on
(u, v, |u − v|) trained with softmax cross-entropy on SNLI + MultiNLI
(sentence-transformers' `SoftmaxLoss`; kcse's `ConSERT(mode="sup",
max_square=False)`, whose NLI head is SBERT's), then scored with the
encoder alone.
"""

from kcse.data.nli import read_nli
from kcse.experiments.methods.method import NLI_FLAG
from kcse.experiments.methods.method import OPTIMIZER_FLAG
from kcse.experiments.methods.method import Method
from kcse.experiments.methods.method import PaperSetting
from kcse.experiments.methods.method import script_optimizer
from kcse.foundation import arguments
from kcse.foundation.digests import content_digest

# The BibTeX of UKPLab/sentence-transformers' README for the SBERT paper.
SBERT_CITATION = """@inproceedings{reimers-2019-sentence-bert,
    title = "Sentence-BERT: Sentence Embeddings using Siamese BERT-Networks",
    author = "Reimers, Nils and Gurevych, Iryna",
    booktitle = "Proceedings of the 2019 Conference on Empirical Methods in Natural Language Processing",
    month = "11",
    year = "2019",
    publisher = "Association for Computational Linguistics",
    url = "https://arxiv.org/abs/1908.10084",
}"""

PAPER = "Reimers & Gurevych 2019, §3 Training Details"
PAPER_SETTINGS = {
    "scoring_pooling": PaperSetting("last_avg", f"{PAPER}: MEAN, the default pooling strategy"),
    "training_pooling": PaperSetting(
        "row", "the pooling it scores (SBERT trains and encodes through one pooling)"),
    "optimizer": PaperSetting(
        "adamw", f"{PAPER}: Adam with a linear warm-up over 10% of the training data; "
        "sentence-transformers' fit, the paper's code: transformers.AdamW (eps 1e-6, "
        "correct_bias False, weight decay 0.01) at WarmupLinear"),
    "learning_rate": PaperSetting(2e-5, f"{PAPER}: learning rate 2e-5"),
    "batch_size": PaperSetting(16, f"{PAPER}: batch size 16"),
    "epochs": PaperSetting(1, f"{PAPER}: one epoch"),
    "hidden_dropout": PaperSetting(0.1, "BERT's (sentence-transformers trains it as loaded)"),
    "features": PaperSetting(
        "u,v,|u-v|", f"{PAPER}: softmax(W_t (u, v, |u − v|)), cross-entropy; "
        "SoftmaxLoss's concatenation_sent_rep and concatenation_sent_difference"),
}


class SBERTNLIMethod(Method):
    """SBERT's classification objective on NLI pairs (`nli`, required).

    Trains the encoder with `kcse.ConSERT(mode="sup", max_square=False)`:
    `kcse.layers.NLIClassifier` on (u, v, |u − v|) and softmax
    cross-entropy, dropped after training, with sentence-transformers'
    AdamW at WarmupLinear (`optimizer="adam"`: Keras' Adam at the
    constant rate). The task's own sentences are not trained on.

    Args:
        nli: `kcse.data.NLIPairs` (e.g. `read_nli` of an SNLI / CNSD file).
        optimizer: "adamw" (the paper's code) or "adam".
    """

    name = "sbert_nli"
    title = "SBERT-NLI"
    citation = SBERT_CITATION
    paper_settings = PAPER_SETTINGS
    flag_group = "SBERT-NLI"
    flags = (NLI_FLAG, OPTIMIZER_FLAG)

    def __init__(self, nli=None, optimizer=PAPER_SETTINGS["optimizer"].value,
                 rematerialize=False):
        super().__init__(rematerialize)
        if nli is None:
            raise ValueError("SBERT-NLI trains on NLI pairs: give nli.")
        self.nli = nli
        self.optimizer_name = optimizer

    @classmethod
    def check_arguments(cls, args):
        if args.nli is None:
            raise arguments.UsageError("--method sbert_nli trains on NLI pairs: give --nli FILE")

    @classmethod
    def from_args(cls, args, rematerialize=False):
        return cls(read_nli(args.nli), args.optimizer, rematerialize)

    @classmethod
    def trains_on_sentences(cls, args):
        return False  # The NLI pairs only.

    def missing_training_data(self, data, protocol):
        return None

    def objective(self, encoder, protocol):
        from kcse.objectives.consert import ConSERT

        return ConSERT(encoder, views=(None, None), mode="sup", max_square=False,
                       rematerialize=self.rematerialize)

    def training_data(self, data, protocol, task, seed, prefix):
        pairs = tuple([prefix + s for s in side]
                      for side in (self.nli.sentences1, self.nli.sentences2))
        return pairs, self.nli.labels

    def optimizer(self, protocol, samples):
        return script_optimizer(self.optimizer_name, protocol, samples)

    def settings(self):
        return super().settings() | {
            "optimizer": self.optimizer_name,
            "nli": getattr(self.nli, "source", None),
            "nli_digest": content_digest(
                [self.nli.sentences1, self.nli.sentences2, self.nli.labels]),
        }
