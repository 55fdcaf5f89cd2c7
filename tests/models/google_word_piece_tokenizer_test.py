"""`GoogleWordPieceTokenizer` cuts text as bert4keras 0.11.5 cuts it.

References, neither sharing code with kcse:
- bert4keras 0.11.5's `Tokenizer(vocab, do_lower_case=...)`: Su Jianlin's
  own tokenizer, the one of his evaluation scripts (`bert4keras_reference`
  runs it in a child process), with jieba in front for WoBERT / RoFormer;
- Hugging Face transformers' slow `BertTokenizer` (pure Python, Google's
  `tokenization.py` rule), with Google's 200-character words.

The texts: every sentence of every data set in ../shared/data (about
104,000 distinct ones, `shared_sentences`) and the written edge cases
below; the ids are compared on every path kcse cuts text on: eager Python
(TensorFlow and JAX), the graph (tf.data), a SavedModel's strings
signature served by TensorFlow alone, and the Hugging Face /
sentence-transformers / ONNX folders read by `tokenizers`.
"""

import json
import os
import pathlib
import subprocess
import sys

import jieba
import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

import kcse
from bert4keras_reference import run_bert4keras
from checkpoints import TINY_CONFIG
from checkpoints import checkpoint_arrays
from checkpoints import write_checkpoint
from conftest import tiny_vocabulary
from kcse.export import word_piece_json
from kcse.models.google_word_piece_tokenizer import GoogleWordPieceTokenizer
from kcse.models.wobert.jieba_word_piece_tokenizer import JiebaWordPieceTokenizer
from tensorflow_server import Server
from real_models import minilm_folder
from shared_sentences import character_vocabulary
from shared_sentences import data_set_sentences

import transformers  # noqa: E402  (conftest sets USE_TF=0 first)

pytestmark = pytest.mark.large

# Characters left out of the vocabulary: they become [UNK].
HELD_OUT = frozenset("😀犇")
EDGE_CASES = [
    "２０１４年，ＡＢＣ公司：“好”！？ｚ",  # Full-width digits, letters, punctuation.
    "Café Müller naïve résumé Ångström",  # Accents.
    "ΟΔΟΣ ΣΟΦΟΣ Σ ς σ",  # A capital sigma that ends a word lowercases to ς.
    "İstanbul ǅ ﬁ ß Ⅻ ㈱ ⒈ µ",  # Lowercasing that is not case folding.
    "con\x01trol\x0bchars\x7f\x85 and \x00nul \ufffd",  # Control characters are dropped.
    "zero\u200bwidth\u200cjoin\u200d soft\u00adhyphen \ufeffbom",  # So are format ones.
    "Tab\t和\n换行\r\n line\u2028sep para\u2029graph nbsp\u00a0x\u3000y",  # Spaces.
    "emoji 😀👍🏽 ❤️ 🇨🇳 犇",  # Held out: [UNK].
    "混合中文English、にほんご、한국어、Русский、Ελληνικά",  # Mixed scripts.
    "[CLS] typed [SEP] and [MASK] [UNK]",  # Text, not special tokens.
    "a" * 150, "b" * 200, "c" * 201, "很长的单词" + "d" * 250,  # 200 characters a word at most.
    "e-mail: su@kexue.fm, http://kexue.fm/archives/7758 $12.99 3.5%～4.2%",
    "", "   ",
]
# The slow BertTokenizer drops every C* character; bert4keras only Cc, Cf.
PRIVATE_USE = ["私用区\ue000字符 \U000f0000"]
# Where else the slow BertTokenizer cuts otherwise than bert4keras: it
# lowercases a word-final capital sigma as "σ" (bert4keras, Python: "ς"),
# and its basic tokenizer never splits a typed special token.
SLOW_DIFFERS = PRIVATE_USE + ["ΟΔΟΣ ΣΟΦΟΣ Σ ς σ", "[CLS] typed [SEP] and [MASK] [UNK]"]
SEQUENCE_LENGTH = 128
CHUNK = 4096


@pytest.fixture(scope="module")
def sentences(shared_data):
    return data_set_sentences(str(shared_data))


@pytest.fixture(scope="module")
def texts(sentences):
    """Every distinct sentence of the data sets, then the edge cases."""
    return sorted({t for values in sentences.values() for t in values}) + EDGE_CASES + PRIVATE_USE


