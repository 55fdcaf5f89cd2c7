"""A kcse encoder as a model of the `mteb` package (mteb 2.x)."""

import numpy as np

from kcse.evaluation.mteb_results import model_meta
from kcse.evaluation.sts import cosine_scores
from kcse.foundation.validation import check_count


class MTEBEncoder:
    """Hands a `kcse.SentenceEncoder` to `mteb.evaluate` as a model.

    It follows mteb's `EncoderProtocol`: `encode` takes mteb's batches of
    texts and returns float32 vectors, `similarity` and
    `similarity_pairwise` are cosine (kcse's similarity), and
    `mteb_model_meta` names the model and its revision, so mteb files its
    results under them. mteb is imported only by `mteb_model_meta` (it is not
    a kcse dependency: `pip install "kcse[mteb]"`).

    Prompts: a text mteb marks as a document gets the encoder's
    `"document"` prompt (e5: `"passage: "`); every other text, queries and
    the texts of symmetric tasks such as STS, for which mteb gives no
    prompt type, gets its `"query"` prompt (e5: `"query: "`, as the e5
    authors advise for symmetric tasks and as `kcse evaluate` prefixes). An
    encoder without prompts encodes the texts as they are.

    Args:
        encoder: a `kcse.SentenceEncoder` (its `encode`, `prompts` and,
            for `mteb_model_meta`, its size: `count_params`, `output_dim`,
            `preprocessor.sequence_length`).
        model_name: str, the name mteb files the results under
            (`"org/name"`).
        revision: str, the model's revision (a commit, a file digest).
        batch_size: int >= 1, sentences per batch when mteb gives none.

    Example:
    ```python
    import keras_hub
    import mteb  # pip install "kcse[mteb]"
    import kcse
    from kcse.evaluation import MTEBEncoder

    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "cat", "dog"]
    preprocessor = keras_hub.models.BertTextEmbedderPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary), sequence_length=8)
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=len(vocabulary), num_layers=1, num_heads=2,
        hidden_dim=8, intermediate_dim=16, max_sequence_length=8)
    encoder = kcse.SentenceEncoder(backbone, preprocessor)
    model = MTEBEncoder(encoder, "my-org/tiny", "v1")
    model.mteb_model_meta.name, model.get_config()
    # ('my-org/tiny', {'model_name': 'my-org/tiny', 'revision': 'v1', 'batch_size': 64})
    # mteb.evaluate(model, tasks, cache=mteb.ResultCache("mteb")) scores it; a task
    # on local data: tests/evaluation/mteb_test.py (LocalChineseSTSB).
    ```
    """

    def __init__(self, encoder, model_name, revision, batch_size=64):
        for value, what in ((model_name, "model_name"), (revision, "revision")):
            if not isinstance(value, str) or not value:
                raise ValueError(f"{what} must be a non-empty str; got {value!r}")
        self.encoder = encoder
        self.model_name = model_name
        self.revision = revision
        self.batch_size = check_count(batch_size, "batch_size")

    def get_config(self):
        """The arguments besides the encoder (saved on its own: `encoder.save`)."""
        return {"model_name": self.model_name, "revision": self.revision,
                "batch_size": self.batch_size}

    @property
    def mteb_model_meta(self):
        """mteb's `ModelMeta`: the name, revision, size (`encoder_meta`),
        frameworks, languages and cosine similarity (`model_meta`)."""
        from mteb.models.model_meta import ModelMeta

        return ModelMeta.model_validate(model_meta(self.model_name, self.revision, self.encoder))

    def encode(self, inputs, *, task_metadata, hf_split, hf_subset, prompt_type=None, **kwargs):
        """float32 vectors `(n, dim)` of the texts of mteb's batches `inputs`.

        `task_metadata`, `hf_split` and `hf_subset` do not change the
        vectors; `prompt_type` picks the prompt (see the class);
        `kwargs["batch_size"]` (mteb's `encode_kwargs`) overrides the
        batch size.
        """
        texts = [text for batch in inputs for text in batch["text"]]
        kind = "document" if prompt_type == "document" else "query"  # A str enum.
        return np.asarray(self.encoder.encode(
            texts, batch_size=kwargs.get("batch_size") or self.batch_size,
            prompt=self.encoder.prompts.get(kind, "")), "float32")

    def similarity(self, embeddings1, embeddings2):
        """Cosine similarity matrix `(len(embeddings1), len(embeddings2))`."""
        a, b = (_unit_rows(x) for x in (embeddings1, embeddings2))
        return a @ b.T

    def similarity_pairwise(self, embeddings1, embeddings2):
        """Cosine similarity of each row of `embeddings1` with the same row of `embeddings2`."""
        return cosine_scores(np.atleast_2d(embeddings1), np.atleast_2d(embeddings2))


def _unit_rows(x):
    x = np.atleast_2d(np.asarray(x, "float64"))
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
