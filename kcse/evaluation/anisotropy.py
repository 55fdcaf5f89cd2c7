"""Anisotropy diagnostics: token frequency, embedding geometry, alignment and uniformity.

What ConSERT (Yan et al., 2021, Table 1 and Figure 4) compares, after
BERT-flow (Li et al., 2020, Section 2.2):

- `embedding_statistics_by_frequency`: the token-embedding table by corpus
  frequency rank: per rank bin, the mean L2 norm of the embeddings and the
  mean L2 distance to their k nearest neighbours (BERT-flow's table: high
  frequency tokens lie near the origin and close together, rare ones far
  and sparse).
- `top_k_removal_curve`: STS Spearman of average pooling as the k most
  frequent tokens are left out of the average (ConSERT's Table 1:
  frequent tokens dominate BERT's averaged sentence vectors).
- `alignment` and `uniformity` (Wang & Isola, 2020), as SimCSE reports them
  on STS-B (`alignment_uniformity`).

`token_frequencies` counts tokens in a corpus; `anisotropy_report` runs all
of it on one encoder and returns one JSON-serialisable dict.

Sources: bohanli/BERT-flow releases no code for its table (the definition
here is the paper's: Table 1 of arXiv 2011.05864v1); yym6472/ConSERT
`analysis_rep_space.py` (frequencies, ranking, `filter_freq_rank_leq_than`)
with `sentence_transformers/models/Pooling.py`
(the masked average); SsnL/align_uniform `align_uniform/__init__.py`
(`align_loss`, `uniform_loss`); princeton-nlp/SimCSE releases no code for its
alignment/uniformity plot (its paper, Section 5, defines the pairs).
"""

import math
import numbers
from collections.abc import Mapping

import keras
import numpy as np
from keras import ops

from kcse.evaluation.sts import as_sentence_pairs
from kcse.evaluation.sts import check_scorable
from kcse.evaluation.sts import cosine_scores
from kcse.evaluation.sts import sts_correlations
from kcse.foundation.validation import check_count
from kcse.foundation.validation import check_texts

# BERT-flow's rank bins: [0, 100), [100, 500), [500, 5K), [5K, 1000K).
BERT_FLOW_BINS = (0, 100, 500, 5000, 1_000_000)
# Numbers of most frequent tokens left out by `top_k_removal_curve` (0: none).
# ConSERT's analysis script takes one cut-off per run (its default removes
# ranks 0..50); these span the small k where its Table 1 sees the change.
DEFAULT_KS = (0, 1, 5, 10, 15, 20, 50)
REMOVAL_POOLINGS = ("last_avg", "last2avg")
NEIGHBOR_POOLS = ("vocabulary", "ranked")
# Texts the preprocessor packs at a time in `token_frequencies`.
COUNT_CHUNK_SIZE = 256
# Query tokens and pool rows per block of the k-NN search: a block of
# distances is QUERY_CHUNK x POOL_CHUNK float32 (16 MB).
QUERY_CHUNK = 256
POOL_CHUNK = 16384
# Nearest candidates per token kept from the float32 search beyond k; their
# distances are then recomputed exactly, in float64.
CANDIDATE_MARGIN = 8
# Pairs whose vectors are held at a time by `top_k_removal_curve`.
PAIR_CHUNK = 2048
# Rows per block of `uniformity`'s pairwise distances (float64).
UNIFORMITY_CHUNK = 1024
UNRANKED = np.iinfo("int32").max


