"""Tests for the WoBERT / RoFormer (jieba + word piece) tokenizer.

The reference is bert4keras 0.11.5 from PyPI: Jianlin Su's own tokenizer
code, the one WoBERT and RoFormer were released with, built the way the
WoBERT README builds it:
`Tokenizer(dict_path, do_lower_case=True,
pre_tokenize=lambda s: jieba.cut(s, HMM=False))`. It is independent of
kcse's `JiebaWordPieceTokenizer`: a separate, pure-Python implementation by
the model's author (character loop, nested word-piece while loops), sharing
only jieba, which the rule itself names. It is installed with
`pip install --no-deps bert4keras==0.11.5` (its metadata asks for
keras<=2.3.1; the tokenizer needs none of it).

bert4keras runs in a child process (`bert4keras_reference`); all calls are
made in one child per module, whose answers the tests read.
"""

import collections
import functools
import pathlib
import unicodedata

import jieba
import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from kcse.models.wobert.jieba_word_piece_tokenizer import JiebaWordPieceTokenizer
from kcse.data import read_pairs
from bert4keras_reference import run_bert4keras

STSB = "senteval_cn/STS-B/STS-B.{}.data"

# Characters deliberately left out of the test vocabulary (-> [UNK]).
HELD_OUT_CHARS = set("犇鑫😀★ｚ\ue000")

# Latin text, digits, punctuation, full-width characters, mixed case,
# accents, control / private-use / zero-width characters, very long words.
HAND_WRITTEN = [
    "WoBERT是以词为单位的中文BERT，RoFormer也是。",
    "我买了一部iPhone12，花了5999元！",
    "Café Müller 的咖啡很好喝，naïve résumé",
    "ＡＢＣ１２３，全角字符测试！ｚ",
    "The players are playing unaffable games.",
    "他说：“今天是2021年03月03日。”",
    "价格在3.5%～4.2%之间，约合$12.99",
    "e-mail: su@kexue.fm, http://kexue.fm/archives/7758",
    "Tab\t和\n换行\r\n混在一起",
    "零宽\u200b空格和\x00控制字符\ufffd替换符",
    "私用区字符\ue000不是控制字符",
    "表情😀和符号★☆不在词表里",
    "犇鑫是生僻字",
    "UPPER lower MiXeD CaSe",
    "一个很长的单词" + "a" * 150,
    "超长单词" + "b" * 250,
    "İstanbul ǅ ﬁ ß",
    "ｈｅｌｌｏ\u3000ｗｏｒｌｄ",
    "   前后有空格   ",
    "",
    "韩文한국어和日文ひらがなカタカナ",
    "数字１２３４和123456789混合",
    "##s 与 [CLS] [UNK] 特殊记号",
    "line\u2028separator 和 para\u2029graph",
    "Hello, World! It's 9:30 a.m. ROFORMER roformer",
]

EXTRA_TOKENS = [
    "the", "a", "##a", "##b", "b", "##s", "play", "##er", "##ing", "un",
    "##aff", "##able", "ro", "##form", "iphone", "app", "##le", "hello",
    "world", "it", "'", "1", "##2", "##3", "mail",
]  # fmt: skip
SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


# ---------------------------------------------------------------------------
# Fixtures: a realistic word-level vocabulary and the test sentences.
# ---------------------------------------------------------------------------
def _lower_strip(text):
    text = unicodedata.normalize("NFD", text.lower())
    return "".join(ch for ch in text if unicodedata.category(ch) != "Mn")


def _usable_token(token):
    return (
        token.strip() == token
        and not any(ch.isspace() for ch in token)
        and not any(unicodedata.category(ch) in ("Cc", "Cf") for ch in token)
        and not (set(token) & HELD_OUT_CHARS)
    )


@functools.lru_cache(maxsize=None)
def _build_corpus(data_dir):
    """(1,000 STS-B train sentences + hand-written ones, vocabulary)."""
    data_dir = pathlib.Path(data_dir)
    train = read_pairs(data_dir / STSB.format("train"))
    sentences = list(dict.fromkeys(list(train.sentences1) + list(train.sentences2)))
    sentences = sentences[:1000] + HAND_WRITTEN

    # Word vocabulary: the ~5,000 most frequent multi-character jieba words
    # of the *other* splits, so the train sentences also have OOV words.
    counts = collections.Counter()
    chars = set()
    for split in ("valid", "test"):
        pairs = read_pairs(data_dir / STSB.format(split))
        for text in list(pairs.sentences1) + list(pairs.sentences2):
            text = _lower_strip(text)
            chars.update(text)
            counts.update(w for w in jieba.cut(text, HMM=False) if len(w) > 1)
    for text in sentences:
        chars.update(_lower_strip(text))
    words = [w for w, _ in counts.most_common() if _usable_token(w)][:5000]
    vocab = SPECIAL_TOKENS + sorted(c for c in chars if _usable_token(c))
    vocab += words + EXTRA_TOKENS
    return sentences, list(dict.fromkeys(vocab))


