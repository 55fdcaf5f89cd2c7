"""The anisotropy report: every diagnostic on one encoder, in one JSON-ready dict.

What ConSERT (Yan et al., 2021, Table 1 and Figure 4) compares, after
BERT-flow (Li et al., 2020, Section 2.2), a module per diagnostic:

- `token_counts.py`: `token_frequencies` counts tokens in a corpus.
- `embedding_statistics.py`: `embedding_statistics_by_frequency`, the
  token-embedding table by corpus frequency rank: per rank bin, the mean
  L2 norm of the embeddings and the mean L2 distance to their k nearest
  neighbours (BERT-flow's table: high frequency tokens lie near the origin
  and close together, rare ones far and sparse).
- `top_k_removal.py`: `top_k_removal_curve`, STS Spearman of average
  pooling as the k most frequent tokens are left out of the average
  (ConSERT's Table 1: frequent tokens dominate BERT's averaged sentence
  vectors).
- `alignment_and_uniformity.py`: `alignment` and `uniformity` (Wang &
  Isola, 2020), as SimCSE reports them on STS-B (`alignment_uniformity`).

`anisotropy_report` runs all of it on one encoder, the sentences through
the backbone once.
"""

import time

import numpy as np

from kcse.evaluation.alignment_and_uniformity import alignment
from kcse.evaluation.alignment_and_uniformity import uniformity
from kcse.evaluation.embedding_statistics import BERT_FLOW_BINS
from kcse.evaluation.embedding_statistics import embedding_statistics_by_frequency
from kcse.evaluation.embedding_statistics import token_embedding_layer
from kcse.evaluation.sts import as_sentence_pairs
from kcse.evaluation.sts import check_scorable
from kcse.evaluation.sts import cosine_scores
from kcse.evaluation.token_counts import ranked_ids
from kcse.evaluation.token_counts import special_ids
from kcse.evaluation.token_counts import token_frequencies
from kcse.evaluation.top_k_removal import DEFAULT_KS
from kcse.evaluation.top_k_removal import check_removal_arguments
from kcse.evaluation.top_k_removal import predict_removal
from kcse.evaluation.top_k_removal import removal_model
from kcse.evaluation.top_k_removal import removal_points
from kcse.foundation.validation import check_count
from kcse.foundation.validation import check_texts


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
    """Every anisotropy diagnostic on one encoder, as one JSON-ready dict.

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
    pairs = as_sentence_pairs(pairs_or_path)
    check_scorable(pairs)
    batch_size = check_count(batch_size, "batch_size")
    ks = check_removal_arguments(encoder, ks, pooling)
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
    words[special_ids(encoder.preprocessor)] = 0
    seconds["frequencies"] = time.perf_counter() - begin

    begin = time.perf_counter()
    layer = token_embedding_layer(encoder.backbone)
    statistics = embedding_statistics_by_frequency(
        layer, words, bins=bins, k=k, neighbors=neighbors
    )
    seconds["token_embeddings"] = time.perf_counter() - begin

    begin = time.perf_counter()
    ranked = ranked_ids(with_specials)
    model = removal_model(encoder, ranked, ks, pooling, with_encoded=True)
    unique, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
    inverse = inverse.reshape(-1)
    outputs = predict_removal(model, encoder, list(unique), batch_size)
    count = len(pairs)
    first, second = inverse[:count], inverse[count:]
    vectors = outputs["vectors"]
    cosines = np.stack(
        [cosine_scores(vectors[first, column], vectors[second, column])
         for column in range(len(ks))],
        axis=1,
    )
    emptied = (outputs["kept"][inverse] == 0).sum(axis=0)
    curve = removal_points(ks, ranked, pairs.scores, cosines, emptied)
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