def token_frequencies(preprocessor_or_tokenizer, sentences, special_tokens=True):
    """How often each token id occurs in `sentences`: counts per id.

    With a keras-hub preprocessor (anything returning `token_ids` and
    `padding_mask`, such as `kcse.SentenceEncoder.preprocessor`), the tokens
    counted are those the encoder sees: the preprocessor's output under its
    padding mask, so cut to its `sequence_length`, and with the special
    tokens it adds ([CLS]/[SEP], <s>/</s>) unless `special_tokens=False`
    (then every position holding a token id the preprocessor adds to an
    empty text is left out). Padding never counts. This is how ConSERT
    counts (yym6472/ConSERT, `analysis_rep_space.py`: `save_stsb_info` keeps
    every `input_id` but padding, `compute_token_features` counts them), so
    its [CLS] and [SEP], one per sentence, are among the most frequent
    tokens. With a bare tokenizer, its output is counted (no special
    tokens). A sentence repeated n times counts n times.

    Args:
        preprocessor_or_tokenizer: a keras-hub text preprocessor or tokenizer
            (a preprocessor is recognised by its `tokenizer` attribute).
        sentences: a str or an iterable of str.
        special_tokens: bool. With a preprocessor, count the special tokens
            it adds.

    Returns:
        A numpy int64 array: entry `i` counts token id `i`; its length is the
        tokenizer's `vocabulary_size()` (longer if an id reaches beyond).

    Raises:
        TypeError: `sentences` is not a str or an iterable of str.

    Example:
    ```python
    import keras_hub
    import kcse

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                  "a", "cat", "dog", "sat", "ran", "the"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    counts = kcse.evaluation.token_frequencies(preprocessor, ["the cat sat", "the dog"])
    counts.tolist()  # [0, 0, 2, 2, 0, 0, 1, 1, 1, 0, 2]: [CLS], [SEP] and "the" twice
    kcse.evaluation.token_frequencies(
        preprocessor, ["the cat sat", "the dog"], special_tokens=False)[2]  # 0
    ```
    """
    sentences = check_texts(sentences, "sentences")
    tool = preprocessor_or_tokenizer
    tokenizer = getattr(tool, "tokenizer", None)
    size = _vocabulary_size(tokenizer if tokenizer is not None else tool)
    counts = np.zeros(size, "int64")
    specials = None
    if tokenizer is not None and not special_tokens:
        specials = _special_ids(tool)
    for start in range(0, len(sentences), COUNT_CHUNK_SIZE):
        chunk = sentences[start : start + COUNT_CHUNK_SIZE]
        if tokenizer is not None:
            features = tool(chunk)
            ids = ops.convert_to_numpy(features["token_ids"])
            ids = ids[ops.convert_to_numpy(features["padding_mask"]).astype(bool)]
            if specials is not None:
                ids = ids[~np.isin(ids, specials)]
        else:
            ids = _flat_ids(tool(chunk))
        ids = ids.astype("int64")
        if len(ids) and ids.max() >= len(counts):
            counts = np.concatenate([counts, np.zeros(ids.max() + 1 - len(counts), "int64")])
        counts += np.bincount(ids, minlength=len(counts))
    return counts


