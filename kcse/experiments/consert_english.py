"""ConSERT's unsupervised English setting (`recipes/consert_english.py`).

yym6472/ConSERT `scripts/unsup-consert-base.sh` trains on the STS sets'
own sentences, without their labels (`main.py --train_data stssick
--no_pair`: `load_datasets(["sts12", ..., "sts16", "stsb", "sickr"],
need_label=False, use_all_unsupervised_texts=True)`, every split that
SentEval's `data/downstream` holds), with BERT's dropout off
(`--no_dropout`), then reports the English table. The rest is ConSERT's
method as the registry has it (`kcse.experiments.methods.ConSERTMethod`:
views feature_cutoff 0.2 and shuffle, NT-Xent at temperature 0.1 weighted
by 0.15, mean pooling in training, AdamW at WarmupLinear).
"""

from kcse.experiments.methods.method import PaperSetting
from kcse.experiments.protocols import Protocol

SCRIPT = "yym6472/ConSERT scripts/unsup-consert-base.sh"
ENGLISH_SETTINGS = {
    "hidden_dropout": PaperSetting(0.0, f"{SCRIPT}: --no_dropout (attention and hidden)"),
    "batch_size": PaperSetting(96, f"{SCRIPT}: --batch_size 96"),
    "max_length": PaperSetting(64, f"{SCRIPT}: --max_seq_length 64"),
    "learning_rate": PaperSetting(5e-7, f"{SCRIPT}: --learning_rate 0.0000005"),
    "epochs": PaperSetting(10, f"{SCRIPT}: --num_epochs 10"),
    "eval_every": PaperSetting(
        200, f"{SCRIPT}: --evaluation_steps 200 on STS-B dev, the best step kept"),
}
# Splits read for training sentences, each where the data_dir has it.
TRAINING_SPLITS = {"STS12": ("test",), "STS13": ("test",), "STS14": ("test",),
                   "STS15": ("test",), "STS16": ("test",),
                   "STS-B": ("train", "dev", "test"), "SICK-R": ("train", "dev", "test")}
SENTENCES = "sts_sentences"


class SentenceList:
    """Sentences standing in the data as a split does (`sentences()`)."""

    def __init__(self, sentences):
        self._sentences = list(sentences)

    def sentences(self):
        return list(self._sentences)


def english_protocol(max_sentences=None, **overrides):
    """The protocol of ConSERT's English setting: `ENGLISH_SETTINGS` (then
    `overrides`, None ignored), training on `SENTENCES` (the data's), the
    best step on valid (STS-B dev) kept."""
    settings = {name: setting.value for name, setting in ENGLISH_SETTINGS.items()}
    settings.update({name: value for name, value in overrides.items() if value is not None})
    return Protocol(name="consert-english", training_splits=(SENTENCES,),
                    whitening_splits=(), max_sentences=max_sentences, select_on_valid=True,
                    temperature=0.1, **settings)


def training_sets(data_dir, on_missing=None):
    """`{(set, split): pairs}` of every split of `TRAINING_SPLITS` found in
    `data_dir` (`kcse.data.read_english_sts`: kcse's layout or SentEval's);
    `on_missing(set, split)` is called for each one absent."""
    from kcse.data.english import read_english_sts

    found = {}
    for name, splits in TRAINING_SPLITS.items():
        for split in splits:
            try:
                found[name, split] = read_english_sts(data_dir, name, split)
            except FileNotFoundError:
                if on_missing is not None:
                    on_missing(name, split)
    return found


def english_data(found):
    """The data `train_once` takes: every sentence of `found` (both sides,
    pairs in order, duplicates kept, as ConSERT's `no_pair` samples) and
    STS-B dev as valid."""
    sentences = [sentence for pairs in found.values() for sentence in pairs.sentences()]
    return {SENTENCES: SentenceList(sentences), "valid": found["STS-B", "dev"]}