@pytest.fixture(scope="module")
def corpus(shared_data):
    return _build_corpus(str(shared_data))


@pytest.fixture(scope="module")
def vocab_file(corpus, tmp_path_factory):
    path = tmp_path_factory.getbasetemp() / "wobert_vocab.txt"
    if not path.exists():
        path.write_text("".join(t + "\n" for t in corpus[1]), encoding="utf-8")
    return str(path)


@functools.lru_cache(maxsize=None)
def _tokenizer(vocab_file):
    return JiebaWordPieceTokenizer(vocabulary=vocab_file)


@pytest.fixture
def tokenizer(vocab_file):
    return _tokenizer(vocab_file)


# The texts each bert4keras job covers, shared by the tests below.
def _preprocessor_texts(sentences):
    return sentences[-120:]


def _pair_texts(sentences):
    texts = _preprocessor_texts(sentences)
    return list(zip(texts[:20], texts[20:40]))


def _cased_texts(sentences):
    return HAND_WRITTEN + sentences[:50]


@pytest.fixture(scope="module")
def reference(corpus, vocab_file, tmp_path_factory):
    """bert4keras' answers: `token_dict`, and per job {input: output}.

    - `tokenize`, `encode`: `Tokenizer(..., do_lower_case=True)` (WoBERT's)
      `.tokenize(text)` and `.encode(text)` of every corpus sentence;
    - `encode_16`: `.encode(text, maxlen=16)`, for the preprocessor;
    - `pairs`: `.encode(first, second)` (pattern "S*E*E");
    - `cased`: `Tokenizer(..., do_lower_case=False, word_maxlen=120)
      .encode(text)`.
    """
    sentences = corpus[0]
    lower = {"do_lower_case": True, "jieba": True}
    cased = {"do_lower_case": False, "word_maxlen": 120, "jieba": True}
    inputs = {
        "tokenize": sentences,
        "encode": sentences,
        "encode_16": _preprocessor_texts(sentences),
        "pairs": _pair_texts(sentences),
        "cased": _cased_texts(sentences),
    }
    jobs = {
        "tokenize": (lower, "tokenize", [([t], {}) for t in inputs["tokenize"]]),
        "encode": (lower, "encode", [([t], {}) for t in inputs["encode"]]),
        "encode_16": (
            lower,
            "encode",
            [([t], {"maxlen": 16}) for t in inputs["encode_16"]],
        ),
        "pairs": (lower, "encode", [(list(pair), {}) for pair in inputs["pairs"]]),
        "cased": (cased, "encode", [([t], {}) for t in inputs["cased"]]),
    }
    output = tmp_path_factory.mktemp("bert4keras") / "answer.json"
    answer = run_bert4keras(vocab_file, jobs, output)
    answers = {"token_dict": answer["token_dict"]}
    for name, results in answer["results"].items():
        answers[name] = dict(zip(inputs[name], results))
    return answers


def _tiny_vocab():
    return SPECIAL_TOKENS + ["今", "天", "气", "不错", "我", "喜欢", "，", "。"] + [
        "the", "app", "##le",
    ]  # fmt: skip


# ---------------------------------------------------------------------------
# 1. Equality with the reference.
# ---------------------------------------------------------------------------
def test_matches_bert4keras_reference(corpus, tokenizer, reference):
    sentences, vocab = corpus
    # Both loaders read the same vocabulary.
    assert reference["token_dict"] == {t: i for i, t in enumerate(vocab)}
    assert tokenizer.get_vocabulary() == vocab

    cls_id, sep_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    got = tokenizer(sentences)  # eager, batched
    assert len(got) == len(sentences)
    mismatches = [
        (text, expected, [cls_id] + list(ids) + [sep_id])
        for text, ids in zip(sentences, got)
        if (expected := reference["encode"][text][0])
        != [cls_id] + list(ids) + [sep_id]
    ]
    assert not mismatches, mismatches[:3]

    # Both branches of the rule are exercised: jieba segments that are
    # vocabulary words, and OOV segments split into characters / pieces;
    # and [UNK] occurs.
    vocab_set = set(vocab)
    segments = [
        word
        for text in sentences
        for word in jieba.cut(_lower_strip(text), HMM=False)
    ]
    in_vocab = sum(word in vocab_set for word in segments)
    assert in_vocab > 5000
    assert len(segments) - in_vocab > 400  # ~600 OOV segments, mostly words
    unk = tokenizer.token_to_id("[UNK]")
    assert sum(ids.count(unk) for ids in got) > 10
    word_ids = {i for i, t in enumerate(vocab) if len(t) > 1 and "#" not in t}
    assert sum(len(word_ids.intersection(ids)) for ids in got) > 1000

    # A few hand-checked cases of the rule.
    idx = {t: i for i, t in enumerate(vocab)}
    assert tokenizer("The players are playing unaffable games.").tolist()[:8] == [
        idx["the"], idx["play"], idx["##er"], idx["##s"], unk,
        idx["play"], idx["##ing"], idx["un"],
    ]  # fmt: skip
    long_a = tokenizer("a" * 150).tolist()
    assert long_a == [idx["a"]] + [idx["##a"]] * 149
    assert tokenizer("b" * 250).tolist() == [unk]  # > word_maxlen
    assert tokenizer("零宽\u200b空\x00格").tolist() == [idx[c] for c in "零宽空格"]
    assert tokenizer("").tolist() == []