def jieba_words(count=30_000):
    """jieba's `count` most frequent dictionary words (WoBERT's vocabulary
    is words of this kind)."""
    with jieba.get_dict_file() as file:
        rows = [line.split(" ") for line in file.read().decode("utf-8").splitlines()]
    rows.sort(key=lambda row: -int(row[1]))
    return [row[0] for row in rows[:count] if row[0].strip() == row[0]]


@pytest.fixture(scope="module")
def vocab_file(texts, tmp_path_factory):
    """Each character of the texts, alone and as a piece, all-MiniLM-L6-v2's
    30,522 pieces (the words of the English and European sentences) and
    30,000 jieba words."""
    words = (pathlib.Path(minilm_folder()) / "vocab.txt").read_text(encoding="utf-8").split("\n")
    words = [w for w in words if w] + jieba_words()
    vocabulary = character_vocabulary(texts, words, HELD_OUT)
    path = tmp_path_factory.mktemp("vocabulary") / "vocab.txt"
    path.write_text("".join(token + "\n" for token in vocabulary), encoding="utf-8")
    return path


# bert4keras' `encode(text, maxlen=128)` cuts only ids longer than 128
# (`truncate_sequences` pops while the length exceeds `maxlen`): it is asked
# for the texts that may be that long, and the others' untruncated ids are
# checked to be at most 128 long, where the two calls give the same ids.
MAY_BE_CUT = 100  # Characters; the longest untruncated row is checked below.


@pytest.fixture(scope="module")
def reference(texts, vocab_file, tmp_path_factory):
    """bert4keras' `encode(text)` per casing, and `encode(text, maxlen=128)`."""
    calls = [([text], {}) for text in texts]
    long_texts = [text for text in texts if len(text) > MAY_BE_CUT]
    jobs = {
        "lowercase": ({"do_lower_case": True}, "encode", calls),
        "cased": ({"do_lower_case": False}, "encode", calls),
        "lowercase_128": ({"do_lower_case": True}, "encode",
                          [([text], {"maxlen": SEQUENCE_LENGTH}) for text in long_texts]),
        "jieba": ({"do_lower_case": True, "jieba": True}, "encode", calls),
    }
    answer = run_bert4keras(vocab_file, jobs, tmp_path_factory.mktemp("bert4keras") / "a.json")
    vocabulary = vocab_file.read_text(encoding="utf-8").split("\n")[:-1]
    assert answer["token_dict"] == {token: i for i, token in enumerate(vocabulary)}
    found = {name: {text: ids for text, (ids, _) in zip(texts if name != "lowercase_128"
                                                          else long_texts, results)}
             for name, results in answer["results"].items()}
    short = {text: found["lowercase"][text] for text in texts if len(text) <= MAY_BE_CUT}
    assert max(map(len, short.values())) <= SEQUENCE_LENGTH
    assert sum(len(ids) > SEQUENCE_LENGTH for ids in found["lowercase"].values()) > 0
    found["lowercase_128"].update(short)
    return found


def differences(sentences, reference, ours):
    """`{data set or "edge cases": (texts compared, texts that differ)}`."""
    groups = {**sentences, "edge cases": EDGE_CASES + PRIVATE_USE}
    counts = {name: (len(group), [t for t in group if ours[t] != reference[t]])
              for name, group in groups.items()}
    return {name: (n, len(differ), differ[:2]) for name, (n, differ) in counts.items()}


def assert_no_differences(sentences, reference, ours):
    found = differences(sentences, reference, ours)
    assert sum(n for n, _, _ in found.values()) >= 100_000, found
    assert all(differ == 0 for _, differ, _ in found.values()), {
        name: counts for name, counts in found.items() if counts[1]}


def packed(tokenizer, rows):
    return [[tokenizer.cls_token_id] + list(map(int, ids)) + [tokenizer.sep_token_id]
            for ids in rows]