def embedding_statistics_by_frequency(
    embedding_matrix,
    frequencies,
    bins=BERT_FLOW_BINS,
    k=3,
    neighbors="vocabulary",
):
    """Mean norm and k-NN distance of token embeddings, by frequency rank.

    BERT-flow's table (Li et al., 2020, Section 2.2; Table 1 of arXiv
    2011.05864v1; ConSERT's slides repeat it): tokens are ranked by
    frequency (rank 0 the most frequent), the ranks cut into bins
    `[bins[i], bins[i+1])` (BERT-flow's: 0-100, 100-500, 500-5K, 5K-1000K,
    `BERT_FLOW_BINS`), and per bin are given the mean L2 norm of the
    tokens' embeddings and the mean, over the bin's tokens, of the mean L2
    distance from a token's embedding to its `k` nearest neighbours (the
    token itself excluded, by id: a different token with an identical row
    is a neighbour at distance 0). BERT-flow ranks by Wikipedia frequency
    and searches neighbours "among all the word embeddings"; it released no
    code for the table, so these definitions are the paper's.

    Here only tokens that occur (`frequencies > 0`) are ranked, most
    frequent first, ties by smaller id; tokens ranked at or beyond
    `bins[-1]` are in no bin. `neighbors="vocabulary"` (BERT-flow's
    definition) searches every row of the table; `"ranked"` only the
    ranked tokens (cheaper for a 250k-row table, but a different quantity:
    distances grow when neighbours are fewer). The search is blocked
    (`QUERY_CHUNK` tokens x `POOL_CHUNK` rows at a time, in float32), and
    the `k + CANDIDATE_MARGIN` nearest candidates of each token are then
    measured exactly in float64; memory stays a few tens of MB whatever
    the vocabulary. Cost: (ranked tokens) x (pool rows) x dim multiply-adds
    (BERT's 30k table: seconds; multilingual-e5-small's 250k rows with
    "vocabulary": tens of seconds on 2 CPU cores).

    Args:
        embedding_matrix: the token-embedding table, a `(vocabulary, dim)`
            array; or a backbone or `keras.layers.Embedding`, whose rows are
            then read a block at a time through the embedding layer
            (dequantized where it is quantized), never the whole table.
        frequencies: counts per token id (an array, as `token_frequencies`
            gives, or a mapping `{id: count}`); ids beyond the table must
            count 0.
        bins: increasing non-negative ints, the rank bin edges (at least 2).
        k: int >= 1. Neighbours per token.
        neighbors: `"vocabulary"` or `"ranked"` (above).

    Returns:
        A dict: `"k"`, `"neighbors"`, `"pool_size"` (rows searched),
        `"ranked_tokens"` (tokens with a count), and `"bins"`, a list of
        `{"ranks": [low, high], "tokens": n, "mean_norm": float,
        "mean_knn_distance": float}`, the two means None for a bin with no
        token.

    Raises:
        ValueError: the table is not 2-D or has a non-finite value; a
            frequency is negative, non-finite, or counts an id beyond the
            table; bad `bins` or `neighbors`; `k` is not below the number of
            rows searched (a token needs `k` others).
        TypeError: `k` is not an int.

    Example:
    ```python
    import numpy as np
    import kcse

    table = np.random.default_rng(0).normal(size=(50, 8))
    counts = np.arange(50)[::-1]  # token 0 the most frequent, 49 never seen
    statistics = kcse.evaluation.embedding_statistics_by_frequency(
        table, counts, bins=(0, 10, 20, 100), k=3)
    [b["tokens"] for b in statistics["bins"]]  # [10, 10, 29]
    round(statistics["bins"][0]["mean_norm"], 2)  # e.g. 2.8
    ```
    """
    k = check_count(k, "k")
    if neighbors not in NEIGHBOR_POOLS:
        raise ValueError(f"neighbors must be one of {NEIGHBOR_POOLS}; got {neighbors!r}.")
    bins = _check_bins(bins)
    rows, vocabulary, dim = _row_reader(embedding_matrix)
    counts = _as_counts(frequencies, "frequencies")
    if len(counts) > vocabulary and np.any(counts[vocabulary:] > 0):
        raise ValueError(
            f"frequencies count token ids up to {np.flatnonzero(counts > 0).max()}, "
            f"beyond the embedding table's {vocabulary} rows."
        )
    counts = counts[:vocabulary]
    ranked = _ranked_ids(counts)
    in_bins = ranked[bins[0] : bins[-1]]
    pool_ids = np.arange(vocabulary) if neighbors == "vocabulary" else ranked
    if len(in_bins) and k >= len(pool_ids):
        raise ValueError(
            f"k={k} neighbours need at least {k + 1} rows to search; the "
            f"{neighbors!r} pool has {len(pool_ids)}."
        )
    norms, distances = _norms_and_knn_distances(rows, in_bins, pool_ids, k, dim)
    statistics = []
    for low, high in zip(bins[:-1], bins[1:]):
        selected = slice(
            min(low - bins[0], len(in_bins)), min(high - bins[0], len(in_bins))
        )
        count = selected.stop - selected.start
        statistics.append(
            {
                "ranks": [int(low), int(high)],
                "tokens": int(count),
                "mean_norm": float(norms[selected].mean()) if count else None,
                "mean_knn_distance": float(distances[selected].mean()) if count else None,
            }
        )
    return {
        "k": k,
        "neighbors": neighbors,
        "pool_size": int(len(pool_ids)),
        "ranked_tokens": int(len(ranked)),
        "bins": statistics,
    }


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
    ks = _check_ks(ks)
    _check_encoder(encoder)
    if pooling not in REMOVAL_POOLINGS:
        raise ValueError(f"pooling must be one of {REMOVAL_POOLINGS}; got {pooling!r}.")
    counts = _as_counts(frequencies, "frequencies")
    ranked = _ranked_ids(counts)
    model = _removal_model(encoder, ranked, ks, pooling)
    count = len(pairs)
    cosines = np.zeros((count, len(ks)))
    emptied = np.zeros(len(ks), "int64")
    for start in range(0, count, PAIR_CHUNK):
        stop = min(start + PAIR_CHUNK, count)
        outputs = _run(
            model, encoder, pairs.sentences1[start:stop] + pairs.sentences2[start:stop], batch_size
        )
        half = stop - start
        for column in range(len(ks)):
            vectors = outputs["vectors"][:, column]
            cosines[start:stop, column] = cosine_scores(vectors[:half], vectors[half:])
        emptied += (outputs["kept"] == 0).sum(axis=0)
    return [
        {
            "k": k,
            "spearman": _spearman(pairs.scores, cosines[:, column]),
            "removed_token_ids": [int(i) for i in ranked[:k]],
            "emptied_sentences": int(emptied[column]),
        }
        for column, k in enumerate(ks)
    ]


