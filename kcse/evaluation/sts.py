"""Semantic textual similarity evaluation: Spearman of cosine vs gold."""

import os

import numpy as np
import scipy.stats

from kcse.data.sentence_pairs import SentencePairs
from kcse.data.sentence_pairs import read_pairs
from kcse.foundation.validation import check_count
from kcse.foundation.validation import check_texts


class UndefinedCorrelationError(ValueError):
    """The encoder's cosines are all equal or not finite: no correlation.

    A collapsed or diverged encoder, not bad input; `STSEvaluator` scores
    such a step as NaN instead of stopping training.

    Example:
    ```python
    import numpy as np
    import kcse


    class CollapsedEncoder:
        # Gives every sentence the same vector, as a collapsed model does.

        def encode(self, texts, batch_size=64):
            return np.ones((len(texts), 4), "float32")


    pairs = (["a cat", "a dog", "a man"], ["the cat", "one dog", "a car"], [5, 3, 0])
    try:
        kcse.evaluation.evaluate_sts(CollapsedEncoder(), pairs)
    except kcse.evaluation.UndefinedCorrelationError as error:  # a ValueError
        message = str(error)
    message  # 'The predicted cosines are all equal (1): the encoder gives every pair ...'
    ```
    """


def as_sentence_pairs(pairs_or_path):
    """A `SentencePairs` from a path, a `SentencePairs`, or a tuple.

    The tuple is `(sentences1, sentences2, scores)`.

    Raises:
        TypeError: `pairs_or_path` is none of these, or a sentence is not a
            str (the message names it, e.g. `sentences2[4]`).
        ValueError: the three differ in length (the message gives the
            lengths), or a score is not a finite number (`scores[i]`).
        OSError: the file cannot be read (see `kcse.data.read_pairs`).
    """
    if isinstance(pairs_or_path, SentencePairs):
        return pairs_or_path
    if isinstance(pairs_or_path, (str, os.PathLike)):
        return read_pairs(pairs_or_path)
    if not isinstance(pairs_or_path, (tuple, list)) or len(pairs_or_path) != 3:
        got = type(pairs_or_path).__name__
        if isinstance(pairs_or_path, (tuple, list)):
            got += f" of {len(pairs_or_path)} items"
        raise TypeError(
            "pairs must be a file path, a kcse.data.SentencePairs or a tuple "
            f"(sentences1, sentences2, scores); got {got}."
        )
    sentences1, sentences2, scores = pairs_or_path
    sentences1 = check_texts(sentences1, "sentences1")
    sentences2 = check_texts(sentences2, "sentences2")
    if isinstance(scores, (str, bytes)) or not hasattr(scores, "__iter__"):
        raise TypeError(
            f"scores must be an iterable of numbers; got {type(scores).__name__}."
        )
    scores = [_score(score, index) for index, score in enumerate(scores)]
    pairs = SentencePairs(sentences1, sentences2, np.asarray(scores, "float64"))
    check_lengths(pairs)
    return pairs


def check_lengths(pairs):
    """Raises `ValueError` when the sides and scores differ in length."""
    lengths = len(pairs.sentences1), len(pairs.sentences2), len(pairs.scores)
    if len(set(lengths)) > 1:
        raise ValueError(
            "sentences1, sentences2 and scores differ in length: "
            f"{lengths[0]}, {lengths[1]}, {lengths[2]}."
        )


def check_scorable(pairs):
    """Raises `ValueError` unless Spearman's ρ of `pairs` can be defined.

    That needs sides and scores of one length, at least 2 pairs, and gold
    scores that are not all equal (ρ of a constant is undefined).
    """
    check_lengths(pairs)
    if len(pairs) < 2:
        raise ValueError(f"STS evaluation needs at least 2 pairs; got {len(pairs)}.")
    if np.all(pairs.scores == pairs.scores[0]):
        raise ValueError(
            f"The gold scores are all equal ({pairs.scores[0]:g}), so "
            "Spearman's correlation with them is undefined."
        )


def _score(value, index):
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"scores[{index}] must be a number; got {value!r}."
        ) from None
    if not np.isfinite(score):
        raise ValueError(f"scores[{index}] must be finite; got {score}.")
    return score


def cosine_scores(vectors1, vectors2):
    """Row-wise cosine similarity of two `(n, dim)` arrays."""
    vectors1 = np.asarray(vectors1, "float64")
    vectors2 = np.asarray(vectors2, "float64")
    norms = np.linalg.norm(vectors1, axis=1) * np.linalg.norm(vectors2, axis=1)
    return (vectors1 * vectors2).sum(axis=1) / np.maximum(norms, 1e-12)


def sts_correlations(gold, predicted):
    """Spearman and Pearson correlations, both ×100, and the pair count."""
    if len(gold) < 2:
        raise ValueError(f"STS evaluation needs at least 2 pairs; got {len(gold)}.")
    return {
        "spearman": 100.0 * float(scipy.stats.spearmanr(gold, predicted)[0]),
        "pearson": 100.0 * float(scipy.stats.pearsonr(gold, predicted)[0]),
        "n": int(len(gold)),
    }