@pytest.mark.parametrize("lowercase", [True, False], ids=["lowercase", "cased"])
def test_python_path_equals_bert4keras(sentences, texts, vocab_file, reference, lowercase):
    tokenizer = GoogleWordPieceTokenizer(vocabulary=str(vocab_file), lowercase=lowercase)
    assert tokenizer.strip_accents is lowercase
    ours = dict(zip(texts, packed(tokenizer, tokenizer(texts))))
    expected = reference["lowercase" if lowercase else "cased"]
    assert_no_differences(sentences, expected, ours)
    # Unknown words and pieces occur.
    unknown = tokenizer.token_to_id("[UNK]")
    assert ours["c" * 201][1:-1] == [unknown]
    assert ours["emoji 😀👍🏽 ❤️ 🇨🇳 犇"].count(unknown) == 2
    assert all(tokenizer.id_to_token(i).startswith("##") for i in ours["a" * 150][2:-1])


@pytest.mark.parametrize("lowercase", [True, False], ids=["lowercase", "cased"])
def test_graph_path_equals_bert4keras(sentences, texts, vocab_file, reference, lowercase):
    tokenizer = GoogleWordPieceTokenizer(vocabulary=str(vocab_file), lowercase=lowercase)
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(CHUNK).map(tokenizer)
    rows = [row for batch in dataset for row in batch.to_list()]
    ours = dict(zip(texts, packed(tokenizer, rows)))
    assert_no_differences(sentences, reference["lowercase" if lowercase else "cased"], ours)


def test_jieba_families_equal_bert4keras(sentences, texts, vocab_file, reference):
    """WoBERT / RoFormer: jieba words first (bert4keras with
    `pre_tokenize=lambda s: jieba.cut(s, HMM=False)`), in Python and tf.data."""
    tokenizer = JiebaWordPieceTokenizer(vocabulary=str(vocab_file))
    ours = dict(zip(texts, packed(tokenizer, tokenizer(texts))))
    assert_no_differences(sentences, reference["jieba"], ours)
    words = {i for i, token in enumerate(tokenizer.get_vocabulary()) if len(token) > 1
             and not token.startswith("##") and "\u4e00" <= token[0] <= "\u9fff"}
    assert sum(len(words.intersection(ids)) for ids in ours.values()) > 50_000
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(CHUNK).map(tokenizer)
    rows = [row for batch in dataset for row in batch.to_list()]
    assert_no_differences(sentences, reference["jieba"], dict(zip(texts, packed(tokenizer, rows))))


def padded(rows, length=SEQUENCE_LENGTH):
    ids = np.zeros((len(rows), length), "int32")
    for i, row in enumerate(rows):
        ids[i, :len(row)] = row
    return ids


@pytest.fixture(scope="module")
def checkpoint(vocab_file, tmp_path_factory):
    """A random-weight BERT checkpoint (Google's layout) with the vocabulary."""
    vocabulary = vocab_file.read_text(encoding="utf-8").split("\n")[:-1]
    config = dict(TINY_CONFIG, vocab_size=len(vocabulary),
                  max_position_embeddings=SEQUENCE_LENGTH)
    folder = tmp_path_factory.mktemp("checkpoint") / "bert"
    return write_checkpoint(folder, checkpoint_arrays(config), config, vocabulary)


@pytest.fixture(scope="module")
def encoder(checkpoint):
    """The checkpoint's encoder, built once for the exports and the saving."""
    return kcse.SentenceEncoder.from_checkpoint(checkpoint, "bert", SEQUENCE_LENGTH,
                                                pooling="P1")


# A JAX process: the preprocessor `encode` runs, its ids to a .npy file.
JAX_IDS = """
import json, sys
import keras
import numpy as np
import kcse
folder, texts_file, output = sys.argv[1:]
assert keras.backend.backend() == "jax"
encoder = kcse.SentenceEncoder.from_checkpoint(folder, "bert", %d, pooling="P1")
texts = json.load(open(texts_file, encoding="utf-8"))
np.save(output, np.concatenate([
    np.asarray(encoder.preprocessor(texts[i:i + %d])["token_ids"])
    for i in range(0, len(texts), %d)]))
""" % (SEQUENCE_LENGTH, CHUNK, CHUNK)


