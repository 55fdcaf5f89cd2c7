"""Token frequencies: what the encoder sees, counted from its preprocessor's output."""

import keras
import numpy as np

import kcse
from conftest import tiny_preprocessor


def test_token_frequencies_count_what_the_encoder_sees():
    preprocessor = tiny_preprocessor(sequence_length=5)
    sentences = ["the cat sat", "the dog", "the cat sat on the mat"]  # the last is cut
    counts = kcse.evaluation.token_frequencies(preprocessor, sentences)
    features = preprocessor(sentences)
    ids = keras.ops.convert_to_numpy(features["token_ids"])
    mask = keras.ops.convert_to_numpy(features["padding_mask"]).astype(bool)
    expected = np.bincount(ids[mask], minlength=len(counts))
    np.testing.assert_array_equal(counts, expected)
    assert counts[2] == counts[3] == 3  # [CLS] and [SEP], once per sentence
    assert counts[0] == 0  # padding never counts
    words = kcse.evaluation.token_frequencies(preprocessor, sentences, special_tokens=False)
    assert words[2] == words[3] == 0
    np.testing.assert_array_equal(np.delete(words, [2, 3]), np.delete(counts, [2, 3]))
    tokenizer_counts = kcse.evaluation.token_frequencies(preprocessor.tokenizer, sentences)
    assert tokenizer_counts.sum() == 3 + 2 + 6  # whole sentences, no special tokens
    assert len(counts) == preprocessor.tokenizer.vocabulary_size()
