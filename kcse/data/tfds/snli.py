"""kcse's `snli`: SNLI 1.0 from its JSON-lines files (used through its class)."""

import os
import pathlib
import textwrap

import tensorflow_datasets as tfds

from kcse.data import nli
from kcse.data.tfds.builder_base import RELEASE_NOTES
from kcse.data.tfds.builder_base import VERSION
from kcse.data.tfds.builder_base import Builder
from kcse.data.tfds.builder_base import download
from kcse.data.tfds.builder_base import local_file
from kcse.data.tfds.builder_base import manual_dir_or_none
from kcse.data.tfds.builder_base import nli_examples
from kcse.data.tfds.builder_base import nli_features

SNLI_CITATION = """\
@inproceedings{bowman-etal-2015-large,
  title = {A large annotated corpus for learning natural language inference},
  author = {Bowman, Samuel R. and Angeli, Gabor and Potts, Christopher and Manning, Christopher D.},
  booktitle = {Proceedings of the 2015 Conference on Empirical Methods in Natural Language Processing},
  year = {2015}
}"""

SNLI_URL = "https://nlp.stanford.edu/projects/snli/snli_1.0.zip"
SNLI_FILES = {
    "train": "snli_1.0_train.jsonl",
    "validation": "snli_1.0_dev.jsonl",
    "test": "snli_1.0_test.jsonl",
}


class Snli(Builder, skip_registration=True):
    """SNLI 1.0 from its JSON-lines files, "-" gold labels left out.

    Not registered with TFDS (TFDS has its own `snli`): use the class.

    Example:
    ```python
    import json
    import pathlib

    import tensorflow_datasets as tfds

    import kcse

    # Without a manual folder, download_and_prepare() downloads snli_1.0.zip
    # from nlp.stanford.edu; here a tiny extracted copy.
    pathlib.Path("manual/snli_1.0").mkdir(parents=True)
    rows = [("A man sleeps.", "A person rests.", "entailment"),
            ("A man sleeps.", "A man runs.", "contradiction"),
            ("A man sleeps.", "A man dreams.", "-")]
    for split in ("train", "dev", "test"):
        pathlib.Path(f"manual/snli_1.0/snli_1.0_{split}.jsonl").write_text("".join(
            json.dumps({"sentence1": a, "sentence2": b, "gold_label": g}) + "\\n"
            for a, b, g in rows))
    builder = kcse.data.Snli(data_dir="tfds")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir="manual"))
    builder.info.splits["train"].num_examples  # 2 (the "-" pair is left out)
    [row["sentence2"].decode() for row in tfds.as_numpy(builder.as_dataset(split="test"))]
    # ['A person rests.', 'A man runs.']
    ```
    """

    name = "snli"
    VERSION = VERSION
    RELEASE_NOTES = RELEASE_NOTES
    DATA_CARD = "snli.md"
    MANUAL_DOWNLOAD_INSTRUCTIONS = textwrap.dedent(f"""\
        Optional (downloaded otherwise): put {SNLI_URL} (or its extracted
        folder) in the manual folder:

            <manual_dir>/snli_1.0.zip, or
            <manual_dir>/snli_1.0/snli_1.0_{{train,dev,test}}.jsonl

        (also accepted under <manual_dir>/snli/, or the .jsonl files directly).
        """)

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description=(
                "The Stanford Natural Language Inference corpus 1.0 "
                "(premise sentence1, hypothesis sentence2, label "
                "entailment/neutral/contradiction); pairs whose gold label is "
                "'-' are left out. Data card: data_cards/snli.md."
            ),
            features=nli_features(),
            homepage="https://nlp.stanford.edu/projects/snli/",
            citation=SNLI_CITATION,
            license="CC BY-SA 4.0",
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        root = manual_dir_or_none(dl_manager)
        folder = None
        if root is not None:
            for candidate in ("snli_1.0", "snli/snli_1.0", "snli", "."):
                if all((root / candidate / f).is_file() for f in SNLI_FILES.values()):
                    folder = root / candidate
                    break
            if folder is None:
                archive = local_file(root, ["snli_1.0.zip", "snli/snli_1.0.zip"])
                if archive is not None:
                    folder = pathlib.Path(os.fspath(dl_manager.extract(archive))) / "snli_1.0"
        if folder is None:
            archive = download(dl_manager, SNLI_URL, root, "SNLI 1.0")
            folder = pathlib.Path(os.fspath(dl_manager.extract(archive))) / "snli_1.0"
        return {
            split: self._generate_examples(folder / file)
            for split, file in SNLI_FILES.items()
        }

    def _generate_examples(self, path):
        yield from nli_examples(nli.read_nli(path))
