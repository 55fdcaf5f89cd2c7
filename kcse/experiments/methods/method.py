"""`Method`: what a training method of column c declares, and how it trains.

A method is one file in this package and one line in its registry
(`kcse.experiments.methods.METHODS`). The file says, without importing
Keras, the method's name, its paper's settings (`paper_settings`: each a
`PaperSetting`, a value and its source), its own command-line flags
(`flags`, checked by `check_arguments` before TensorFlow starts) and how
the flags build it (`from_args`); at run time its `objective` wraps the
cell's encoder and `train` fits it on the data the protocol gives.

`paper_settings` is the one home of those numbers: the protocol's
settings among them (`PROTOCOL_SETTINGS`) become the method's
`protocol_defaults`, its scoring pooling the recipes' rows and `kcse
train`'s pooling, and the flags, the constructors and `--help` read the
rest from there.
"""

import dataclasses
import pathlib

from kcse.experiments.protocols import training_sentences


# The settings of `kcse.experiments.protocols.Protocol` a method's paper may
# set (applied to the protocol before the user's flags).
PROTOCOL_SETTINGS = ("epochs", "batch_size", "learning_rate", "hidden_dropout",
                     "temperature", "negatives", "max_length", "long_max_length")


@dataclasses.dataclass(frozen=True)
class PaperSetting:
    """One setting of a method's paper: its value and where it comes from.

    Example:
    ```python
    setting = PaperSetting(0.1, "yym6472/ConSERT scripts/*.sh: --temperature 0.1")
    setting.text  # "0.1: yym6472/ConSERT scripts/*.sh: --temperature 0.1"
    ```
    """

    value: object
    source: str

    @property
    def text(self):
        """The value, as a flag is written, and its source."""
        value = self.value
        if isinstance(value, (list, tuple)):
            value = ",".join(map(str, value))
        return f"{value}: {self.source}"

    @property
    def help(self):
        """The end of a flag's `--help`: its default and source (argparse
        formats help with %, so a literal % is written twice)."""
        return f"(default {self.text})".replace("%", "%%")


class Flag:
    """One command-line flag of a method: argparse's names and options.

    `input_file`: the value is a file read before any work, so its absence
    or unreadability is a usage error (`arguments.check_input_file`).

    Example:
    ```python
    from kcse.foundation import arguments

    flag = Flag("--projection-dim", type=arguments.positive_integer, default=4096)
    flag.dest, flag.default  # ("projection_dim", 4096)
    ```
    """

    def __init__(self, *names, input_file=False, **options):
        self.names = names
        self.options = options
        self.input_file = input_file

    @property
    def dest(self):
        return self.options.get("dest") or self.names[0].lstrip("-").replace("-", "_")

    @property
    def default(self):
        return self.options.get("default")