def test_jax_encode_ids_equal_bert4keras(sentences, texts, checkpoint, reference, tmp_path):
    texts_file = tmp_path / "texts.json"
    texts_file.write_text(json.dumps(texts), encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-c", JAX_IDS, str(checkpoint), str(texts_file), str(tmp_path / "ids.npy")],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3"))
    assert run.returncode == 0, run.stderr[-3000:]
    ids = np.load(tmp_path / "ids.npy")
    expected = reference["lowercase_128"]
    ours = {text: row[row != 0].tolist() for text, row in zip(texts, ids)}
    assert_no_differences(sentences, expected, ours)


def test_saved_model_strings_signature_equals_bert4keras(
        sentences, texts, encoder, reference, tmp_path):
    """TensorFlow alone serves the strings; the same model fed bert4keras'
    ids gives the same vectors for every text (random weights: another
    token moves a vector by far more than 1e-5)."""
    path = tmp_path / "exported"
    assert encoder.export(path) == ["encode_ids", "serving_default"]
    server = Server(tmp_path)
    try:
        worst = {}
        # Batches of texts of like length: each is cut to its longest row.
        by_length = sorted((t for t in texts if t.strip()),
                           key=lambda t: len(reference["lowercase_128"][t]))
        for start in range(0, len(by_length), CHUNK):
            chunk = by_length[start:start + CHUNK]
            ids = padded([reference["lowercase_128"][t] for t in chunk])
            features = {"token_ids": ids, "padding_mask": ids != 0,
                        "segment_ids": np.zeros_like(ids)}
            from_strings, from_ids = server.serve(path, chunk, features)
            rows = np.max(np.abs(from_strings - from_ids), axis=1)
            worst.update((t, float(d)) for t, d in zip(chunk, rows) if d > 1e-5)
    finally:
        server.close()
    assert not worst, list(worst.items())[:3]


@pytest.mark.parametrize("lowercase", [True, False], ids=["lowercase", "cased"])
def test_huggingface_folder_equals_bert4keras(sentences, texts, vocab_file, reference,
                                              lowercase, tmp_path):
    """The folder's tokenizer.json, read by `tokenizers` through
    `AutoTokenizer`, holds no folding tables: only the standard steps."""
    tokenizer = GoogleWordPieceTokenizer(vocabulary=str(vocab_file), lowercase=lowercase)
    for name, text in word_piece_json.tokenizer_files(tokenizer, 512).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    normalizers = json.loads((tmp_path / "tokenizer.json").read_text())["normalizer"]
    assert not any(step["type"] == "NFKC" for step in normalizers["normalizers"])
    folder_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path)
    assert folder_tokenizer.is_fast
    ours = dict(zip(texts, folder_tokenizer(texts)["input_ids"]))
    assert_no_differences(sentences, reference["lowercase" if lowercase else "cased"], ours)


def test_exported_folders_carry_the_same_tokenizer(encoder, tmp_path):
    """sentence-transformers, Hugging Face and ONNX folders: one tokenizer.json."""
    expected = word_piece_json.tokenizer_files(encoder.preprocessor.tokenizer,
                                               SEQUENCE_LENGTH)["tokenizer.json"]
    for format in ("huggingface", "sentence_transformers", "onnx"):
        encoder.export(tmp_path / format, format=format)
        written = sorted((tmp_path / format).rglob("tokenizer.json"))
        assert written, format
        assert {path.read_text(encoding="utf-8") for path in written} == {expected}, format
    # kcse reads its folder back with this tokenizer (keras-hub's would fold
    # "，" to ","), so the vectors are the encoder's.
    back = kcse.SentenceEncoder.from_preset(str(tmp_path / "huggingface"), pooling="P1",
                                           sequence_length=SEQUENCE_LENGTH)
    assert type(back.preprocessor.tokenizer) is GoogleWordPieceTokenizer
    assert back.preprocessor.tokenizer.lowercase and back.preprocessor.tokenizer.strip_accents
    np.testing.assert_allclose(back.encode(EDGE_CASES), encoder.encode(EDGE_CASES), atol=1e-5)


