"""Every value checked where it enters (issue 42, item 4).

Lengths, prompts, batch sizes, rates and names have a type and a range,
checked before any work: in the API a `TypeError` / `ValueError` naming the
argument, in the `kcse` command one line naming the flag (exit 2, before
TensorFlow starts). A token length below 3 is refused everywhere: keras-hub's
preprocessors always keep [CLS] and [SEP], so at 2 every sentence is
`[CLS] [SEP]` and at 1 they still emit 2 tokens (asserted below on
keras-hub's own preprocessor, the reference); what an export writes as its
`max_seq_length` is then the length kcse encodes at.
"""

import math
import re
import sys

import keras
import numpy as np
import pytest

import kcse
from conftest import tiny_bert
from conftest import tiny_preprocessor
from kcse.commands.main import main as kcse_main
from kcse.layers.adam_weight_decay import AdamWeightDecay
from kcse.layers.adam_weight_decay import WarmupLinear
from kcse.foundation.validation import MIN_SEQUENCE_LENGTH
from kcse.foundation.validation import check_number
from kcse.foundation.validation import check_sequence_length

SENTENCES = ["the cat sat", "a dog ran fast"]


@pytest.fixture(scope="module")
def encoder():
    return kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(8), pooling="P3")


# === Lengths ===


@pytest.mark.parametrize("length, tokens", [(1, 2), (2, 2), (3, 3)])
def test_keras_hubs_preprocessor_tells_sentences_apart_from_3_tokens(length, tokens):
    # The reference for MIN_SEQUENCE_LENGTH: keras-hub's own packing.
    ids = keras.ops.convert_to_numpy(tiny_preprocessor(length)(SENTENCES)["token_ids"])
    assert ids.shape == (2, tokens)
    assert (ids[0] != ids[1]).any() == (length >= MIN_SEQUENCE_LENGTH)


@pytest.mark.parametrize("value, error, message", [
    (2, ValueError, r"sequence_length must be an int >= 3 \(\[CLS\], at least one token "
                    r"and \[SEP\]\); got 2: every sentence would be \[CLS\] \[SEP\]"),
    (0, ValueError, r"sequence_length must be an int >= 3"),
    (8.0, TypeError, r"sequence_length must be an int >= 3; got float 8.0"),
    (True, TypeError, r"sequence_length must be an int >= 3; got bool True"),
    ("64", TypeError, r"sequence_length must be an int >= 3; got str '64'"),
])
def test_a_sequence_length_is_an_int_of_at_least_3(value, error, message):
    with pytest.raises(error, match=message):
        check_sequence_length(value)
    assert check_sequence_length(np.int64(3)) == 3


@pytest.mark.parametrize("length", [1, 2])
def test_encode_and_fit_refuse_a_preprocessor_too_short_to_tell_sentences_apart(length):
    # The encoder itself is built (a file saved so loads, and --max-length
    # can lengthen it); what would use the length refuses it, before any work.
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(length), pooling="P3")
    with pytest.raises(ValueError, match=r"encode: the preprocessor's sequence_length "
                                         rf"must be an int >= 3.*got {length}"):
        encoder.encode(SENTENCES)
    simcse = kcse.SimCSE(encoder)
    simcse.compile()
    with pytest.raises(ValueError, match=r"fit: the preprocessor's sequence_length "
                                         rf"must be an int >= 3.*got {length}"):
        simcse.fit(SENTENCES, batch_size=2)


def test_a_length_set_after_the_encoder_was_built_is_checked_when_used(tmp_path):
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(8), pooling="P3")
    encoder.preprocessor.sequence_length = 1
    with pytest.raises(ValueError, match=r"encode: the preprocessor's sequence_length "
                                         r"must be an int >= 3.*got 1"):
        encoder.encode(SENTENCES)
    for format in ("tf_saved_model", "sentence_transformers", "huggingface", "onnx"):
        with pytest.raises(ValueError, match=r"export: the preprocessor's sequence_length "
                                             r"must be an int >= 3.*got 1"):
            encoder.export(tmp_path / format, format=format)
        assert not (tmp_path / format).exists()


def test_the_constructors_refuse_a_short_length_before_loading(tmp_path):
    with pytest.raises(ValueError, match="sequence_length must be an int >= 3.*got 2"):
        kcse.SentenceEncoder.from_checkpoint(tmp_path / "no_such_folder", sequence_length=2)
    with pytest.raises(ValueError, match="sequence_length must be an int >= 3.*got 1"):
        kcse.SentenceEncoder.from_preset(str(tmp_path / "no_such_folder"), sequence_length=1)


# === Prompts ===


@pytest.mark.parametrize("prompt, shown", [(5, "int 5"), (b"x", "bytes b'x'"),
                                           (["a"], "list ['a']")])
