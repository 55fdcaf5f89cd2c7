"""Exports of a `SentenceEncoder`: TF SavedModel, Hugging Face, sentence-transformers, ONNX.

- `saved_model.py`: the SavedModel TF Serving runs (`encoder.export(path)`).
- `huggingface.py`: the backbone as a transformers folder (`AutoModel`).
- `word_piece_json.py`, `sentencepiece_json.py`: the tokenizer (WordPiece;
  XLM-R's SentencePiece) as a `tokenizer.json` that cuts text as kcse does.
- `sentence_transformers.py`: the whole encoder (pooling, whitening,
  normalisation) as a sentence-transformers folder.
- `onnx.py`: the encoder from token ids to vectors as an ONNX model (float32,
  and int8), with the tokenizer files, for ONNX Runtime; `onnx_fusions.py`
  puts its layer norms and GELUs in the operators ONNX Runtime runs fused,
  `onnx_quantization.py` makes the int8 model.
"""

from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)
