"""Unsupervised SimCSE (Su's column c), optionally on CLEAR's text views."""

import argparse
import pathlib

from kcse.foundation import arguments
from kcse.data.synonym_table import read_synonym_table
from kcse.data.text_view_specs import text_view_from_spec
from kcse.data.text_view_specs import text_view_pairs
from kcse.foundation.digests import content_digest
from kcse.experiments.methods.method import Flag
from kcse.experiments.methods.method import Method
from kcse.experiments.methods.method import PaperSetting
from kcse.experiments.protocols import training_sentences

# The BibTeX of princeton-nlp/SimCSE's README.
SIMCSE_CITATION = """@inproceedings{gao2021simcse,
   title={{SimCSE}: Simple Contrastive Learning of Sentence Embeddings},
   author={Gao, Tianyu and Yao, Xingcheng and Chen, Danqi},
   booktitle={Empirical Methods in Natural Language Processing (EMNLP)},
   year={2021}
}"""


# Su's unsupervised SimCSE (bojone/SimCSE, "SimCSE in Chinese", kexue.fm
# 8348, seed 002), the column c of his table, each setting with its source.
SU = "bojone/SimCSE (Su, kexue.fm 8348, seed 002)"
PAPER_SETTINGS = {
    "scoring_pooling": PaperSetting(
        None, f"every row of the grid: {SU} scores P1..P4 (the recipe's CPU default: "
        "P1,P3; kcse train: last_avg, P3)"),
    "training_pooling": PaperSetting("row", f"the pooling it scores ({SU})"),
    "temperature": PaperSetting(0.05, f"{SU}: scale 20"),
    "negatives": PaperSetting(
        "both_views", f"{SU}: the 2N x 2N cosines, diagonal masked (2N-2 negatives)"),
    "optimizer": PaperSetting("adam", f"{SU}: Adam at a constant rate"),
    "learning_rate": PaperSetting(1e-5, SU),
    "batch_size": PaperSetting(64, f"{SU}: 64 sentences, each twice"),
    "epochs": PaperSetting(1, SU),
    "hidden_dropout": PaperSetting(0.3, f"{SU}: his best dropout (the paper's 0.1)"),
    "max_length": PaperSetting(64, SU),
    "long_max_length": PaperSetting(128, f"{SU}: PAWSX"),
    "views": PaperSetting(
        None, "the sentence twice, dropout making the two views (SimCSE, Gao et al. 2021)"),
    "mlm_weight": PaperSetting(
        0.0, f"none in {SU}; princeton-nlp/SimCSE train.py --do_mlm --mlm_weight 0.1 "
        "is an option there too"),
    # The ablations (`recipes/sweep.py --method simcse`).
    "ablation_dropouts": PaperSetting(
        ("0", "0.05", "0.1", "0.15", "0.2", "0.3", "fixed:0.1"),
        "the dropout rates of Gao et al. 2021's Table 3 as seed 003 reports it (no dropout, "
        "\"fixed 0.1\": one dropout mask for both views, --same-dropout-mask) and of its "
        "reproduction there (0.2, 0.3)"),
    "ablation_batch_sizes": PaperSetting(
        (32, 64, 128, 256, 512), "the batch sizes of seed 003's reproduction (best 256)"),
}


def two_text_views(text):
    """An argparse type: two CLEAR text views (`kcse.data.text_view_from_spec`)."""
    views = arguments.comma_list(text)
    if len(views) != 2:
        raise argparse.ArgumentTypeError(
            f"--text-views takes two views; got {len(views)} in {text!r}")
    for view in views:
        try:
            # A synonym table is read later (--synonyms); any one checks the spec.
            text_view_from_spec(view, synonyms={"_": ["_"]})
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from None
    return views


def read_synonyms(path, views):
    """The synonym table of `--synonyms`, read and checked before any work.

    `kcse.data.read_synonym_table` reads it; the synonym_substitution views
    of `views` take it (`text_view_from_spec`). An unreadable file, a bad
    line or a table without any synonym is a UsageError naming the file
    (and line).
    """
    try:
        table = read_synonym_table(path)
        substitutions = [text_view_from_spec(view, table) for view in views
                         if view.startswith("synonym_substitution")]
    except OSError as error:
        raise arguments.UsageError(
            f"--synonyms {path}: {error.strerror or error}") from None
    except ValueError as error:  # MalformedLineError names the file and line.
        text = " ".join(str(error).split())
        raise arguments.UsageError(
            f"--synonyms {text if str(path) in text else f'{path}: {text}'}") from None
    if not any(view.synonyms for view in substitutions):
        raise arguments.UsageError(
            f"--synonyms {path}: no word with a synonym; give a line per word, "
            "word<TAB>synonym synonym ...")
    return table


