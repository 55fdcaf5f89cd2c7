"""`stsb_multi_mt`: the STS Benchmark and its translations (PhilipMay/stsb-multi-mt)."""

import textwrap

import numpy as np
import tensorflow_datasets as tfds

from kcse.data import english
from kcse.data.tfds.builder_base import RELEASE_NOTES
from kcse.data.tfds.builder_base import SPLITS
from kcse.data.tfds.builder_base import VERSION
from kcse.data.tfds.builder_base import Builder
from kcse.data.tfds.builder_base import download
from kcse.data.tfds.builder_base import local_file
from kcse.data.tfds.builder_base import manual_dir_or_none
from kcse.data.tfds.builder_base import pair_features
from kcse.data.tfds.builder_base import similarity_examples

_STSB_CITATION = """\
@misc{may2021stsbmultimt,
  title = {Machine translated multilingual {STS} benchmark dataset},
  author = {May, Philip},
  year = {2021},
  howpublished = {\\url{https://github.com/PhilipMay/stsb-multi-mt}}
}
@inproceedings{cer-etal-2017-semeval,
  title = {{S}em{E}val-2017 Task 1: Semantic Textual Similarity Multilingual and Crosslingual Focused Evaluation},
  author = {Cer, Daniel and Diab, Mona and Agirre, Eneko and Lopez-Gazpio, I{\\~n}igo and Specia, Lucia},
  booktitle = {Proceedings of the 11th International Workshop on Semantic Evaluation (SemEval-2017)},
  year = {2017}
}"""

_LANGUAGE_NAMES = {
    "de": "German", "en": "English (the original)", "es": "Spanish",
    "fr": "French", "it": "Italian", "ja": "Japanese", "nl": "Dutch",
    "pl": "Polish", "pt": "Portuguese", "ru": "Russian",
    "zh": "Chinese (simplified)",
}


class StsbMultiMt(Builder):
    """STS Benchmark in English and DeepL translations (PhilipMay/stsb-multi-mt).

    Files missing from the manual folder are downloaded from GitHub.

    Example:
    ```python
    import pathlib

    import tensorflow_datasets as tfds

    import kcse

    # A real manual folder holds the stsb-multi-mt CSVs; here a tiny English
    # one with all three splits (nothing to download).
    pathlib.Path("manual/stsb_multi_mt").mkdir(parents=True)
    for split in ("train", "dev", "test"):
        pathlib.Path(f"manual/stsb_multi_mt/stsb-en-{split}.csv").write_text(
            "A man plays a guitar.,A man plays an instrument.,4.5\\n"
            "A woman cooks.,A dog runs.,0.0\\n", encoding="utf-8")
    builder = kcse.data.StsbMultiMt(config="en", data_dir="tfds")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir="manual"))
    builder.info.splits["validation"].num_examples  # 2
    [float(row["score"]) for row in tfds.as_numpy(builder.as_dataset(split="test"))]  # [4.5, 0.0]
    ```
    """

    VERSION = VERSION
    RELEASE_NOTES = RELEASE_NOTES
    DATA_CARD = "stsb_multi_mt.md"
    BUILDER_CONFIGS = [
        tfds.core.BuilderConfig(
            name=language,
            description=f"STS Benchmark, {_LANGUAGE_NAMES[language]}.",
        )
        for language in english.STSB_MULTI_MT_LANGUAGES
    ]
    MANUAL_DOWNLOAD_INSTRUCTIONS = textwrap.dedent("""\
        Optional (the files are downloaded from GitHub otherwise): put the CSVs
        of https://github.com/PhilipMay/stsb-multi-mt/tree/main/data in

            <manual_dir>/stsb_multi_mt/stsb-<language>-{train,dev,test}.csv

        (or directly in <manual_dir>/).
        """)

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description=(
                "The STS Benchmark (English sentence pairs scored 0-5) and its "
                "machine translations (DeepL) by Philip May. "
                + self.builder_config.description
                + " Data card: data_cards/stsb_multi_mt.md."
            ),
            features=pair_features({"score": np.float32}),
            homepage=english.STSB_MULTI_MT_SOURCE,
            citation=_STSB_CITATION,
            license=(
                "Same as the STS Benchmark: scores CC BY-SA 4.0; the text of each "
                "source corpus has its own licence (see the repository's LICENSE)."
            ),
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        language = self.builder_config.name
        root = manual_dir_or_none(dl_manager)
        files, missing = {}, {}
        for split in english.STSB_MULTI_MT_SPLITS:
            name = f"stsb-{language}-{split}.csv"
            files[split] = local_file(root, [f"stsb_multi_mt/{name}", name])
            if files[split] is None:
                missing[split] = english.stsb_multi_mt_url(language, split)
        if missing:
            files.update(
                download(dl_manager, missing, root, f"stsb-multi-mt {language} "
                          f"{', '.join(missing)}")
            )
        return {
            name: self._generate_examples(files["dev" if split == "valid" else split])
            for name, split in SPLITS.items()
        }

    def _generate_examples(self, path):
        yield from similarity_examples(english.read_stsb_csv(path), "score")