def alignment(x, y, alpha=2, normalize=True):
    """Alignment of positive pairs: mean of ||x_i - y_i||^alpha.

    Wang & Isola (2020), SsnL/align_uniform `align_uniform/__init__.py`,
    `align_loss(x, y, alpha=2)`: `(x - y).norm(p=2, dim=1).pow(alpha).mean()`.
    The metric is defined on the unit hypersphere: rows are L2-normalised
    first (as `torch.nn.functional.normalize`, norms clamped at 1e-12)
    unless `normalize=False`. Lower is better aligned (0 to 4 for
    `alpha=2`). Computed in float64.

    Args:
        x, y: arrays `(n, dim)`, row i of each a positive pair; n >= 1.
        alpha: positive number.
        normalize: bool. L2-normalise rows first.

    Returns:
        A float.

    Raises:
        ValueError: shapes differ or are not 2-D with a row; a value is not
            finite; `alpha` is not positive.

    Example:
    ```python
    import numpy as np
    import kcse

    x = np.array([[1.0, 0.0], [0.0, 2.0]])
    y = np.array([[0.0, 1.0], [0.0, 1.0]])
    kcse.evaluation.alignment(x, y)  # 1.0: distances^2 are 2 and 0
    ```
    """
    x = _check_vectors(x, "x")
    y = _check_vectors(y, "y")
    if x.shape != y.shape:
        raise ValueError(f"x and y must have one shape; got {x.shape} and {y.shape}.")
    alpha = _positive(alpha, "alpha")
    if normalize:
        x, y = _normalized(x), _normalized(y)
    return float(np.mean(np.linalg.norm(x - y, axis=1) ** alpha))


def uniformity(x, t=2, normalize=True):
    """Uniformity: log of the mean of exp(-t ||x_i - x_j||^2) over pairs i < j.

    Wang & Isola (2020), SsnL/align_uniform `align_uniform/__init__.py`,
    `uniform_loss(x, t=2)`:
    `torch.pdist(x, p=2).pow(2).mul(-t).exp().mean().log()`, every
    distinct pair once. Rows are L2-normalised first unless
    `normalize=False`. Lower is more uniform (about -4 for `t=2` and many
    points spread evenly on a high-dimensional sphere). Computed in float64
    blocks of `UNIFORMITY_CHUNK` rows with a running log-sum-exp, so
    memory is flat in n and nothing underflows.

    Args:
        x: array `(n, dim)`, n >= 2.
        t: positive number.
        normalize: bool. L2-normalise rows first.

    Returns:
        A float.

    Raises:
        ValueError: `x` is not 2-D with at least 2 rows, a value is not
            finite, or `t` is not positive.

    Example:
    ```python
    import numpy as np
    import kcse

    x = np.array([[1.0, 0.0], [-1.0, 0.0]])  # antipodal: distance^2 is 4
    kcse.evaluation.uniformity(x)  # -8.0
    ```
    """
    x = _check_vectors(x, "x")
    if len(x) < 2:
        raise ValueError(f"uniformity needs at least 2 vectors; got {len(x)}.")
    t = _positive(t, "t")
    if normalize:
        x = _normalized(x)
    squares = (x * x).sum(axis=1)
    peak, total, pairs = -math.inf, 0.0, 0
    for start in range(0, len(x) - 1, UNIFORMITY_CHUNK):
        stop = min(start + UNIFORMITY_CHUNK, len(x))
        block = x[start:stop]
        distances = squares[start:stop, None] + squares[None, start:] - 2 * block @ x[start:].T
        upper = np.arange(start, len(x))[None, :] > np.arange(start, stop)[:, None]
        exponents = -t * np.maximum(distances[upper], 0.0)
        if not len(exponents):
            continue
        block_peak = exponents.max()
        if block_peak > peak:
            total *= math.exp(peak - block_peak) if total else 0.0
            peak = block_peak
        total += float(np.exp(exponents - peak).sum())
        pairs += len(exponents)
    return float(peak + math.log(total / pairs))


