"""Training objectives: each wraps a `kcse.SentenceEncoder` and trains it with `fit`.

`EncoderObjective` is their base (batching, replica-correct losses, the
NaN stop, training only the layers the pooling uses and the token-embedding
rows the text uses, see `embedding_rows`); `gather_across_replicas`
(from `kcse.distribution`) makes in-batch negatives global under
`tf.distribute`. A new objective
subclasses `EncoderObjective` in a file of its own here.
"""

from kcse.foundation.lazy_exports import lazy_exports

_EXPORTS = {
    "EncoderObjective": "kcse.objectives.encoder_objective",
    "NonFiniteLossError": "kcse.foundation.training_stops",
    "SimCSE": "kcse.objectives.simcse",
    "SupervisedSimCSE": "kcse.objectives.supervised_simcse",
    "ConSERT": "kcse.objectives.consert",
    "SGOpt": "kcse.objectives.sg_opt",
    "ContrastiveTension": "kcse.objectives.contrastive_tension",
    "PairObjective": "kcse.objectives.pair_objective",
    "gather_across_replicas": "kcse.distribution.cross_replica",
}
__all__ = list(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
