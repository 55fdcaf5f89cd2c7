"""Column c of the comparison: the training methods, one file each.

The grid scores a raw encoder (a), its whitening (b) and the encoder after
one training method (c). A method (`method.Method`) declares its name, its
paper's settings, its flags and how it trains; `METHODS` is the registry
that the recipes, `kcse train` and the grid read, without importing Keras.
Adding a method is a file here and a line in `METHODS`.

- `SimCSEMethod`: unsupervised SimCSE (Su's column c), optionally on
  CLEAR's text views.
- `ConSERTMethod`: ConSERT's views; `unsup` on the task's sentences, or
  `sup` / `joint` on NLI pairs, optionally followed by `unsup`.
- `SGOptMethod`: SG-OPT on the task's sentences.
- `SupervisedSimCSEMethod`: supervised SimCSE on (anchor, positive, hard
  negative) triplets from an NLI file or from the task's labelled train
  pairs.
- `ContrastiveTensionMethod`: Contrastive Tension's two models on the
  task's sentences.
- `LinearProbeMethod`: Su's linear probe, SimCSE on a Dense layer over the
  frozen encoder.
- `SBERTNLIMethod`: SBERT's softmax classifier on NLI pairs, the
  supervised baseline of ConSERT's and SG-OPT's tables.
- `ISBERTMethod`: IS-BERT's CNN and mutual-information loss on the task's
  sentences, or on an NLI file's (their unsupervised baseline).

Unlabelled sentences follow the protocol (`su`: every split, `clean`: train
only). Labels are only ever read from the train split or an NLI file, under
every protocol. The package exports nothing (see `kcse.experiments`).

Example (one cell of ConSERT on the bundled Chinese STS-B):
```python
from kcse.experiments import grid, methods
from kcse.experiments.protocols import PROTOCOLS, with_overrides
from kcse.experiments.results.store import ResultStore

store = ResultStore("runs/consert")
grid.run_grid(grid.Grid(
    ["e5-small"], ["P3"], ["STS-B"],
    lambda task, split: kcse.data.read_chinese_task(
        kcse.data.BUNDLED_CHINESE_STS, task, split),
    with_overrides(PROTOCOLS["clean"], max_sentences=256, temperature=0.1),
    method=methods.ConSERTMethod(views=("shuffle", "token_cutoff:0.1")),
), store)
```
"""

from kcse.experiments.methods.consert import ConSERTMethod
from kcse.experiments.methods.is_bert import ISBERTMethod
from kcse.experiments.methods.contrastive_tension import ContrastiveTensionMethod
from kcse.experiments.methods.linear_probe import LinearProbeMethod
from kcse.experiments.methods.sbert_nli import SBERTNLIMethod
from kcse.experiments.methods.sg_opt import SGOptMethod
from kcse.experiments.methods.simcse import SimCSEMethod
from kcse.experiments.methods.sup_simcse import SupervisedSimCSEMethod
from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)

# The registry: `--method` name -> method class.
METHODS = {
    method.name: method
    for method in (
        SimCSEMethod,
        ConSERTMethod,
        SGOptMethod,
        SupervisedSimCSEMethod,
        ContrastiveTensionMethod,
        LinearProbeMethod,
        SBERTNLIMethod,
        ISBERTMethod,
    )
}


def method_from_args(name, args):
    """The method `name` built from its flags (`command_line.add_method_arguments`).

    `--rematerialize` (default: on with TensorFlow) sets its
    `rematerialize`. Raises ValueError (or OSError for an unreadable
    `--nli`) naming the problem.
    """
    import keras

    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; choose from {', '.join(METHODS)}")
    backend = keras.backend.backend()
    rematerialize = getattr(args, "rematerialize", None)
    if rematerialize and backend != "tensorflow":
        raise ValueError(f"--rematerialize needs the TensorFlow backend; this is {backend}")
    if rematerialize is None:
        rematerialize = backend == "tensorflow"
    return METHODS[name].from_args(args, rematerialize)