def alignment_uniformity(
    encoder_or_vectors, pairs_or_path, threshold=4.0, alpha=2, t=2, batch_size=64
):
    """SimCSE's alignment and uniformity of an encoder on labelled pairs.

    Gao et al. (2021), Section 5: alignment over the positive pairs, the
    pairs whose gold score is above `threshold` (4 on STS-B's 0-5 scale),
    and uniformity over all the sentences (each distinct sentence once;
    SimCSE's repository has no code for it). Vectors are L2-normalised
    (`alignment`, `uniformity`).

    Args:
        encoder_or_vectors: anything with `encode(list_of_str,
            batch_size=...)` such as `kcse.SentenceEncoder`; or a pair of
            arrays `(vectors1, vectors2)`, the pairs' vectors in order (then
            uniformity is over their rows, duplicates included).
        pairs_or_path: a file path, a `kcse.data.SentencePairs` or
            `(sentences1, sentences2, scores)`.
        threshold: number. Pairs scored strictly above it are positives.
        alpha, t: the exponents of `alignment` and `uniformity`.
        batch_size: int >= 1. Sentences per encoding batch.

    Returns:
        A dict: `"alignment"` (None when no pair is above `threshold`),
        `"uniformity"`, `"positive_pairs"`, `"sentences"` (vectors in the
        uniformity).

    Raises:
        ValueError: sides and scores differ in length, vectors are not
            finite or do not match the pairs, fewer than 2 sentences.

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
    pairs = (["the cat sat", "a dog ran", "the cat ran"],
             ["a cat sat", "the dog ran", "a dog sat"], [5, 4, 1])
    result = kcse.evaluation.alignment_uniformity(encoder, pairs)
    result["positive_pairs"], result["sentences"]  # (1, 6)
    ```
    """
    pairs = as_sentence_pairs(pairs_or_path)
    threshold = float(threshold)
    positive = pairs.scores > threshold
    if isinstance(encoder_or_vectors, (tuple, list)) and len(encoder_or_vectors) == 2:
        vectors1 = _check_vectors(encoder_or_vectors[0], "vectors1")
        vectors2 = _check_vectors(encoder_or_vectors[1], "vectors2")
        if len(vectors1) != len(pairs) or vectors1.shape != vectors2.shape:
            raise ValueError(
                f"The vectors {vectors1.shape} and {vectors2.shape} must have one row "
                f"per pair ({len(pairs)})."
            )
        everything = np.concatenate([vectors1, vectors2])
    else:
        batch_size = check_count(batch_size, "batch_size")
        unique, inverse = np.unique(
            np.asarray(pairs.sentences1 + pairs.sentences2, dtype=object), return_inverse=True
        )
        everything = _check_vectors(
            encoder_or_vectors.encode(list(unique), batch_size=batch_size), "encoded vectors"
        )
        inverse = inverse.reshape(-1)
        vectors1 = everything[inverse[: len(pairs)]]
        vectors2 = everything[inverse[len(pairs) :]]
    return {
        "alignment": (
            alignment(vectors1[positive], vectors2[positive], alpha=alpha)
            if positive.any() else None
        ),
        "uniformity": uniformity(everything, t=t),
        "positive_pairs": int(positive.sum()),
        "sentences": int(len(everything)),
    }