def test_a_prompt_is_a_str(encoder, prompt, shown):
    with pytest.raises(TypeError, match=re.escape(f"prompt must be a str; got {shown}.")):
        encoder.encode(SENTENCES, prompt=prompt)


def test_a_prompt_name_is_a_str_among_the_prompts():
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(8), pooling="P3",
                                   prompts={"query": "the "})
    with pytest.raises(TypeError, match="prompt_name must be a str; got int 5"):
        encoder.encode(SENTENCES, prompt_name=5)
    with pytest.raises(ValueError, match=r"prompt_name 'document' is not one of this "
                                         r"encoder's prompts \['query'\]"):
        encoder.encode(SENTENCES, prompt_name="document")
    with pytest.raises(TypeError, match="default_prompt_name must be a str; got int 1"):
        encoder.default_prompt_name = 1


@pytest.mark.parametrize("prompts, error, message", [
    ({"query": 5}, TypeError, r"prompts\['query'\] must be a str; got int 5"),
    ({"query": b"q: "}, TypeError, r"prompts\['query'\] must be a str; got bytes"),
    ({1: "q: "}, TypeError, r"prompts must be a dict of str to str; the name 1 is a int"),
    (["query: "], TypeError, r"prompts must be a dict of str to str; got list"),
    ({"": "q: "}, ValueError, r"prompts: a prompt's name is the empty string"),
])
def test_prompts_are_a_dict_of_str_to_str_wherever_they_enter(prompts, error, message,
                                                              encoder, tmp_path):
    with pytest.raises(error, match=message):
        kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(8), prompts=prompts)
    changed = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(8))
    with pytest.raises(error, match=message):
        changed.prompts = prompts
    assert changed.prompts == {}
    with pytest.raises(error, match=message):
        kcse.export.export_sentence_transformers(encoder, tmp_path / "st", prompts=prompts)
    assert not (tmp_path / "st").exists()


# === Batch sizes, rates, temperatures, names ===


@pytest.mark.parametrize("value, error, message", [
    (math.nan, ValueError, "t must be a finite number > 0; got nan"),
    (math.inf, ValueError, "t must be a finite number > 0; got inf"),
    (0, ValueError, "t must be a finite number > 0; got 0"),
    (True, TypeError, "t must be a finite number > 0; got bool True"),
    ("0.05", TypeError, "t must be a finite number > 0; got str '0.05'"),
    (None, TypeError, "t must be a finite number > 0; got NoneType None"),
])
def test_check_number(value, error, message):
    with pytest.raises(error, match=message):
        check_number(value, "t", above=0)
    assert check_number(np.float32(0.5), "t", above=0) == 0.5


def objectives():
    return [kcse.SimCSE, kcse.SupervisedSimCSE, kcse.ConSERT,
            lambda encoder, **kwargs: kcse.SGOpt(encoder, projection_dim=4, **kwargs)]


@pytest.mark.parametrize("make", objectives())
@pytest.mark.parametrize("temperature, error", [
    (0, ValueError), (-0.05, ValueError), (math.nan, ValueError), (math.inf, ValueError),
    ("0.05", TypeError), (True, TypeError)])
def test_objectives_check_their_temperature(make, temperature, error, encoder):
    with pytest.raises(error, match="temperature must be a finite number > 0"):
        make(encoder, temperature=temperature)


@pytest.mark.parametrize("make, message", [
    (lambda e: kcse.SimCSE(e, mlm_weight=math.nan), "mlm_weight must be a finite number >= 0"),
    (lambda e: kcse.SimCSE(e, mlm_probability=1.5),
     "mlm_probability must be a finite number > 0 and < 1"),
    (lambda e: kcse.SupervisedSimCSE(e, hard_negative_weight=math.inf),
     "hard_negative_weight must be a finite number"),
    (lambda e: kcse.ConSERT(e, contrastive_weight=math.nan),
     "contrastive_weight must be a finite number >= 0"),
    (lambda e: kcse.SGOpt(e, projection_dim=4, regularization=-1),
     "regularization must be a finite number >= 0"),
    (lambda e: kcse.losses.CoSENT(scale=math.inf), "scale must be a finite number > 0"),
    (lambda e: kcse.SentenceEncoder(tiny_bert(), hidden_dropout=math.nan),
     "hidden_dropout must be a finite number >= 0 and < 1; got nan"),
    (lambda e: kcse.layers.TokenCutoff(rate=math.nan),
     "TokenCutoff rate must be a finite number >= 0 and < 1"),
    (lambda e: kcse.layers.Whitening(epsilon=math.nan), "epsilon must be a finite number >= 0"),
    (lambda e: AdamWeightDecay(learning_rate=math.nan),
     "learning_rate must be a finite number > 0; got nan"),
    (lambda e: AdamWeightDecay(learning_rate=-1e-5), "learning_rate must be a finite number > 0"),
    (lambda e: WarmupLinear(2e-5, warmup_steps=1, total_steps=0),
     "total_steps must be an int >= 1; got 0"),
])
def test_rates_and_weights_are_finite_and_in_range(make, message, encoder):
    with pytest.raises(ValueError, match=message):
        make(encoder)


