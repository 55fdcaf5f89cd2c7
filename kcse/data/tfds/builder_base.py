"""What kcse's TFDS builders share: version, split names, base class, helpers."""

import inspect
import os
import pathlib

import numpy as np
import tensorflow_datasets as tfds
from etils import epath

from kcse.data import nli

VERSION = tfds.core.Version("1.0.0")
RELEASE_NOTES = {"1.0.0": "First release."}

SPLITS = {"train": "train", "validation": "valid", "test": "test"}


class Builder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Base of kcse's builders.

    `code_path` is the builder's source file. TFDS 4.9.10's own lookup
    touches `importlib_resources`, which it only declares for Python < 3.9
    (tensorflow/datasets#11212), so builders outside TFDS fail without it.
    """

    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls):
        return epath.Path(inspect.getfile(cls))


def manual_dir_or_none(dl_manager):
    """The manual folder if one was given and is not empty, else None."""
    try:
        return pathlib.Path(os.fspath(dl_manager.manual_dir))
    except AssertionError:
        return None


def local_file(root, candidates):
    """The first of `candidates` (relative to `root`) that is a file, else None."""
    if root is None:
        return None
    for candidate in candidates:
        if (root / candidate).is_file():
            return root / candidate
    return None


def download(dl_manager, urls, root, what):
    """dl_manager.download(urls), with an error that says how to go offline."""
    try:
        return dl_manager.download(urls)
    except Exception as error:  # noqa: BLE001 (any network/IO failure)
        where = f"the manual folder {root}" if root else "no manual folder was given"
        raise FileNotFoundError(
            f"{what}: not found locally ({where}) and the download failed "
            f"({type(error).__name__}: {error}). To prepare offline, put the "
            f"files in the manual folder (DownloadConfig(manual_dir=...)) in "
            f"the layout of ../shared/data."
        ) from error


def pair_features(label_feature, extra=None):
    """Features `sentence1`, `sentence2`, then `label_feature` and `extra`."""
    features = {
        "sentence1": tfds.features.Text(),
        "sentence2": tfds.features.Text(),
    }
    features.update(label_feature)
    features.update(extra or {})
    return tfds.features.FeaturesDict(features)


def similarity_examples(pairs, label_key, extra=None):
    """(index, example) of scored pairs in file order; `extra(index)` adds fields."""
    for index, (s1, s2, score) in enumerate(
        zip(pairs.sentences1, pairs.sentences2, pairs.scores)
    ):
        example = {"sentence1": s1, "sentence2": s2, label_key: np.float32(score)}
        if extra:
            example.update(extra(index))
        yield index, example


def nli_examples(pairs):
    """(index, example) of NLI pairs in file order, label as its class index."""
    for index, (s1, s2, label) in enumerate(
        zip(pairs.sentences1, pairs.sentences2, pairs.labels)
    ):
        yield index, {"sentence1": s1, "sentence2": s2, "label": int(label)}


def nli_features():
    """Pair features with the NLI labels (`nli.NLI_LABELS`) as a ClassLabel."""
    return pair_features({"label": tfds.features.ClassLabel(names=list(nli.NLI_LABELS))})