def anisotropy_report(
    encoder,
    pairs_or_path,
    corpus_sentences=None,
    ks=DEFAULT_KS,
    bins=BERT_FLOW_BINS,
    k=3,
    neighbors="ranked",
    pooling="last_avg",
    threshold=4.0,
    batch_size=64,
):
    """Every diagnostic of this module on one encoder, as one JSON-ready dict.

    Token frequencies are counted on `corpus_sentences` (default: the
    pairs' sentences, both sides, as ConSERT counts on the evaluated set):
    with the special tokens for `top_k_removal_curve` (ConSERT), without
    them for `embedding_statistics_by_frequency` (BERT-flow ranks words of
    running text). The sentences are run through the backbone once: the
    same pass gives the removal curve and the encoder's own vectors for
    `alignment_uniformity` (positives: gold above `threshold`). The
    embedding statistics read only the table rows they need; their default
    neighbour pool is `"ranked"` (the corpus' tokens), not BERT-flow's whole
    vocabulary, to keep a 250k-row table cheap: pass
    `neighbors="vocabulary"` for BERT-flow's definition.

    Args:
        encoder: a `kcse.SentenceEncoder` with a preprocessor.
        pairs_or_path: a file path, a `kcse.data.SentencePairs` or
            `(sentences1, sentences2, scores)`.
        corpus_sentences: list of str for the frequencies, or None.
        ks, pooling: as in `top_k_removal_curve`.
        bins, k, neighbors: as in `embedding_statistics_by_frequency`.
        threshold: as in `alignment_uniformity`.
        batch_size: int >= 1. Sentences per forward pass.

    Returns:
        A dict of plain Python values: `"frequency_corpus"` (`"sentences"`,
        `"tokens"`, `"distinct_tokens"`), `"token_embeddings"` (the dict of
        `embedding_statistics_by_frequency`), `"top_k_removal"` (the list of
        `top_k_removal_curve`, with `"pooling"` in
        `"top_k_removal_pooling"`), `"alignment_uniformity"` (the dict of
        `alignment_uniformity`) and `"seconds"` per part.

    Raises:
        As the functions it calls.

    Example:
    ```python
    import json

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
    pairs = (["the cat sat", "a dog ran", "the cat ran", "a dog sat"],
             ["a cat sat", "the dog ran", "a dog sat", "the cat"], [5, 4, 1, 0])
    report = kcse.evaluation.anisotropy_report(encoder, pairs, ks=(0, 1), bins=(0, 2, 100), k=2)
    sorted(report)[:3]  # ['alignment_uniformity', 'frequency_corpus', 'seconds']
    text = json.dumps(report)  # plain Python values only
    ```
    """
    import time

    pairs = as_sentence_pairs(pairs_or_path)
    check_scorable(pairs)
    batch_size = check_count(batch_size, "batch_size")
    ks = _check_ks(ks)
    _check_encoder(encoder)
    if pooling not in REMOVAL_POOLINGS:
        raise ValueError(f"pooling must be one of {REMOVAL_POOLINGS}; got {pooling!r}.")
    texts = pairs.sentences1 + pairs.sentences2
    corpus = texts
    if corpus_sentences is not None:
        corpus = check_texts(corpus_sentences, "corpus_sentences")
    seconds = {}

    begin = time.perf_counter()
    with_specials = token_frequencies(encoder.preprocessor, corpus, special_tokens=True)
    # `special_tokens=False` counts, without a second pass: every position
    # holding an id the preprocessor adds is dropped.
    words = with_specials.copy()
    words[_special_ids(encoder.preprocessor)] = 0
    seconds["frequencies"] = time.perf_counter() - begin

    begin = time.perf_counter()
    layer = _embedding_layer(encoder.backbone)
    statistics = embedding_statistics_by_frequency(
        layer, words, bins=bins, k=k, neighbors=neighbors
    )
    seconds["token_embeddings"] = time.perf_counter() - begin

    begin = time.perf_counter()
    ranked = _ranked_ids(with_specials)
    model = _removal_model(encoder, ranked, ks, pooling, with_encoded=True)
    unique, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
    inverse = inverse.reshape(-1)
    outputs = _run(model, encoder, list(unique), batch_size)
    count = len(pairs)
    first, second = inverse[:count], inverse[count:]
    curve = []
    for column, removed in enumerate(ks):
        vectors = outputs["vectors"][:, column]
        curve.append(
            {
                "k": removed,
                "spearman": _spearman(
                    pairs.scores, cosine_scores(vectors[first], vectors[second])
                ),
                "removed_token_ids": [int(i) for i in ranked[:removed]],
                "emptied_sentences": int((outputs["kept"][inverse, column] == 0).sum()),
            }
        )
    seconds["top_k_removal"] = time.perf_counter() - begin

    begin = time.perf_counter()
    encoded = outputs["encoded"]
    positive = pairs.scores > float(threshold)
    geometry = {
        "alignment": (
            alignment(encoded[first][positive], encoded[second][positive])
            if positive.any() else None
        ),
        "uniformity": uniformity(encoded),
        "positive_pairs": int(positive.sum()),
        "sentences": int(len(encoded)),
    }
    seconds["alignment_uniformity"] = time.perf_counter() - begin
    return {
        "frequency_corpus": {
            "sentences": len(corpus),
            "tokens": int(with_specials.sum()),
            "distinct_tokens": int((with_specials > 0).sum()),
        },
        "token_embeddings": statistics,
        "top_k_removal": curve,
        "top_k_removal_pooling": pooling,
        "alignment_uniformity": geometry,
        "seconds": {name: round(value, 3) for name, value in seconds.items()},
    }


