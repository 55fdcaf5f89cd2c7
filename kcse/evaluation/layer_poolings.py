"""Each layer × pooling of an encoder scored on STS: SG-OPT's analysis.

Kim et al. (2021, "Self-Guided Contrastive Learning for BERT Sentence
Representations", Figure 1; seed 001) score every hidden state of BERT
pooled three ways, its [CLS] vector, the mean and the max over the real
tokens, and find a wide and unstable range (the 2nd layer's max pooling best,
the 10th layer's [CLS] worst): the view that motivates SG-OPT's layer
sampler.
"""

import numpy as np
from keras import ops

from kcse.evaluation.sts import UndefinedCorrelationError
from kcse.evaluation.sts import as_sentence_pairs
from kcse.evaluation.sts import check_scorable
from kcse.evaluation.sts import cosine_scores
from kcse.evaluation.sts import scored_cosines
from kcse.foundation.validation import check_count
from kcse.layers.sentence_pooling import masked_max
from kcse.layers.sentence_pooling import masked_mean

LAYER_POOLINGS = ("cls", "mean", "max")


def pooled_states(states, padding_mask):
    """`(3, batch, dim)` float32: [CLS], the mean and the max over real
    tokens of one hidden state `(batch, length, dim)`."""
    states = ops.cast(states, "float32")
    return ops.stack([states[:, 0, :], masked_mean(states, padding_mask),
                      masked_max(states, padding_mask)])


def layer_pooling_scores(encoder, pairs, batch_size=64):
    """Spearman ×100 of gold vs cosine on `pairs` for each hidden state ×
    pooling of `encoder`'s backbone (its own pooling is not used).

    Args:
        encoder: a `kcse.SentenceEncoder` with a preprocessor.
        pairs: `SentencePairs`, a pair file's path, or `(sentences1,
            sentences2, scores)`; sentences as they are (no prompt added).
        batch_size: sentences encoded at once.

    Returns:
        `{"cls": [...], "mean": [...], "max": [...]}`, a score per hidden
        state (`[embeddings, block_1, ..., block_L]`), None where every pair
        has the same cosine (the embeddings' [CLS]).

    Example:
    ```python
    import keras_hub
    import numpy as np
    import kcse

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog", "sat", "ran"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="cls")
    scores = kcse.evaluation.layer_pooling_scores(
        encoder, (["a cat sat", "a dog ran", "a cat ran"], ["a cat ran", "a dog sat", "a dog"],
                  np.array([4.0, 1.0, 2.5])))
    len(scores["mean"])  # 3: the embeddings and each of the 2 blocks
    scores["cls"][0]  # None: every sentence's [CLS] embedding is the same vector
    ```
    """
    pairs = as_sentence_pairs(pairs)
    check_scorable(pairs)
    batch_size = check_count(batch_size, "batch_size")
    texts = pairs.sentences1 + pairs.sentences2
    chunks = []
    for start in range(0, len(texts), batch_size):
        features = encoder.preprocessor(texts[start:start + batch_size])
        states = encoder.hidden_states(features, training=False)["hidden_states"]
        mask = features["padding_mask"]
        chunks.append(np.stack([ops.convert_to_numpy(pooled_states(layer, mask))
                                for layer in states]))
    vectors = np.concatenate(chunks, axis=2)  # (layers, poolings, sentences, dim)
    count = len(pairs)
    return {name: [layer_score(pairs.scores, layer[index], count) for layer in vectors]
            for index, name in enumerate(LAYER_POOLINGS)}


def layer_score(gold, vectors, count):
    """The Spearman of the first `count` vectors against the rest, or None
    where their cosines are all equal."""
    try:
        return scored_cosines(gold, cosine_scores(vectors[:count], vectors[count:]))["spearman"]
    except UndefinedCorrelationError:
        return None
