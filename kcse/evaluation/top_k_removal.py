"""ConSERT's Table 1: STS Spearman of average pooling as the most frequent tokens leave the average.

Yan et al. (2021): frequent tokens dominate BERT's averaged sentence
vectors. Sources: yym6472/ConSERT `analysis_rep_space.py` (frequencies,
ranking, `filter_freq_rank_leq_than`) with
`sentence_transformers/models/Pooling.py` (the masked average).
"""

import numbers

import keras
import numpy as np
from keras import ops

from kcse.evaluation.sts import as_sentence_pairs
from kcse.evaluation.sts import check_scorable
from kcse.evaluation.sts import cosine_scores
from kcse.evaluation.sts import sts_correlations
from kcse.evaluation.token_counts import as_counts
from kcse.evaluation.token_counts import ranked_ids
from kcse.foundation.validation import check_count

# Numbers of most frequent tokens left out by `top_k_removal_curve` (0: none).
# ConSERT's analysis script takes one cut-off per run (its default removes
# ranks 0..50); these span the small k where its Table 1 sees the change.
DEFAULT_KS = (0, 1, 5, 10, 15, 20, 50)
REMOVAL_POOLINGS = ("last_avg", "last2avg")
# Pairs whose vectors are held at a time by `top_k_removal_curve`.
PAIR_CHUNK = 2048
UNRANKED = np.iinfo("int32").max


def top_k_removal_curve(
    encoder,
    sentences1,
    sentences2,
    gold_scores,
    frequencies,
    ks=DEFAULT_KS,
    pooling="last_avg",
    batch_size=64,
):
    """STS Spearman of average pooling without the k most frequent tokens.

    ConSERT's Table 1 (Yan et al., 2021): the sentence vector is the mean of
    the last layer's token states over the real tokens (padding excluded)
    except those whose frequency rank is below `k` (rank 0 the most
    frequent; ranks from `frequencies`, most frequent first, ties by smaller
    id), and each `k` gets the Spearman correlation x100 of the pairs'
    cosines with the gold scores (`kcse.evaluation.sts`'s helpers).

    As in ConSERT's code (yym6472/ConSERT, `analysis_rep_space.py` and
    `sentence_transformers/models/Pooling.py`): the frequencies are counted
    on the evaluated sentences with the special tokens (pass
    `token_frequencies(encoder.preprocessor, sentences1 + sentences2)`), so
    [CLS] and [SEP] are removed like any token once their rank is below
    `k`; tokens the counts never saw are kept; a sentence with no token left
    averages to the zero vector (ConSERT clamps the token count at 1e-9),
    whose cosine with any vector is 0. Differences: ConSERT's
    `--num_filter_freq_rank_leq_than N` removes ranks 0..N, N + 1 tokens
    (`k` here is the number removed), and it applies the removal in its
    last-two-layers pooling (`pooling="last2avg"` here), the pooling of its
    reported numbers; kcse's default is the last layer's mean.

    One forward pass of the backbone per batch serves every `k`: the model
    run is the encoder's `hidden_states` followed by one masked mean per
    `k`, through `kcse.batched_prediction.predict_in_length_order` (sorted
    by length, padding trimmed). Pairs are taken `PAIR_CHUNK` at a time, so
    memory holds at most 2 x `PAIR_CHUNK` x len(ks) vectors.

    Args:
        encoder: a `kcse.SentenceEncoder` with a preprocessor.
        sentences1, sentences2: lists of str, the two sides of the pairs.
        gold_scores: numbers, one per pair (not all equal).
        frequencies: counts per token id (`token_frequencies`), an array or
            a mapping `{id: count}`.
        ks: ints >= 0, numbers of most frequent tokens to remove; a `k`
            beyond the ranked tokens removes all of them.
        pooling: `"last_avg"` (the last layer's mean) or `"last2avg"` (mean
            of the last two layers' means, ConSERT's code).
        batch_size: int >= 1. Sentences per forward pass.

    Returns:
        A list, one dict per `k` in the order given: `{"k": k, "spearman":
        float or None, "removed_token_ids": [...], "emptied_sentences": n}`;
        `"spearman"` is None when it is undefined (every cosine equal, as
        when every sentence is emptied), and `"emptied_sentences"` counts the
        sentences (of both sides) left with no token.

    Raises:
        ValueError: sides and scores of different lengths, fewer than 2
            pairs, gold scores all equal; a negative or non-finite
            frequency; a negative `k`; an unknown `pooling`; an encoder
            without a preprocessor.
        TypeError: `encoder` is not a `kcse.SentenceEncoder`; a sentence is
            not a str; a `k` is not an int.

    Example:
    ```python
    import keras_hub
    import kcse

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                  "a", "cat", "dog", "sat", "ran", "the"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=2, num_heads=2,
        hidden_dim=16, intermediate_dim=32, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="last_avg")
    sentences1 = ["the cat sat", "a dog ran", "the cat ran", "a dog sat"]
    sentences2 = ["a cat sat", "the dog ran", "a dog sat", "the cat"]
    gold = [5, 4, 1, 0]
    counts = kcse.evaluation.token_frequencies(preprocessor, sentences1 + sentences2)
    curve = kcse.evaluation.top_k_removal_curve(
        encoder, sentences1, sentences2, gold, counts, ks=(0, 2, 100))
    [point["k"] for point in curve]  # [0, 2, 100]
    curve[2]["spearman"], curve[2]["emptied_sentences"]  # (None, 8): nothing left
    ```
    """
    pairs = as_sentence_pairs((sentences1, sentences2, gold_scores))
    check_scorable(pairs)
    batch_size = check_count(batch_size, "batch_size")
    ks = check_removal_arguments(encoder, ks, pooling)
    ranked = ranked_ids(as_counts(frequencies, "frequencies"))
    model = removal_model(encoder, ranked, ks, pooling)
    count = len(pairs)
    cosines = np.zeros((count, len(ks)))
    emptied = np.zeros(len(ks), "int64")
    for start in range(0, count, PAIR_CHUNK):
        stop = min(start + PAIR_CHUNK, count)
        outputs = predict_removal(
            model, encoder, pairs.sentences1[start:stop] + pairs.sentences2[start:stop], batch_size
        )
        half = stop - start
        for column in range(len(ks)):
            vectors = outputs["vectors"][:, column]
            cosines[start:stop, column] = cosine_scores(vectors[:half], vectors[half:])
        emptied += (outputs["kept"] == 0).sum(axis=0)
    return removal_points(ks, ranked, pairs.scores, cosines, emptied)


