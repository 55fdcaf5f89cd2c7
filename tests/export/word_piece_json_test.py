"""keras-hub's WordPiece tokenization written as a Hugging Face tokenizer.json.

Reference: the `tokenizers` library (through transformers' `AutoTokenizer`),
which shares no code with keras-hub or kcse, reading the files kcse writes:
its ids must equal kcse's preprocessor's, [CLS] and [SEP] included.
"""

import json

import keras_hub
import numpy as np
import pytest

import kcse
from checkpoints import VOCABULARY
from kcse.export import word_piece_json
from kcse.export.formats import UnsupportedExportError
from sentence_encoder_test import HUGGING_FACE_TEXTS
from real_models import minilm_encoder
from real_models import minilm_folder

import transformers  # noqa: E402  (conftest sets USE_TF=0 first)

# What keras-hub's case folding does that lowercasing does not, and the
# characters keras-hub cuts words at: each one is a case the JSON handles.
FOLDING_TEXTS = [
    "２０１４年，ＡＢＣ公司：“好”！",  # Full-width digits, letters, punctuation.
    "等等…然后‥再‼还有⁇和︙",  # Marks that fold to several marks.
    "Straße ΣΟΦΟΣ ς ſ µ",  # Case folding beyond lowercase.
    "zero\u200bwidth soft\u00adhyphen con\x01trol",  # Cf and Cc cut words.
    "[CLS] typed [SEP] and [MASK]",  # Text, not special tokens.
    "Café Ⅻ ﬁne",  # Compatibility forms (not "㈱": a symbol folding to "(株)"; see the module).
]


def chinese_stsb_test_sentences():
    pairs = kcse.data.read_chinese_task(kcse.data.BUNDLED_CHINESE_STS, "STS-B", "test")
    return sorted(set(pairs.sentences1 + pairs.sentences2))


def kcse_ids(preprocessor, texts):
    features = preprocessor(texts)
    ids, mask = np.asarray(features["token_ids"]), np.asarray(features["padding_mask"])
    return [row[row_mask.astype(bool)].tolist() for row, row_mask in zip(ids, mask)]


def written_tokenizer(tmp_path, preprocessor):
    for name, text in word_piece_json.tokenizer_files(
            preprocessor.tokenizer, preprocessor.sequence_length).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    return transformers.AutoTokenizer.from_pretrained(tmp_path)


def assert_same_ids(tokenizer, preprocessor, texts):
    ours = kcse_ids(preprocessor, texts)
    theirs = tokenizer(texts, truncation=True,
                       max_length=preprocessor.sequence_length)["input_ids"]
    mismatches = [(text, a, b) for text, a, b in zip(texts, ours, theirs) if a != b]
    assert not mismatches, mismatches[:3]


@pytest.mark.parametrize("lowercase,strip_accents", [(True, True), (True, False), (False, False)])
def test_tiny_vocabulary_tokenizes_as_kcse(tmp_path, lowercase, strip_accents):
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=VOCABULARY + ["...", "!", "ss", "σ", "fi", "1", ","],
        lowercase=lowercase, strip_accents=strip_accents)
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(tokenizer, sequence_length=64)
    hugging_face = written_tokenizer(tmp_path, preprocessor)
    assert type(hugging_face).__name__ == "PreTrainedTokenizerFast"
    texts = (FOLDING_TEXTS + HUGGING_FACE_TEXTS + chinese_stsb_test_sentences()
             + ["the cat 一丁 sat…", "THE CAT"])
    assert_same_ids(hugging_face, preprocessor, texts)


@pytest.mark.large
def test_minilm_vocabulary_tokenizes_as_kcse_where_bert_tokenizer_does_not(tmp_path):
    """all-MiniLM-L6-v2's vocabulary (30,522 pieces, lowercased): kcse's
    folder tokenizer equals kcse on every Chinese STS-B test sentence; the
    folder's own BertTokenizer (HF's cuts) differs on hundreds of them
    (full-width punctuation), which is why the export writes its own."""
    preprocessor = minilm_encoder().preprocessor  # `from_preset(folder, pooling="P3")`
    texts = chinese_stsb_test_sentences()
    assert_same_ids(written_tokenizer(tmp_path, preprocessor), preprocessor,
                    texts + FOLDING_TEXTS + HUGGING_FACE_TEXTS)
    bert_tokenizer = transformers.AutoTokenizer.from_pretrained(minilm_folder())
    theirs = bert_tokenizer(texts, truncation=True, max_length=preprocessor.sequence_length)
    differing = sum(a != b for a, b in zip(kcse_ids(preprocessor, texts), theirs["input_ids"]))
    assert differing > 100, differing


def test_folder_files_name_the_special_tokens_and_length(tmp_path):
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=VOCABULARY), sequence_length=20)
    tokenizer = written_tokenizer(tmp_path, preprocessor)
    assert tokenizer.model_max_length == 20
    assert (tokenizer.cls_token, tokenizer.sep_token, tokenizer.pad_token,
            tokenizer.unk_token, tokenizer.mask_token) == (
                "[CLS]", "[SEP]", "[PAD]", "[UNK]", "[MASK]")
    written = json.loads((tmp_path / "tokenizer.json").read_text(encoding="utf-8"))
    assert written["model"]["vocab"] == {token: i for i, token in enumerate(VOCABULARY)}


def test_jieba_hmm_and_unsplit_tokenizers_are_refused():
    with pytest.raises(UnsupportedExportError, match="jieba's HMM"):
        word_piece_json.check_tokenizer(
            kcse.models.JiebaWordPieceTokenizer(vocabulary=VOCABULARY, jieba_hmm=True))
    with pytest.raises(UnsupportedExportError, match="split=False"):
        word_piece_json.check_tokenizer(
            keras_hub.tokenizers.WordPieceTokenizer(vocabulary=VOCABULARY, split=False))
