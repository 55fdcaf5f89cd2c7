"""IS-BERT (Zhang et al., EMNLP 2020): a CNN over BERT's tokens, trained on mutual information.

The unsupervised baseline of ConSERT's and SG-OPT's tables ("IS-BERT-NLI":
trained on NLI sentences without their labels). A CNN (three 1-D
convolutions of widths 1, 3 and 5, 256 features each) over the last
layer's token states gives local features, their mean the sentence
vector; `kcse.ISBERT` maximises the Jensen–Shannon estimate of the mutual
information between the two. The CNN is drawn anew from each seed and
stays in the trained encoder (its `token_layer`), which encodes and
exports (SavedModel, ONNX) with it.
"""

from kcse.data.nli import read_nli
from kcse.experiments.methods.method import NLI_FLAG
from kcse.experiments.methods.method import OPTIMIZER_FLAG
from kcse.experiments.methods.method import Method
from kcse.experiments.methods.method import PaperSetting
from kcse.experiments.methods.method import script_optimizer
from kcse.foundation.digests import content_digest

# The BibTeX of the paper, as the ACL Anthology gives it.
ISBERT_CITATION = """@inproceedings{zhang-etal-2020-unsupervised,
    title = "An Unsupervised Sentence Embedding Method by Mutual Information Maximization",
    author = "Zhang, Yan and He, Ruidan and Liu, Zuozhu and Lim, Kwan Hui and Bing, Lidong",
    booktitle = "Proceedings of the 2020 Conference on Empirical Methods in Natural Language Processing (EMNLP)",
    year = "2020",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/2020.emnlp-main.124",
}"""

CODE = "yanzhangnlp/IS-BERT"
SCRIPT = f"{CODE} examples/training/nli/unsupervised_training_nli.py"
FIT = f"{CODE} SentenceTransformer.fit's defaults"
PAPER_SETTINGS = {
    "scoring_pooling": PaperSetting(
        "last_avg", f"{SCRIPT}: models.Pooling(pooling_mode_mean_tokens=True) over the "
        "CNN's features"),
    "training_pooling": PaperSetting("row", "the pooling it scores, over the CNN's features"),
    "cnn": PaperSetting(
        "256x(1,3,5)", f"{CODE} models/CNN.py: out_channels 256, kernel_sizes [1, 3, 5], "
        "no activation"),
    "optimizer": PaperSetting(
        "adamw", f"{FIT}: transformers.AdamW (eps 1e-7, correct_bias False, weight decay "
        "0.01, gradients clipped to norm 1) at WarmupLinear, 10% warm-up ({SCRIPT})"),
    "learning_rate": PaperSetting(2e-6, f"{FIT}: lr 2e-6"),
    "adam_epsilon": PaperSetting(1e-7, f"{FIT}: eps 1e-7"),
    "batch_size": PaperSetting(32, f"{SCRIPT}: train_batch_size 32"),
    "epochs": PaperSetting(
        1, f"{SCRIPT}: num_epochs 1 (STS-B dev every 1000 steps, the best kept: "
        "--protocol clean --eval-every 1000 approaches it)"),
    "hidden_dropout": PaperSetting(0.1, "BERT's (the script trains it as loaded)"),
    "max_length": PaperSetting(128, f"{CODE} models/Transformer.py: max_seq_length 128"),
    "long_max_length": PaperSetting(128, f"{CODE} models/Transformer.py: max_seq_length 128"),
    "training_data": PaperSetting(
        "the task's sentences", f"Su's protocol (the paper's IS-BERT-NLI row: the NLI "
        f"sentences without labels, {SCRIPT}'s nli_sentences.train.gz: --nli FILE)"),
}
CNN_FILTERS = 256
CNN_KERNEL_SIZES = (1, 3, 5)


class ISBERTMethod(Method):
    """IS-BERT's CNN and mutual-information loss (`kcse.ISBERT`) on
    unlabelled sentences: the task's, or every sentence of `nli` (an
    NLI file's premises and hypotheses once each, labels unread: the
    paper's IS-BERT-NLI).

    Args:
        nli: `kcse.data.NLIPairs` or None.
        optimizer: "adamw" (the authors' fit) or "adam".
    """

    name = "is_bert"
    title = "IS-BERT"
    citation = ISBERT_CITATION
    paper_settings = PAPER_SETTINGS
    flag_group = "IS-BERT"
    flags = (NLI_FLAG, OPTIMIZER_FLAG)

    def __init__(self, nli=None, optimizer=PAPER_SETTINGS["optimizer"].value,
                 rematerialize=False):
        super().__init__(rematerialize)
        self.nli = nli
        self.optimizer_name = optimizer

    @classmethod
    def from_args(cls, args, rematerialize=False):
        return cls(read_nli(args.nli) if args.nli else None, args.optimizer, rematerialize)

    @classmethod
    def trains_on_sentences(cls, args):
        return args.nli is None

    def encoder_problem(self, encoder):
        from kcse.objectives.is_bert import pooling_problem

        problem = pooling_problem(encoder)  # The CNN: `encoder_to_train`'s.
        return None if problem is None else f"IS-BERT trains {problem}"

    def encoder_to_train(self, encoder, seed):
        """`encoder` with a CNN drawn from `seed` as its token layer (one it
        has already, a trained IS-BERT's, is kept)."""
        if encoder.token_layer is not None:
            return encoder
        return encoder.with_changes(token_layer=self._cnn(seed))

    @staticmethod
    def _cnn(seed):
        from kcse.layers.token_convolution import TokenConvolution

        return TokenConvolution(CNN_FILTERS, CNN_KERNEL_SIZES, seed=seed)

    def missing_training_data(self, data, protocol):
        return None if self.nli is not None else super().missing_training_data(data, protocol)

    def training_data(self, data, protocol, task, seed, prefix):
        if self.nli is None:
            return super().training_data(data, protocol, task, seed, prefix)
        sentences = dict.fromkeys([*self.nli.sentences1, *self.nli.sentences2])
        return [prefix + s for s in sentences], None

    def objective(self, encoder, protocol):
        from kcse.objectives.is_bert import ISBERT

        return ISBERT(encoder, rematerialize=self.rematerialize)

    def optimizer(self, protocol, samples):
        return script_optimizer(self.optimizer_name, protocol, samples,
                                epsilon=PAPER_SETTINGS["adam_epsilon"].value)

    def settings(self):
        settings = super().settings() | {"optimizer": self.optimizer_name}
        if self.nli is not None:
            settings |= {
                "nli": getattr(self.nli, "source", None),
                "nli_digest": content_digest([self.nli.sentences1, self.nli.sentences2]),
            }
        return settings