def check_removal_arguments(encoder, ks, pooling):
    """`ks` checked (a list of ints >= 0); raises for a bad encoder or pooling."""
    ks = _check_ks(ks)
    _check_encoder(encoder)
    if pooling not in REMOVAL_POOLINGS:
        raise ValueError(f"pooling must be one of {REMOVAL_POOLINGS}; got {pooling!r}.")
    return ks


def removal_points(ks, ranked, gold, cosines, emptied):
    """The curve, one dict per `k`, from the pairs' cosines `(pairs, len(ks))`
    and the count of emptied sentences per `k`."""
    return [
        {
            "k": k,
            "spearman": _spearman(gold, cosines[:, column]),
            "removed_token_ids": [int(i) for i in ranked[:k]],
            "emptied_sentences": int(emptied[column]),
        }
        for column, k in enumerate(ks)
    ]


class _RemovalPooling(keras.Model):
    """Token dicts -> one masked mean per `k` (and the encoder's vector).

    Outputs `"vectors"` `(batch, len(ks), dim)`: the mean of the pooled
    layer over the real tokens whose frequency rank is at least `k`;
    `"kept"` `(batch, len(ks))`, how many tokens each mean had; with
    `with_encoded`, `"encoded"`, the encoder's own output for the batch,
    from the same states.
    """

    def __init__(self, encoder, rank_table, ks, pooling, with_encoded=False):
        super().__init__(name="top_k_removal_pooling")
        self.encoder = encoder
        self.rank_table = np.asarray(rank_table, "int32")
        self.ks = np.asarray(ks, "int32")
        self.pooling = pooling
        self.with_encoded = with_encoded

    def call(self, inputs, training=False):
        states = self.encoder.hidden_states(inputs, training=False)["hidden_states"]
        pooled = states[-1]
        if self.pooling == "last2avg":
            pooled = (states[-1] + states[-2]) / 2.0
        token_ids = ops.cast(inputs["token_ids"], "int32")
        table = ops.convert_to_tensor(self.rank_table)
        ids = ops.clip(token_ids, 0, self.rank_table.shape[0] - 1)
        ranks = ops.where(token_ids < self.rank_table.shape[0], ops.take(table, ids), UNRANKED)
        real = ops.cast(inputs["padding_mask"], "bool")
        keep = ops.logical_and(
            real[None], ranks[None] >= ops.convert_to_tensor(self.ks)[:, None, None]
        )
        keep = ops.cast(keep, pooled.dtype)  # (ks, batch, length)
        sums = ops.einsum("kbl,bld->bkd", keep, pooled)
        kept = ops.transpose(ops.sum(keep, axis=-1))  # (batch, ks)
        outputs = {
            "vectors": sums / ops.maximum(kept, 1.0)[:, :, None],
            "kept": kept,
        }
        if self.with_encoded:
            outputs["encoded"] = self.encoder.pool(states, inputs["padding_mask"])
        return outputs


def removal_model(encoder, ranked, ks, pooling, with_encoded=False):
    """The removal pooling of `encoder`, token ids ranked in the order of
    `ranked` (ids it lacks are never removed)."""
    size = max(int(ranked.max()) + 1 if len(ranked) else 1, 1)
    table = np.full(size, UNRANKED, "int64")
    table[ranked] = np.arange(len(ranked))
    return _RemovalPooling(encoder, table, ks, pooling, with_encoded)


def predict_removal(model, encoder, texts, batch_size):
    """`model`'s outputs for `texts`, run in length order."""
    from kcse.batched_prediction import predict_in_length_order

    return predict_in_length_order(model, encoder.preprocessor, texts, batch_size)


def _check_encoder(encoder):
    from kcse.sentence_encoder import SentenceEncoder

    if not isinstance(encoder, SentenceEncoder):
        raise TypeError(
            f"encoder must be a kcse.SentenceEncoder; got {type(encoder).__name__}."
        )
    if encoder.preprocessor is None:
        raise ValueError("The encoder has no preprocessor; these diagnostics need one.")


def _check_ks(ks):
    if isinstance(ks, numbers.Integral):
        ks = (ks,)
    ks = [check_count(k, "ks[i]", minimum=0) for k in ks]
    if not ks:
        raise ValueError("ks must hold at least one k.")
    return ks


def _spearman(gold, predicted):
    """Spearman x100, or None when the cosines are constant or not finite."""
    if not np.all(np.isfinite(predicted)) or np.all(predicted == predicted[0]):
        return None
    return sts_correlations(gold, predicted)["spearman"]
