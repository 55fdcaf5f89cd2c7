import keras
import numpy as np
import pytest

import kcse
from kcse.layers import EmbeddingDropout
from kcse.layers import FeatureCutoff
from kcse.layers import SpanCutoff
from kcse.layers import TokenCutoff
from kcse.layers import TokenShuffle

LENGTHS = [9, 5, 1, 12, 7]
LENGTH, DIM = 12, 10


def batch(seed=0):
    rng = np.random.default_rng(seed)
    mask = np.arange(LENGTH)[None, :] < np.array(LENGTHS)[:, None]
    embeddings = rng.uniform(0.5, 1.5, size=(len(LENGTHS), LENGTH, DIM))
    return embeddings.astype("float32"), mask.astype("int32")


EMBEDDING_AUGMENTATIONS = [TokenCutoff, FeatureCutoff, SpanCutoff, EmbeddingDropout]


@pytest.mark.parametrize("layer_class", EMBEDDING_AUGMENTATIONS)
def test_identity_when_not_training(layer_class):
    embeddings, mask = batch()
    for training in (None, False):
        out, out_mask = layer_class(rate=0.5, seed=1)(embeddings, mask, training=training)
        np.testing.assert_array_equal(out, embeddings)
        np.testing.assert_array_equal(out_mask, mask)
    positions = TokenShuffle(seed=1)(mask, training=False)
    np.testing.assert_array_equal(positions, np.broadcast_to(np.arange(LENGTH), mask.shape))


@pytest.mark.parametrize("layer_class", EMBEDDING_AUGMENTATIONS)
def test_padding_is_never_touched(layer_class):
    embeddings, mask = batch()
    out, _ = layer_class(rate=0.5, seed=2)(embeddings, mask, training=True)
    padding = ~mask.astype(bool)
    np.testing.assert_array_equal(np.asarray(out)[padding], embeddings[padding])


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5, 0.7])
def test_token_cutoff_zeroes_exactly_int_n_rate_real_rows(rate):
    embeddings, mask = batch()
    out, out_mask = TokenCutoff(rate=rate, seed=3)(embeddings, mask, training=True)
    out = np.asarray(out)
    for row, n in enumerate(LENGTHS):
        zero_rows = np.all(out[row] == 0, axis=-1)
        assert zero_rows.sum() == int(n * rate)
        assert not zero_rows[n:].any()
        kept = ~zero_rows
        np.testing.assert_array_equal(out[row][kept], embeddings[row][kept])
    np.testing.assert_array_equal(out_mask, mask)


@pytest.mark.parametrize("rate", [0.1, 0.2, 0.5])
def test_feature_cutoff_zeroes_int_dim_rate_columns_of_real_tokens(rate):
    embeddings, mask = batch()
    out = np.asarray(FeatureCutoff(rate=rate, seed=4)(embeddings, mask, training=True)[0])
    for row, n in enumerate(LENGTHS):
        zero_columns = np.all(out[row, :n] == 0, axis=0)
        assert zero_columns.sum() == int(DIM * rate)
        np.testing.assert_array_equal(
            out[row, :n][:, ~zero_columns], embeddings[row, :n][:, ~zero_columns]
        )
        assert (out[row, :n][:, zero_columns] == 0).all()


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_span_cutoff_keeps_one_contiguous_span(rate):
    embeddings, mask = batch()
    out, out_mask = SpanCutoff(rate=rate, seed=5)(embeddings, mask, training=True)
    out, out_mask = np.asarray(out), np.asarray(out_mask).astype(bool)
    for row, n in enumerate(LENGTHS):
        kept = np.flatnonzero(out_mask[row])
        assert len(kept) == max(int(n * (1 - rate)), 1)
        assert kept.max() < n and np.all(np.diff(kept) == 1)
        np.testing.assert_array_equal(out[row, kept], embeddings[row, kept])
        cut = np.setdiff1d(np.arange(n), kept)
        assert (out[row, cut] == 0).all()


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.7])
def test_embedding_dropout_zeroes_consert_count_without_rescaling(rate):
    """Exactly ConSERT's count per sentence, the rest unscaled.

    Reference: yym6472/ConSERT `transformers/modeling_bert.py`
    `_cutoff_embeddings(direction="random")`: `num_dimensions = n * emb_size`
    (n real tokens), `int(num_dimensions * rate)` indexes of the flattened
    real tokens filled with 0.0, no rescaling.
    """
    embeddings, mask = batch()
    out = np.asarray(EmbeddingDropout(rate=rate, seed=6)(embeddings, mask, training=True)[0])
    for row, n in enumerate(LENGTHS):
        real = out[row, :n]
        zeros = real == 0
        assert zeros.sum() == int(n * DIM * rate), (row, zeros.sum())
        np.testing.assert_array_equal(real[~zeros], embeddings[row, :n][~zeros])


def test_token_shuffle_permutes_only_real_positions():
    _, mask = batch()
    positions = np.asarray(TokenShuffle(seed=7)(mask, training=True))
    moved = False
    for row, n in enumerate(LENGTHS):
        assert sorted(positions[row, :n]) == list(range(n))
        np.testing.assert_array_equal(positions[row, n:], np.arange(n, LENGTH))
        moved |= not np.array_equal(positions[row, :n], np.arange(n))
    assert moved


def test_token_shuffle_with_left_padding_permutes_the_real_slots():
    mask = np.array([[0, 0, 1, 1, 1, 1]])
    positions = np.asarray(TokenShuffle(seed=8)(mask, training=True))
    assert sorted(positions[0, 2:]) == [2, 3, 4, 5]
    np.testing.assert_array_equal(positions[0, :2], [0, 1])


@pytest.mark.parametrize("layer_class", EMBEDDING_AUGMENTATIONS + [TokenShuffle])
def test_a_fixed_seed_reproduces_the_view(layer_class):
    embeddings, mask = batch()

    def draw(seed):
        if layer_class is TokenShuffle:
            layer = TokenShuffle(seed=seed)
            return [np.asarray(layer(mask, training=True)) for _ in range(2)]
        layer = layer_class(rate=0.4, seed=seed)
        return [np.asarray(layer(embeddings, mask, training=True)[0]) for _ in range(2)]

    first, again, other = draw(11), draw(11), draw(12)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0], first[1])  # Each call a new view.
    assert not np.array_equal(first[0], other[0])


@pytest.mark.parametrize("layer_class", EMBEDDING_AUGMENTATIONS)
def test_rates_are_checked_and_configs_round_trip(layer_class):
    with pytest.raises(ValueError, match=r"rate must be a finite number >= 0 and < 1; got 1"):
        layer_class(rate=1.0)
    layer = layer_class(rate=0.25, seed=3)
    restored = keras.layers.deserialize(keras.layers.serialize(layer))
    assert (type(restored), restored.rate, restored.seed) == (layer_class, 0.25, 3)
    restored = keras.layers.deserialize(keras.layers.serialize(TokenShuffle(seed=4)))
    assert restored.seed == 4


def test_nli_classifier_is_dense_on_concat_and_abs_difference():
    rng = np.random.default_rng(0)
    first, second = rng.normal(size=(4, 6)), rng.normal(size=(4, 6))
    head = kcse.layers.NLIClassifier(num_classes=3)
    logits = np.asarray(head(first, second))
    kernel, bias = (np.asarray(w) for w in head.dense.weights)
    features = np.concatenate([first, second, np.abs(first - second)], axis=-1)
    np.testing.assert_allclose(logits, features @ kernel + bias, atol=1e-5)
    restored = kcse.layers.NLIClassifier.from_config(head.get_config())
    assert restored.num_classes == 3