def test_without_lowercase_matches_reference(corpus, vocab_file, reference):
    sentences = _cased_texts(corpus[0])
    expected = reference["cased"]
    tok = JiebaWordPieceTokenizer(
        vocabulary=vocab_file, lowercase=False, word_maxlen=120
    )
    assert tok.strip_accents is False
    got = tok(sentences)
    for text, ids in zip(sentences, got):
        assert [tok.cls_token_id] + ids + [tok.sep_token_id] == expected[text][0], text


def test_string_output_and_detokenize(vocab_file, reference):
    tok = JiebaWordPieceTokenizer(vocabulary=vocab_file, dtype="string")
    for text in HAND_WRITTEN:
        expected = [
            t if t in reference["token_dict"] else "[UNK]"
            for t in reference["tokenize"][text][1:-1]
        ]
        assert tok(text) == expected, text
    ds = tf.data.Dataset.from_tensor_slices(HAND_WRITTEN[:6]).batch(3).map(tok)
    flat = [row for batch in ds for row in batch.to_list()]
    assert [[t.decode() for t in row] for row in flat] == tok(HAND_WRITTEN[:6])

    int_tok = JiebaWordPieceTokenizer(vocabulary=_tiny_vocab())
    assert int_tok.detokenize(int_tok("今天天气不错。")) == "今 天 天 气 不错 。"


def test_docstring_example():
    tokenizer = JiebaWordPieceTokenizer(vocabulary=_tiny_vocab())
    assert tokenizer("今天天气不错。").tolist() == [5, 6, 6, 7, 8, 12]
    assert tokenizer(["我喜欢Apple，", "The 橘子"]) == [[9, 10, 14, 15, 11], [13, 1, 1]]
    assert tokenizer.detokenize([5, 6, 7, 12]) == "今 天 气 。"
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        tokenizer, sequence_length=8
    )
    token_ids = np.asarray(preprocessor(["我喜欢Apple"])["token_ids"])
    assert token_ids.tolist() == [[2, 9, 10, 14, 15, 3, 0, 0]]


def test_special_tokens_in_strings():
    tok = JiebaWordPieceTokenizer(
        vocabulary=_tiny_vocab(), special_tokens_in_strings=True
    )
    assert tok("[CLS]我喜欢[MASK]。[SEP]").tolist() == [2, 9, 10, 4, 12, 3]
    plain = JiebaWordPieceTokenizer(vocabulary=_tiny_vocab())
    assert 4 not in plain("我喜欢[MASK]").tolist()


# ---------------------------------------------------------------------------
# 2. tf.data, preprocessor, config, saving.
# ---------------------------------------------------------------------------
def test_eager_and_tf_data_identical(corpus, tokenizer):
    sentences = corpus[0]
    eager = tokenizer(sentences)

    batched = tf.data.Dataset.from_tensor_slices(sentences).batch(64)
    batched = batched.map(tokenizer, num_parallel_calls=2)
    from_batches = []
    for ragged in batched:
        assert isinstance(ragged, tf.RaggedTensor) and ragged.dtype == tf.int32
        from_batches.extend(ragged.to_list())
    assert from_batches == eager

    single = tf.data.Dataset.from_tensor_slices(sentences[-40:]).map(tokenizer)
    assert single.element_spec.shape.as_list() == [None]
    assert [t.numpy().tolist() for t in single] == eager[-40:]

    # A tf.Tensor eagerly, and a rank-2 input inside tf.function.
    assert tokenizer(tf.constant(sentences[:5])) == eager[:5]
    rank2 = tf.function(tokenizer)(tf.constant([sentences[:2], sentences[2:4]]))
    assert rank2.to_list() == [eager[:2], eager[2:4]]

    # Dense outputs with `sequence_length`.
    dense = JiebaWordPieceTokenizer(vocabulary=tokenizer.vocabulary, sequence_length=6)
    expected = [(ids + [0] * 6)[:6] for ids in eager[:70]]
    assert np.asarray(dense(sentences[:70])).tolist() == expected
    ds = tf.data.Dataset.from_tensor_slices(sentences[:70]).batch(32).map(dense)
    assert np.concatenate([b.numpy() for b in ds]).tolist() == expected