class SimCSEMethod(Method):
    """Unsupervised SimCSE with the protocol's temperature and negatives.

    With `text_views` (two specs of `kcse.data.text_view_from_spec`, e.g.
    `("word_deletion:0.3", "reordering:0.3")`), each training sentence is
    replaced by CLEAR's two text views of it, drawn from the run's seed
    (`kcse.data.text_view_pairs`), and SimCSE contrasts the two views
    (dropout stays on); the prefix is added after the edit.
    `synonyms`: the table of `synonym_substitution`. `mlp_only_train`: the
    paper's MLP over the vectors in training only; `mlm_weight`: the weight
    of the auxiliary MLM loss, 0 for none (`kcse.SimCSE`).
    """

    name = "simcse"
    title = "SimCSE"
    citation = SIMCSE_CITATION
    paper_settings = PAPER_SETTINGS
    flag_group = "SimCSE"
    flags = (
        Flag("--text-views", type=two_text_views,
             help="train SimCSE on two text views of each sentence "
             "instead of the sentence twice (dropout stays on): "
             "word_deletion[:R], span_deletion[:R], reordering[:R[:PAIRS]], "
             "synonym_substitution[:R] (needs --synonyms); e.g. "
             "word_deletion:0.3,reordering:0.3 (Wu et al. 2020, CLEAR; "
             "Chinese is segmented with jieba)"),
        Flag("--synonyms", type=pathlib.Path,
             help="synonym table for synonym_substitution: a line "
             "per word, word<TAB>synonym synonym ..."),
        Flag("--mlp-only-train", action="store_true", default=False,
             help="pass the vectors through a new MLP (Dense + tanh) in training "
             "only; the trained encoder has none (princeton-nlp/SimCSE train.py "
             "--mlp_only_train, their unsupervised setting with P1: "
             "simcse/models.py MLPLayer, cl_forward)"),
        Flag("--same-dropout-mask", action="store_true", default=False,
             help="encode each sentence once and use it as both views: dropout on, one "
             "mask for the pair (Gao et al. 2021, Table 3's \"Fixed 0.1\" ablation)"),
        Flag("--mlm-weight", type=arguments.non_negative_number,
             default=PAPER_SETTINGS["mlm_weight"].value,
             help="add W x an MLM loss (15%% of the tokens, BERT's 80/10/10 masking; "
             "an MLM head whose decoder starts as an untied copy of the token "
             "embedding, as theirs; its Dense, LayerNorm and bias new, where they "
             "load the checkpoint's cls.predictions); 0 for none "
             "(--mlm_probability 0.15: OurDataCollatorWithPadding.mask_tokens, "
             "simcse/models.py cl_forward) " + PAPER_SETTINGS["mlm_weight"].help),
    )

    def __init__(self, text_views=None, synonyms=None, rematerialize=False,
                 mlp_only_train=False, mlm_weight=PAPER_SETTINGS["mlm_weight"].value,
                 same_dropout_mask=False):
        super().__init__(rematerialize)
        if same_dropout_mask and text_views is not None:
            raise ValueError("same_dropout_mask encodes one sentence once for both views; it "
                             "takes no text views.")
        self.mlp_only_train = mlp_only_train
        self.same_dropout_mask = same_dropout_mask
        self.mlm_weight = mlm_weight
        if text_views is not None:
            text_views = tuple(text_views)
            if len(text_views) != 2:
                raise ValueError(f"SimCSE takes two text views; got {list(text_views)}.")
            for view in text_views:
                text_view_from_spec(view, synonyms)  # Bad specs fail first.
            self.title = "SimCSE (" + " / ".join(text_views) + ")"
        self.text_views = text_views
        self.synonyms = synonyms

    @classmethod
    def check_arguments(cls, args):
        views = args.text_views or []
        substitutes = any(view.startswith("synonym_substitution") for view in views)
        if args.same_dropout_mask and args.text_views:
            raise arguments.UsageError("--same-dropout-mask encodes one sentence once for both "
                                       "views; it takes no --text-views")
        if substitutes and args.synonyms is None:
            raise arguments.UsageError("--text-views synonym_substitution needs --synonyms FILE")
        if args.synonyms is not None:
            if not substitutes:
                raise arguments.UsageError(
                    "--synonyms is used by the synonym_substitution text view only")
            arguments.check_input_file(args.synonyms, "--synonyms")
            args.synonym_table = read_synonyms(args.synonyms, views)

    @classmethod
    def from_args(cls, args, rematerialize=False):
        table = getattr(args, "synonym_table", None)  # Read by check_arguments.
        if table is None and args.synonyms:
            table = read_synonym_table(args.synonyms)
        return cls(args.text_views, table, rematerialize,
                   mlp_only_train=args.mlp_only_train, mlm_weight=args.mlm_weight,
                   same_dropout_mask=args.same_dropout_mask)

    def encoder_problem(self, encoder):
        if self.mlm_weight:
            from kcse.objectives.masked_lm import mlm_problem

            problem = mlm_problem(encoder)
            return problem and f"--mlm-weight {self.mlm_weight}: {problem}"
        return None

    def objective(self, encoder, protocol):
        from kcse.objectives.simcse import SimCSE

        return SimCSE(encoder, protocol.temperature, protocol.negatives,
                      mlp_only_train=self.mlp_only_train, mlm_weight=self.mlm_weight,
                      same_dropout_mask=self.same_dropout_mask,
                      rematerialize=self.rematerialize)

    def training_data(self, data, protocol, task, seed, prefix):
        if self.text_views is None:
            return super().training_data(data, protocol, task, seed, prefix)
        sentences = training_sentences(data, protocol, task, seed)
        views = text_view_pairs(sentences, *self.text_views, seed, self.synonyms)
        return tuple([prefix + s for s in column] for column in views), None

    def settings(self):
        # Each option only where it is on: cells from before it stay valid.
        settings = super().settings()
        if self.text_views is not None:
            settings |= {
                "text_views": list(self.text_views),
                "synonyms_digest": None if self.synonyms is None
                else content_digest(sorted(self.synonyms.items())),
            }
        if self.mlp_only_train:
            settings |= {"mlp_only_train": True}
        if self.mlm_weight:
            settings |= {"mlm_weight": self.mlm_weight}
        if self.same_dropout_mask:
            settings |= {"same_dropout_mask": True}
        return settings