def evaluate_sts(encoder, pairs_or_path, batch_size=64):
    """Scores `encoder` on labelled sentence pairs.

    Both sides are encoded with one `encoder.encode` call (so a
    `kcse.SentenceEncoder` gives at most one `TruncationWarning`, counting
    the sentences of both sides), compared by cosine similarity, and
    correlated with the gold scores.

    Args:
        encoder: anything with `encode(list_of_str, batch_size=...)`, such
            as `kcse.SentenceEncoder`.
        pairs_or_path: a file path (any layout `kcse.data.read_pairs` reads),
            a `kcse.data.SentencePairs`, or `(sentences1, sentences2, scores)`;
            or, tokenised, `(tokens1, tokens2, scores)` with dicts of token
            arrays (`{"token_ids", "padding_mask", ...}`), encoded by
            `encoder.predict` (no tokenizer, so no TensorFlow needed).
        batch_size: int >= 1. Sentences per encoding batch.

    Returns:
        A dict: `"spearman"` and `"pearson"` correlations multiplied by 100
        (the convention of SimCSE papers and Su Jianlin's tables: 82.03
        means ρ = 0.8203), and `"n"`, the number of pairs.

    Raises:
        ValueError: fewer than 2 pairs; sides and scores of different
            lengths; gold scores all equal; `batch_size` < 1.
        UndefinedCorrelationError: a ValueError; the predicted cosines
            are all equal or not finite (Spearman's correlation is then
            undefined).
        TypeError: a sentence is not a str (named, e.g. `sentences1[2]`),
            or `batch_size` is not an int.

    Example:

    A tiny random encoder and pairs file; a real run scores a pretrained
    encoder on a test set such as `STS-B/STS-B.test.data`.

    ```python
    import pathlib

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
    pathlib.Path("pairs.data").write_text(
        "the cat sat\\ta cat sat\\t5\\n"
        "a dog ran\\tthe dog ran\\t4\\n"
        "the cat ran\\ta dog sat\\t1\\n"
        "a dog sat\\tthe cat\\t0\\n", encoding="utf-8")
    result = kcse.evaluation.evaluate_sts(encoder, "pairs.data")
    result["n"], sorted(result)  # (4, ['n', 'pearson', 'spearman'])
    print(f"{result['spearman']:.2f} on {result['n']} pairs")  # e.g. 80.00 on 4 pairs
    ```
    """
    if _is_token_pairs(pairs_or_path):
        return _evaluate_token_pairs(encoder, *pairs_or_path, batch_size)
    pairs = as_sentence_pairs(pairs_or_path)
    return scored_cosines(pairs.scores, pair_cosines(encoder, pairs, batch_size))


def pair_cosines(encoder, pairs, batch_size=64):
    """The cosine of each pair of `pairs` (`SentencePairs`, checked as
    `evaluate_sts` checks them), encoded in one `encode` call."""
    check_scorable(pairs)
    batch_size = check_count(batch_size, "batch_size")
    count = len(pairs)
    vectors = encoder.encode(
        pairs.sentences1 + pairs.sentences2, batch_size=batch_size
    )
    return cosine_scores(vectors[:count], vectors[count:])


def _is_token_pairs(pairs):
    """Whether `pairs` is `(tokens1, tokens2, scores)` with dicts of token arrays."""
    return (
        isinstance(pairs, (tuple, list)) and len(pairs) == 3
        and all(isinstance(side, dict) and "token_ids" in side for side in pairs[:2])
    )


def _evaluate_token_pairs(encoder, tokens1, tokens2, scores, batch_size):
    """`evaluate_sts` of pairs already tokenised, through `encoder.predict`."""
    batch_size = check_count(batch_size, "batch_size")
    gold = np.asarray([_score(score, index) for index, score in enumerate(scores)], "float64")
    lengths = len(tokens1["token_ids"]), len(tokens2["token_ids"]), len(gold)
    if len(set(lengths)) > 1:
        raise ValueError(
            "tokens1, tokens2 and scores differ in length: "
            f"{lengths[0]}, {lengths[1]}, {lengths[2]}."
        )
    check_scorable(SentencePairs([""] * len(gold), [""] * len(gold), gold))
    vectors1, vectors2 = (
        encoder.predict(tokens, batch_size=batch_size, verbose=0) for tokens in (tokens1, tokens2)
    )
    return scored_cosines(gold, cosine_scores(vectors1, vectors2))


def scored_cosines(gold, predicted):
    """`sts_correlations` of cosines `predicted`, unless they are undefined."""
    if not np.all(np.isfinite(predicted)):
        raise UndefinedCorrelationError(
            "The encoder gave non-finite vectors (NaN or infinite cosines)."
        )
    if np.all(predicted == predicted[0]):
        raise UndefinedCorrelationError(
            f"The predicted cosines are all equal ({predicted[0]:g}): the "
            "encoder gives every pair the same similarity, so Spearman's "
            "correlation is undefined."
        )
    return sts_correlations(gold, predicted)