# === Helpers ===


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


def _removal_model(encoder, ranked, ks, pooling, with_encoded=False):
    size = max(int(ranked.max()) + 1 if len(ranked) else 1, 1)
    table = np.full(size, UNRANKED, "int64")
    table[ranked] = np.arange(len(ranked))
    return _RemovalPooling(encoder, table, ks, pooling, with_encoded)


def _run(model, encoder, texts, batch_size):
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


def _spearman(gold, predicted):
    """Spearman x100, or None when the cosines are constant or not finite."""
    if not np.all(np.isfinite(predicted)) or np.all(predicted == predicted[0]):
        return None
    return sts_correlations(gold, predicted)["spearman"]


def _ranked_ids(counts):
    """Ids with a count, most frequent first, ties by smaller id."""
    ids = np.flatnonzero(counts > 0)
    return ids[np.argsort(-counts[ids], kind="stable")]


def _as_counts(frequencies, name):
    if isinstance(frequencies, Mapping):
        if not frequencies:
            return np.zeros(0)
        ids = np.fromiter((int(i) for i in frequencies), "int64", len(frequencies))
        if ids.min() < 0:
            raise ValueError(f"{name} has a negative token id ({ids.min()}).")
        counts = np.zeros(ids.max() + 1)
        counts[ids] = [float(frequencies[i]) for i in frequencies]
    else:
        counts = np.asarray(frequencies, dtype="float64")
    if counts.ndim != 1:
        raise ValueError(f"{name} must be 1-D, a count per token id; got shape {counts.shape}.")
    if not np.all(np.isfinite(counts)) or np.any(counts < 0):
        raise ValueError(f"{name} must be finite and non-negative.")
    return counts


def _check_ks(ks):
    if isinstance(ks, numbers.Integral):
        ks = (ks,)
    ks = [check_count(k, "ks[i]", minimum=0) for k in ks]
    if not ks:
        raise ValueError("ks must hold at least one k.")
    return ks


def _check_bins(bins):
    edges = list(bins)
    if len(edges) < 2 or any(
        isinstance(edge, bool) or not isinstance(edge, numbers.Integral) for edge in edges
    ):
        raise ValueError(f"bins must be at least 2 ints (rank edges); got {bins!r}.")
    edges = [int(edge) for edge in edges]
    if edges[0] < 0 or any(b <= a for a, b in zip(edges, edges[1:])):
        raise ValueError(f"bins must be non-negative and increasing; got {bins!r}.")
    return edges


def _check_vectors(vectors, name):
    vectors = np.asarray(vectors, dtype="float64")
    if vectors.ndim != 2 or len(vectors) == 0:
        raise ValueError(f"{name} must be a 2-D array with a row; got shape {vectors.shape}.")
    if not np.all(np.isfinite(vectors)):
        raise ValueError(f"{name} has non-finite values (NaN or infinite).")
    return vectors


def _positive(value, name):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ValueError(f"{name} must be a positive number; got {value!r}.")
    return float(value)


def _normalized(x):
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def _special_ids(preprocessor):
    """The token ids `preprocessor` adds to an empty text (padding aside)."""
    empty = preprocessor([""])
    ids = ops.convert_to_numpy(empty["token_ids"])
    return np.unique(ids[ops.convert_to_numpy(empty["padding_mask"]).astype(bool)])


def _vocabulary_size(tokenizer):
    size = getattr(tokenizer, "vocabulary_size", None)
    return int(size()) if callable(size) else 0


def _flat_ids(tokens):
    if hasattr(tokens, "flat_values"):  # A tf.RaggedTensor.
        return np.asarray(tokens.flat_values).reshape(-1)
    tokens = ops.convert_to_numpy(tokens) if not isinstance(tokens, list) else tokens
    parts = [np.ravel(np.asarray(row)) for row in tokens]
    return np.concatenate(parts) if parts else np.zeros(0, "int64")


