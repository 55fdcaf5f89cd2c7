"""The export formats and what each can express, without Keras.

The `kcse export` command checks its flags with these before TensorFlow
starts; the exporters use the same names.
"""

# `SentenceEncoder.export(format=...)` and `kcse export --format`.
FORMATS = ("tf_saved_model", "sentence_transformers", "huggingface", "onnx")
# `SentenceEncoder.export(format="onnx", quantize=...)` and `kcse export --quantize`.
QUANTIZATIONS = ("int8",)
# The formats written from a TensorFlow graph (the SavedModel's functions;
# tf2onnx converts them): they need the TensorFlow backend.
TENSORFLOW_FORMATS = ("tf_saved_model", "onnx")
# The packages `format="onnx"` imports (the `dev` extra installs them).
ONNX_PACKAGES = ("tf2onnx", "onnx", "onnxruntime")
# kcse pooling -> sentence-transformers `Pooling` mode, for the poolings a
# sentence-transformers folder can compute (two-layer averages add a
# `WeightedLayerPooling` before the mean; P2 a `Dense` after the cls token).
SENTENCE_TRANSFORMERS_POOLING = {
    "cls": "cls_token", "pooler": "cls_token", "last_avg": "mean_tokens",
    "first_last_avg": "mean_tokens", "last2avg": "mean_tokens", "max": "max_tokens",
}


class UnsupportedExportError(ValueError):
    """A model, pooling or tokenizer that an export format cannot express.

    Raised before anything is written; the message says what and why.

    Example:
    ```python
    import pathlib
    import kcse

    backbone = kcse.models.BertBackbone(
        vocabulary_size=10, num_layers=2, num_heads=2, hidden_dim=8,
        intermediate_dim=16, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor=None, pooling="P3")
    try:  # A folder needs the tokenizer, and this encoder has none.
        kcse.export.export_huggingface(encoder, "no-tokenizer")
    except kcse.export.UnsupportedExportError as error:
        print(error)  # the encoder has no preprocessor: ...
    assert not pathlib.Path("no-tokenizer").exists()
    ```
    """
