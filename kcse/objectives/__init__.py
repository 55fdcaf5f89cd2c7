"""Training objectives: each wraps a `kcse.SentenceEncoder` and trains it with `fit`.

`EncoderObjective` is their base (batching, replica-correct losses, the
NaN stop, training only the layers the pooling uses and the token-embedding
rows the text uses, see `embedding_rows`); `gather_across_replicas`
(from `kcse.distribution`) makes in-batch negatives global under
`tf.distribute`. A new objective
subclasses `EncoderObjective` in a file of its own here.
"""

from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)
