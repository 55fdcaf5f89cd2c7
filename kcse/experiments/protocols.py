"""Training and whitening protocols of the Chinese SimCSE comparison."""

import dataclasses
import random

SPLITS = ("train", "valid", "test")
# The training "split" of `--train-file`: the data's entry holding the
# file's `kcse.data.SentenceFile`, which trains instead of the task's splits.
TRAIN_FILE = "train_file"


@dataclasses.dataclass(frozen=True)
class Protocol:
    """Which sentences train and whiten, and the hyperparameters.

    Attributes:
        name: `"su"` or `"clean"` (or your own).
        training_splits: splits whose sentences (both sides, no labels)
            SimCSE trains on.
        whitening_splits: splits whose un-tuned vectors give the whitening
            statistics.
        max_sentences: keep this many training sentences after shuffling
            (None: all). Su: 10,000, except PAWSX (all).
        select_on_valid: score the valid split during training and keep the
            best step's weights (the test split is reported).
        trained_splits: splits the trained encoder (column c) is scored on
            (default: test, the reported split); raw and whitening (a, b)
            are scored on every split, whose vectors they need anyway.
            Every split added costs an encoding pass per cell.
        epochs, batch_size, learning_rate, hidden_dropout, temperature,
        negatives, max_length: SimCSE training settings; `max_length` is
        the token length (PAWSX: `long_max_length`).
        train_file_digest: the content digest of `--train-file`'s sentences
            (`SentenceFile.digest`) when they train (`training_splits` is
            `(TRAIN_FILE,)`), else None; in a result's settings only when
            set (`protocol_settings`).
    """

    name: str
    training_splits: tuple
    whitening_splits: tuple
    max_sentences: int = 10_000
    select_on_valid: bool = False
    trained_splits: tuple = ("test",)
    epochs: int = 1
    batch_size: int = 64
    learning_rate: float = 1e-5
    hidden_dropout: float = 0.3
    temperature: float = 0.05
    negatives: str = "both_views"
    max_length: int = 64
    long_max_length: int = 128
    eval_every: int = 50
    train_file_digest: str = None

    def sequence_length(self, task):
        """PAWSX's long sentence pairs get `long_max_length` (Su: 128)."""
        return self.long_max_length if task == "PAWSX" else self.max_length

    def sentence_limit(self, task):
        """Su keeps every PAWSX sentence and 10,000 of the other tasks';
        `--train-file`'s sentences are limited by `max_sentences` only."""
        if task == "PAWSX" and self.train_file_digest is None:
            return None
        return self.max_sentences


PROTOCOLS = {
    # Su Jianlin's bojone/SimCSE: sentences of all three splits (test
    # included, unlabelled) train SimCSE and give the whitening statistics.
    "su": Protocol(
        name="su",
        training_splits=SPLITS,
        whitening_splits=SPLITS,
    ),
    # Leak-free: only the train split trains and whitens; the best step on
    # valid is kept and test is reported.
    "clean": Protocol(
        name="clean",
        training_splits=("train",),
        whitening_splits=("train",),
        select_on_valid=True,
    ),
}


# The multilingual STS-B table's own protocol (`recipes/multilingual_sts.py`):
# every stsb-multi-mt language has a dev split, which gives the whitening
# statistics (no test sentence is used); column c trains on the train
# split's sentences where the language has one (PhilipMay/stsb-multi-mt:
# en and zh in the bundled copy), without valid selection.
STSB_PROTOCOL = Protocol(
    name="stsb",
    training_splits=("train",),
    whitening_splits=("valid",),
)


def split_sentences(data, splits):
    """Both sides of every pair of `splits`, in file order (missing splits:
    None in `data`, are left out)."""
    return [sentence for split in splits if data.get(split) is not None
            for sentence in data[split].sentences()]


def training_sentences(data, protocol, task, seed):
    """SimCSE's training sentences for `task` under `protocol`.

    Both sides of every pair of the protocol's training splits, shuffled
    with `seed`, then the first `protocol.sentence_limit(task)` kept (Su
    draws from all pairs, duplicates included, exactly so).
    """
    sentences = split_sentences(data, protocol.training_splits)
    random.Random(seed).shuffle(sentences)
    limit = protocol.sentence_limit(task)
    return sentences if limit is None else sentences[:limit]


def protocol_settings(protocol):
    """`protocol`'s fields as a result's settings: `train_file_digest` only
    when a file trains, so that results from before `--train-file` keep
    their identity."""
    settings = dataclasses.asdict(protocol)
    if settings["train_file_digest"] is None:
        del settings["train_file_digest"]
    return settings


def with_train_file(protocol, sentence_file):
    """`protocol` training on `sentence_file` (a `kcse.data.SentenceFile`,
    put in the data as `data[TRAIN_FILE]`) instead of the task's splits."""
    return dataclasses.replace(protocol, training_splits=(TRAIN_FILE,),
                               train_file_digest=sentence_file.digest)


def train_file_line(sentence_file, protocol):
    """What `--train-file` trains on, in words: how many of its sentences."""
    count, limit = len(sentence_file), protocol.max_sentences
    blank = len(sentence_file.blank_lines)
    used = (f"all {count}" if limit is None or limit >= count else f"{limit} of {count}")
    return (f"training sentences: {used} of {sentence_file.source} (digest "
            f"{sentence_file.digest}"
            + (f"; {blank} blank line{'s' * (blank != 1)} left out" if blank else "")
            + (f"; --sentences {limit} asks for more than the file has"
               if limit is not None and limit > count else "") + ")")


def with_overrides(protocol, **overrides):
    """`protocol` with the given fields replaced (None values are ignored)."""
    changes = {k: v for k, v in overrides.items() if v is not None}
    return dataclasses.replace(protocol, **changes)


def protocol_from_args(args, method):
    """The protocol `args.protocol` names, with `method`'s paper settings
    (`protocol_defaults`), then the user's flags (None: not given);
    `--train-file`'s sentences (`args.train_sentences`) train when given,
    `--sentences all` keeps every training sentence."""
    base = STSB_PROTOCOL if args.protocol == STSB_PROTOCOL.name else PROTOCOLS[args.protocol]
    protocol = with_overrides(base, **method.protocol_defaults)
    if getattr(args, "train_sentences", None) is not None:  # --train-file, read.
        protocol = with_train_file(protocol, args.train_sentences)
    if args.sentences == "all":
        protocol = dataclasses.replace(protocol, max_sentences=None)
    return with_overrides(
        protocol,
        max_sentences=None if args.sentences == "all" else args.sentences,
        epochs=args.epochs,
        batch_size=args.batch_size,
        learning_rate=args.learning_rate,
        hidden_dropout=args.dropout,
        temperature=args.temperature,
        negatives=args.negatives,
        max_length=args.max_length,
        long_max_length=args.long_max_length,
        eval_every=args.eval_every,
        select_on_valid=args.select_on_valid,
        trained_splits=tuple(getattr(args, "trained_splits", None) or ()) or None,
    )