@pytest.mark.parametrize("make, message", [
    (lambda: kcse.layers.Whitening(n_components=2.5), "n_components must be an int >= 1; got float"),
    (lambda: kcse.layers.Whitening(n_components=True), "n_components must be an int >= 1; got bool"),
    (lambda: kcse.SentenceEncoder(tiny_bert(), hidden_dropout="0.3"),
     "hidden_dropout must be a finite number"),
    (lambda: kcse.layers.FeatureCutoff(rate="0.1"), "FeatureCutoff rate must be a finite number"),
    (lambda: kcse.SentenceEncoder(tiny_bert(), normalize="yes"),
     "normalize must be True or False; got str 'yes'"),
    (lambda: AdamWeightDecay(learning_rate="1e-3"), "learning_rate must be a finite number > 0"),
])
def test_values_of_the_wrong_type_are_named(make, message):
    with pytest.raises(TypeError, match=message):
        make()


@pytest.mark.parametrize("format", ["tf_saved_model", "onnx"])
def test_an_exports_normalize_is_a_bool(encoder, format, tmp_path):
    with pytest.raises(TypeError, match="normalize must be True or False; got str 'yes'"):
        encoder.export(tmp_path / format, format=format, normalize="yes")
    assert not (tmp_path / format).exists()


@pytest.mark.parametrize("batch_size, error", [
    (True, TypeError), (2.0, TypeError), (np.float64(2.0), TypeError), (0, ValueError),
    (np.int64(0), ValueError)])
def test_batch_sizes_are_positive_ints(encoder, batch_size, error):
    with pytest.raises(error, match="batch_size must be an int >= 1"):
        encoder.encode(SENTENCES, batch_size=batch_size)
    with pytest.raises(error, match="batch_size must be an int >= 1"):
        kcse.evaluation.evaluate_sts(encoder, (SENTENCES, SENTENCES[::-1], [1.0, 2.0]),
                                     batch_size=batch_size)


@pytest.mark.parametrize("pooling", ["mean", 3])
def test_an_unknown_pooling_lists_the_known_ones(pooling):
    with pytest.raises(ValueError, match=r"Unknown pooling .*Expected one of \['cls', "):
        kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(8), pooling=pooling)


# === The kcse command ===


@pytest.fixture
def texts(tmp_path):
    path = tmp_path / "texts.txt"
    path.write_text("你好\n今天天气很好\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("length", ["1", "2"])
@pytest.mark.parametrize("command", ["encode", "export", "train"])
def test_the_command_refuses_a_length_below_3_before_tensorflow(command, length, texts,
                                                                tmp_path, capsys):
    rest = {"encode": ["--input", str(texts), "--output", str(tmp_path / "v.npy")],
            "export": ["--format", "onnx", "--output", str(tmp_path / "onnx")],
            "train": ["--output", str(tmp_path / "run")]}[command]
    tensorflow_before = "tensorflow" in sys.modules
    assert kcse_main([command, "--model", "e5-small", "--max-length", length, *rest]) == 2
    assert capsys.readouterr().err == (
        f"kcse {command}: error: argument --max-length: must be an integer >= 3 ([CLS], at "
        "least one token and [SEP]; shorter, every sentence gets the same vector); got "
        f"'{length}' (see kcse {command} --help)\n")
    assert ("tensorflow" in sys.modules) == tensorflow_before
    assert not any(tmp_path.glob("v.npy")) and not (tmp_path / "onnx").exists()


def test_a_saved_encoder_of_a_length_below_3_needs_max_length(texts, tmp_path, capsys):
    # A file saved before lengths were checked: its preprocessor says 2.
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(8), pooling="P3")
    encoder.preprocessor.sequence_length = 2
    encoder.save(tmp_path / "short.keras")
    model = str(tmp_path / "short.keras")
    arguments = ["encode", "--model", model, "--input", str(texts)]
    assert kcse_main([*arguments, "--output", str(tmp_path / "v.npy")]) == 2
    assert capsys.readouterr().err == (
        f"kcse encode: error: {model}: the preprocessor's sequence_length must be an int >= "
        "3 ([CLS], at least one token and [SEP]); got 2: every sentence would be [CLS] "
        "[SEP], one vector for all. Pass --max-length.\n")
    assert kcse_main([*arguments, "--max-length", "8", "--output",
                     str(tmp_path / "w.npy")]) == 0
    vectors = np.load(tmp_path / "w.npy")
    assert vectors.shape == (2, 8) and not np.allclose(vectors[0], vectors[1])