def test_slow_bert_tokenizer_agrees(sentences, texts, vocab_file, reference):
    """The second reference: transformers' slow BertTokenizer equals
    bert4keras on the data sets and the edge cases but `SLOW_DIFFERS`, so
    both references say the same."""
    slow = transformers.BertTokenizer(str(vocab_file), do_lower_case=True,
                                      split_special_tokens=True)
    slow.wordpiece_tokenizer.max_input_chars_per_word = 200  # Google's and bert4keras'.
    checked = [t for t in texts if t not in SLOW_DIFFERS]
    # `slow(text)["input_ids"]`'s steps, without its other outputs' work.
    theirs = {t: slow.build_inputs_with_special_tokens(
        slow.convert_tokens_to_ids(slow.tokenize(t))) for t in checked}
    theirs.update((t, reference["lowercase"][t]) for t in SLOW_DIFFERS)
    assert_no_differences(sentences, reference["lowercase"], theirs)


def test_checkpoint_families_cut_as_bert4keras(tmp_path):
    """Each Google-format family gets this tokenizer (jieba first for WoBERT
    and RoFormer) with bert_config.json's `do_lower_case`."""
    config = dict(TINY_CONFIG, do_lower_case=False)
    vocabulary = tiny_vocabulary() + ["，", ",", "２", "2", "A"]
    for family in ("bert", "roberta", "simbert", "nezha", "wobert", "roformer"):
        arrays = checkpoint_arrays(config, position_embeddings=family not in ("nezha", "roformer"))
        folder = write_checkpoint(tmp_path / family, arrays, config, vocabulary)
        encoder = kcse.SentenceEncoder.from_checkpoint(folder, family, 8, pooling="P1")
        tokenizer = encoder.preprocessor.tokenizer
        assert isinstance(tokenizer, GoogleWordPieceTokenizer), family
        assert tokenizer.lowercase is False, family
        jieba_family = family in ("wobert", "roformer")
        assert (type(tokenizer).__name__ == "JiebaWordPieceTokenizer") is jieba_family
        ids = np.asarray(encoder.preprocessor(["，２ A"])["token_ids"])[0]
        assert [tokenizer.id_to_token(int(i)) for i in ids[1:4]] == ["，", "２", "A"]


def test_config_round_trip_and_saved_encoder(encoder, tmp_path):
    vocabulary = tiny_vocabulary() + ["，"]
    tokenizer = GoogleWordPieceTokenizer(vocabulary=vocabulary,
                                         lowercase=True, strip_accents=False, word_maxlen=7)
    config = tokenizer.get_config()
    assert (config["lowercase"], config["strip_accents"], config["word_maxlen"]) == (True, False, 7)
    again = GoogleWordPieceTokenizer.from_config({**config, "vocabulary": vocabulary})
    texts = ["The CAT，sat", "abcdefgh the"]
    assert again(texts) == tokenizer(texts)
    # A saved encoder loads with this tokenizer and encodes the same.
    encoder.save(tmp_path / "encoder.keras")
    loaded = keras.saving.load_model(tmp_path / "encoder.keras")
    assert type(loaded.preprocessor.tokenizer) is GoogleWordPieceTokenizer
    np.testing.assert_allclose(loaded.encode(EDGE_CASES), encoder.encode(EDGE_CASES), atol=1e-6)


@pytest.mark.parametrize("arguments,message", [
    ({"word_maxlen": 0}, "word_maxlen must be in 1..1000"),
    ({"word_maxlen": 1001}, "word_maxlen must be in 1..1000"),
    ({"split": False}, "split=False and split_on_cjk=False are not supported"),
    ({"split_on_cjk": False}, "split=False and split_on_cjk=False are not supported"),
    ({"special_tokens_in_strings": True}, "special_tokens_in_strings=True is not supported"),
])
def test_bad_arguments_are_refused(arguments, message):
    with pytest.raises(ValueError, match=message):
        GoogleWordPieceTokenizer(vocabulary=tiny_vocabulary(), **arguments)


def test_keras_hub_tokenizer_still_folds():
    """keras-hub presets and Hugging Face folders keep keras-hub's
    tokenizer: NFKC case folding, so full-width forms become ASCII."""
    vocabulary = tiny_vocabulary() + ["，", ","]
    folding = keras_hub.models.BertTokenizer(vocabulary=vocabulary, lowercase=True)
    ours = GoogleWordPieceTokenizer(vocabulary=vocabulary, lowercase=True)
    assert [folding.id_to_token(int(i)) for i in folding("the，cat")] == ["the", ",", "cat"]
    assert [ours.id_to_token(int(i)) for i in ours("the，cat")] == ["the", "，", "cat"]