def test_text_embedder_preprocessor(corpus, tokenizer, reference):
    sentences = _preprocessor_texts(corpus[0])
    seq_len = 16
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        tokenizer, sequence_length=seq_len
    )
    ds = tf.data.Dataset.from_tensor_slices(sentences).batch(50).map(preprocessor)
    outputs = list(ds)
    token_ids = np.concatenate([o["token_ids"].numpy() for o in outputs])
    segment_ids = np.concatenate([o["segment_ids"].numpy() for o in outputs])
    padding_mask = np.concatenate([o["padding_mask"].numpy() for o in outputs])
    assert token_ids.shape == segment_ids.shape == padding_mask.shape
    assert token_ids.shape == (len(sentences), seq_len)
    assert set(outputs[0]) == {"token_ids", "segment_ids", "padding_mask"}

    # bert4keras `encode(text, maxlen=16)`: truncation keeps the final [SEP].
    pad = tokenizer.pad_token_id
    for row, text in zip(token_ids, sentences):
        ids = reference["encode_16"][text][0]
        assert row.tolist() == ids + [pad] * (seq_len - len(ids)), text
    assert (token_ids[:, 0] == tokenizer.cls_token_id).all()
    assert ((token_ids == tokenizer.sep_token_id).sum(axis=1) == 1).all()
    np.testing.assert_array_equal(padding_mask, token_ids != pad)
    assert (segment_ids == 0).all()

    eager = preprocessor(sentences)
    np.testing.assert_array_equal(np.asarray(eager["token_ids"]), token_ids)

    # Pairs: [CLS] a [SEP] b [SEP] (bert4keras pattern "S*E*E").
    pair_pre = keras_hub.models.BertTextEmbedderPreprocessor(
        tokenizer, sequence_length=128
    )
    pairs = _pair_texts(corpus[0])
    first, second = [list(texts) for texts in zip(*pairs)]
    ds = tf.data.Dataset.from_tensor_slices((first, second)).batch(10)
    ds = ds.map(lambda a, b: pair_pre(x=(a, b)))
    rows = [
        pair
        for o in ds
        for pair in zip(o["token_ids"].numpy(), o["segment_ids"].numpy())
    ]
    for (ids, segs), pair in zip(rows, pairs):
        expected_ids, expected_segs = reference["pairs"][pair]
        n = len(expected_ids)
        assert ids[:n].tolist() == expected_ids
        assert (ids[n:] == pad).all()
        assert segs[:n].tolist() == expected_segs


def test_config_round_trip(vocab_file, corpus):
    tok = JiebaWordPieceTokenizer(
        vocabulary=vocab_file, word_maxlen=64, sequence_length=12, name="wobert_tok"
    )
    config = tok.get_config()
    assert config["word_maxlen"] == 64 and config["jieba_hmm"] is False
    assert config["lowercase"] is True and config["strip_accents"] is True
    restored = JiebaWordPieceTokenizer.from_config(config)
    restored.set_vocabulary(vocab_file)
    assert restored.get_config() == config
    texts = HAND_WRITTEN + corpus[0][:20]
    np.testing.assert_array_equal(np.asarray(restored(texts)), np.asarray(tok(texts)))

    serialized = keras.saving.serialize_keras_object(tok)
    assert serialized["registered_name"] == "kcse>JiebaWordPieceTokenizer"
    again = keras.saving.deserialize_keras_object(serialized)
    assert type(again) is JiebaWordPieceTokenizer
    assert again.get_config() == config


def test_preset_round_trip(tmp_path, tokenizer, corpus):
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        tokenizer, sequence_length=24
    )
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=tokenizer.vocabulary_size(),
        num_layers=1,
        num_heads=1,
        hidden_dim=4,
        intermediate_dim=8,
        max_sequence_length=24,
    )
    backbone.save_to_preset(str(tmp_path))
    preprocessor.save_to_preset(str(tmp_path))

    loaded = keras_hub.models.BertTextEmbedderPreprocessor.from_preset(str(tmp_path))
    assert type(loaded.tokenizer) is JiebaWordPieceTokenizer
    assert loaded.tokenizer.get_vocabulary() == tokenizer.get_vocabulary()
    assert loaded.sequence_length == 24
    texts = HAND_WRITTEN + corpus[0][:30]
    expected = preprocessor(texts)
    got = loaded(texts)
    for key in ("token_ids", "segment_ids", "padding_mask"):
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(expected[key]))