def _embedding_layer(backbone):
    from kcse.models.embedding_lookup import token_embedding

    layer = token_embedding(backbone)
    if layer is None:
        raise ValueError(f"{type(backbone).__name__} has no token-embedding layer.")
    return layer


def _row_reader(embeddings):
    """`(rows, vocabulary, dim)`: a function of ids -> float64 rows."""
    if isinstance(embeddings, keras.Model):
        embeddings = _embedding_layer(embeddings)
    if isinstance(embeddings, keras.layers.Embedding):
        layer = embeddings

        def rows(ids):
            ids = np.asarray(ids, "int32")
            found = ops.convert_to_numpy(layer(ids)).astype("float64")
            if not np.all(np.isfinite(found)):
                raise ValueError("The embedding table has non-finite values.")
            return found

        return rows, int(layer.input_dim), int(layer.output_dim)
    table = np.asarray(embeddings)
    if table.ndim != 2:
        raise ValueError(f"embedding_matrix must be 2-D; got shape {table.shape}.")
    if not np.all(np.isfinite(table)):
        raise ValueError("embedding_matrix has non-finite values (NaN or infinite).")

    def rows(ids):
        return table[np.asarray(ids, "int64")].astype("float64")

    return rows, table.shape[0], table.shape[1]


def _norms_and_knn_distances(rows, query_ids, pool_ids, k, dim):
    """Each query row's L2 norm and mean L2 distance to its k nearest pool rows.

    The query's own id is excluded. The pool is read once, `POOL_CHUNK`
    rows at a time; against each block, `QUERY_CHUNK` queries at a time,
    float32 squared distances update the `k + CANDIDATE_MARGIN` best
    candidates of every query, which are then measured exactly in float64.
    """
    count = len(query_ids)
    norms = np.zeros(count)
    if count == 0:
        return norms, np.zeros(0)
    queries = np.zeros((count, dim), "float32")
    for start in range(0, count, QUERY_CHUNK):
        found = rows(query_ids[start : start + QUERY_CHUNK])
        norms[start : start + len(found)] = np.linalg.norm(found, axis=1)
        queries[start : start + len(found)] = found
    query_squares = (queries.astype("float64") ** 2).sum(axis=1).astype("float32")
    width = min(k + CANDIDATE_MARGIN, len(pool_ids) - 1)
    best_distance = np.full((count, width), np.inf, "float32")
    best_index = np.full((count, width), -1, "int64")
    for pool_start in range(0, len(pool_ids), POOL_CHUNK):
        block_ids = pool_ids[pool_start : pool_start + POOL_CHUNK]
        block = rows(block_ids).astype("float32")
        squares = (block.astype("float64") ** 2).sum(axis=1).astype("float32")
        for start in range(0, count, QUERY_CHUNK):
            chunk = slice(start, min(start + QUERY_CHUNK, count))
            distances = query_squares[chunk, None] + squares[None, :] - 2.0 * (
                queries[chunk] @ block.T
            )
            distances[block_ids[None, :] == query_ids[chunk, None]] = np.inf
            distances = np.concatenate([best_distance[chunk], distances], axis=1)
            indices = np.concatenate(
                [
                    best_index[chunk],
                    np.broadcast_to(block_ids, (distances.shape[0], len(block_ids))),
                ],
                axis=1,
            )
            keep = np.argpartition(distances, width - 1, axis=1)[:, :width]
            best_distance[chunk] = np.take_along_axis(distances, keep, axis=1)
            best_index[chunk] = np.take_along_axis(indices, keep, axis=1)
    mean_distances = np.zeros(count)
    for start in range(0, count, QUERY_CHUNK):
        chunk = slice(start, min(start + QUERY_CHUNK, count))
        indices = best_index[chunk]
        candidates = rows(np.maximum(indices, 0).reshape(-1)).reshape(indices.shape + (dim,))
        # From the float64 rows (the float32 copies would round).
        exact = np.linalg.norm(
            candidates - rows(query_ids[chunk])[:, None, :], axis=2
        )
        exact[(indices < 0) | (indices == query_ids[chunk, None])] = np.inf
        mean_distances[chunk] = np.sort(exact, axis=1)[:, :k].mean(axis=1)
    return norms, mean_distances
