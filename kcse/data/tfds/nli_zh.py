"""`nli_zh`: CNSD's Chinese SNLI (machine-translated SNLI)."""

import os
import pathlib
import textwrap

import tensorflow_datasets as tfds

from kcse.data import nli
from kcse.data.tfds.builder_base import RELEASE_NOTES
from kcse.data.tfds.builder_base import VERSION
from kcse.data.tfds.builder_base import Builder
from kcse.data.tfds.builder_base import local_file
from kcse.data.tfds.builder_base import nli_examples
from kcse.data.tfds.builder_base import nli_features
from kcse.data.tfds.chinese_sts import CNSD_CITATION
from kcse.data.tfds.snli import SNLI_CITATION

CNSD_FILES = {
    "train": "cnsd_snli_v1.0.train.jsonl",
    "validation": "cnsd_snli_v1.0.dev.jsonl",
    "test": "cnsd_snli_v1.0.test.jsonl",
}


class NliZh(Builder):
    """CNSD's Chinese SNLI (machine-translated SNLI), "-" labels left out.

    Example:
    ```python
    import json
    import pathlib

    import tensorflow_datasets as tfds

    import kcse

    # A real manual folder holds CNSD's files; here tiny ones in its layout
    # (cnsd/cnsd_snli_v1.0.{train,dev,test}.jsonl).
    pathlib.Path("manual/cnsd").mkdir(parents=True)
    rows = [("一个人在骑马。", "一个人在户外。", "entailment"),
            ("一个人在骑马。", "一个人在睡觉。", "contradiction"),
            ("孩子们在微笑。", "他们在对父母微笑。", "-")]
    for split in ("train", "dev", "test"):
        pathlib.Path(f"manual/cnsd/cnsd_snli_v1.0.{split}.jsonl").write_text("".join(
            json.dumps({"sentence1": a, "sentence2": b, "gold_label": g}) + "\\n"
            for a, b, g in rows), encoding="utf-8")
    builder = kcse.data.NliZh(data_dir="tfds")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir="manual"))
    test = list(tfds.as_numpy(builder.as_dataset(split="test")))
    [int(row["label"]) for row in test]  # [0, 2] (the "-" pair is left out)
    builder.info.features["label"].names  # ['entailment', 'neutral', 'contradiction']
    ```
    """

    VERSION = VERSION
    RELEASE_NOTES = RELEASE_NOTES
    DATA_CARD = "nli_zh.md"
    MANUAL_DOWNLOAD_INSTRUCTIONS = textwrap.dedent("""\
        CNSD has no stable public URL (Baidu Pan link in the README of
        https://github.com/pluto-junzeng/CNSD; data_cards/nli_zh.md of kcse).
        Put its Chinese-SNLI files in

            <manual_dir>/cnsd/cnsd_snli_v1.0.{train,dev,test}.jsonl

        (or <manual_dir>/nli_zh/... or directly in <manual_dir>/).
        """)

    def _info(self):
        return tfds.core.DatasetInfo(
            builder=self,
            description=(
                "Chinese-SNLI of CNSD (pluto-junzeng/CNSD): SNLI translated into "
                "Chinese; premise sentence1, hypothesis sentence2, label "
                "entailment/neutral/contradiction. Pairs without a gold label "
                "are left out. Data card: data_cards/nli_zh.md."
            ),
            features=nli_features(),
            homepage="https://github.com/pluto-junzeng/CNSD",
            citation=CNSD_CITATION + "\n" + SNLI_CITATION,
            license="CNSD: academic research only, no commercial use.",
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        root = pathlib.Path(os.fspath(dl_manager.manual_dir))
        paths = {}
        for split, file in CNSD_FILES.items():
            candidates = [f"cnsd/{file}", f"nli_zh/{file}", file]
            paths[split] = local_file(root, candidates)
            if paths[split] is None:
                raise FileNotFoundError(
                    f"CNSD {split} file not found: no file at "
                    f"{' or '.join(str(root / c) for c in candidates)}.\n"
                    + self.MANUAL_DOWNLOAD_INSTRUCTIONS
                )
        return {split: self._generate_examples(path) for split, path in paths.items()}

    def _generate_examples(self, path):
        yield from nli_examples(nli.read_nli(path))