class Method:
    """A training method of column c.

    Subclasses set `name` (in results keys and `--method`), `title` (in
    tables), `citation` (their paper's BibTeX, as its authors give it; a
    model card's citation), `paper_settings` (`{setting: PaperSetting}`, their paper's
    settings with their sources), `flags` (their own flags, under the
    argparse group `flag_group`), and define `objective(encoder,
    protocol)`; `training_data` gives `fit`'s `(x, y)` (default: the
    protocol's unlabelled sentences).

    Every method's `paper_settings` names `scoring_pooling` (the pooling
    its paper reports: the recipes' row and `kcse train`'s pooling; None:
    the grid's rows, `command_line.DEFAULT_POOLINGS`, and `kcse train`'s
    `last_avg`), `training_pooling` and `optimizer`, and may name the
    protocol's settings (`PROTOCOL_SETTINGS`), which become
    `protocol_defaults`: applied to the protocol before the user's flags.

    Args:
        rematerialize: recompute the transformer blocks in the backward
            pass (TensorFlow; the same numbers, less memory: see
            `kcse.objectives.EncoderObjective`). Not a setting of results.
    """

    name = None
    title = None
    citation = None
    paper_settings = {}
    protocol_defaults = {}
    flags = ()
    flag_group = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls.protocol_defaults = {
            name: setting.value for name, setting in cls.paper_settings.items()
            if name in PROTOCOL_SETTINGS
        }

    def __init__(self, rematerialize=False):
        self.rematerialize = rematerialize

    @classmethod
    def paper(cls, name):
        """The value of the paper setting `name` (`paper_settings`)."""
        return cls.paper_settings[name].value

    @classmethod
    def paper_settings_text(cls):
        """The paper settings, a line each with its source, for `--help`."""
        return "\n".join(f"  {name}: {setting.text}"
                         for name, setting in cls.paper_settings.items())

    @classmethod
    def check_arguments(cls, args):
        """Checks the method's flags that depend on each other or on
        files, before TensorFlow starts; a `UsageError` names the flag."""

    @classmethod
    def trains_on_sentences(cls, args):
        """Whether the method, as `args` set it, trains on unlabelled
        sentences (the protocol's splits', or `--train-file`'s)."""
        return True

    @classmethod
    def from_args(cls, args, rematerialize=False):
        """The method its flags describe (files are read here: an
        unreadable one is an OSError, bad contents a ValueError)."""
        return cls(rematerialize=rematerialize)

    def objective(self, encoder, protocol):
        raise NotImplementedError

    def encoder_problem(self, encoder):
        """Why this method cannot train `encoder` (e.g. a saved encoder
        lacking something it needs), or None; checked before any work."""
        return None

    def encoder_to_train(self, encoder, seed):
        """The encoder `train` tunes and the cell scores (default: `encoder`
        itself, trained in place)."""
        return encoder

    def missing_training_data(self, data, protocol):
        """Why `data` cannot train this method under `protocol`, or None.

        `data[split]` is None for a split the task lacks (stsb-multi-mt
        languages without a train split); the default trains on the
        unlabelled sentences of the protocol's training splits.
        """
        if all(data.get(split) is None for split in protocol.training_splits):
            return (f"no {' / '.join(protocol.training_splits)} split to train on "
                    f"(protocol {protocol.name})")
        return None

    def training_data(self, data, protocol, task, seed, prefix):
        """`(x, y)` for `fit`: the protocol's sentences of `task`, unlabelled."""
        sentences = training_sentences(data, protocol, task, seed)
        return [prefix + s for s in sentences], None

    def train(self, encoder, data, protocol, task, seed, prefix, callbacks=()):
        """Trains `encoder` in place; returns the number of training samples."""
        x, y = self.training_data(data, protocol, task, seed, prefix)
        samples = len(x[0]) if isinstance(x, tuple) else len(x)
        fit(self.objective(encoder, protocol), x, y, protocol, callbacks,
            self.optimizer(protocol, samples))
        return samples

    def optimizer(self, protocol, samples):
        """The optimizer training on `samples` samples under `protocol`;
        None: Adam at the protocol's rate."""
        return None

    def settings(self):
        """The method's own settings, stored with each result."""
        return {"method": self.name}


def fit(objective, x, y, protocol, callbacks=(), optimizer=None):
    """Compiles `objective` with `optimizer` (default: the protocol's Adam)
    and fits it for the protocol's epochs and batch size, without Keras'
    bar (a command's progress: `kcse.foundation.progress`)."""
    import keras

    objective.compile(optimizer=optimizer or keras.optimizers.Adam(protocol.learning_rate))
    objective.fit(
        x,
        y=y,
        batch_size=protocol.batch_size,
        epochs=protocol.epochs,
        callbacks=list(callbacks),
        verbose=0,
    )


# `--optimizer` of the methods whose authors train with sentence-transformers'
# `fit` (ConSERT, SG-OPT: `script_optimizer`).
OPTIMIZERS = ("adamw", "adam")
OPTIMIZER_FLAG = Flag(
    "--optimizer", choices=OPTIMIZERS, default="adamw",
    help="adamw: the authors' transformers.AdamW at WarmupLinear (sentence-transformers' "
    "fit: weight decay 0.01 but on biases and LayerNorm, gradients clipped to norm 1, "
    "lr up from 0 over ceil(0.1 · samples · epochs / batch) steps, then down to 0 at the "
    "last; ConSERT's main.py: eps 1e-6, correct_bias False; SG-BERT's training.py: "
    "betas (0.9, 0.9), correct_bias True; IS-BERT's fit: eps 1e-7, correct_bias False); adam: Keras' Adam at the constant rate "
    "(kcse's before; the cells it made stay valid) (default: adamw)")


def script_optimizer(choice, protocol, samples, **adamw):
    """The optimizer `--optimizer choice` names for `samples` samples under
    `protocol`: `sentence_transformers_adamw` with `adamw`'s arguments
    (`beta_2`, `bias_correction`, `epsilon`), or None (the protocol's Adam)
    for adam."""
    if choice == "adam":
        return None
    from kcse.layers.adam_weight_decay import sentence_transformers_adamw

    return sentence_transformers_adamw(protocol.learning_rate, samples, protocol.epochs,
                                       protocol.batch_size, **adamw)


# The NLI file ConSERT's supervised modes and supervised SimCSE's triplets read.
NLI_FLAG = Flag(
    "--nli", type=pathlib.Path, input_file=True,
    help="SNLI / CNSD JSON-lines file: ConSERT's supervised modes; SBERT-NLI's pairs "
    "(required); supervised SimCSE's triplets (default: from the task's train labels); "
    "IS-BERT's sentences, labels unread (default: the task's sentences)")
