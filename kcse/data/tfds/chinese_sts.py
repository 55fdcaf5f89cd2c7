"""`chinese_sts`: Su Jianlin's five Chinese similarity tasks (senteval_cn)."""

import dataclasses
import os
import pathlib
import textwrap

import numpy as np
import tensorflow_datasets as tfds

from kcse.data import chinese
from kcse.data.tfds.builder_base import RELEASE_NOTES
from kcse.data.tfds.builder_base import SPLITS
from kcse.data.tfds.builder_base import VERSION
from kcse.data.tfds.builder_base import Builder
from kcse.data.tfds.builder_base import pair_features
from kcse.data.tfds.builder_base import similarity_examples

_SU_CITATION = """\
@misc{su2021simcse_zh,
  author = {Su, Jianlin},
  title = {SimCSE in Chinese: an evaluation (Chinese title: 中文任务还是SOTA吗？我们给SimCSE补充了一些实验)},
  year = {2021},
  howpublished = {\\url{https://kexue.fm/archives/8348}},
  note = {Code and data bundle: https://github.com/bojone/SimCSE}
}"""

CNSD_CITATION = """\
@misc{cnsd,
  title = {{CNSD}: A large-scale Chinese Nature language inference and Semantic similarity calculation Dataset},
  howpublished = {\\url{https://github.com/pluto-junzeng/CNSD}}
}"""

_TASK_CITATIONS = {
    "ATEC": """\
@misc{atec2018,
  title = {ATEC 2018 NLP competition: question matching (Ant Financial)},
  year = {2018},
  howpublished = {\\url{https://github.com/IceFlameWorm/NLP_Datasets/tree/master/ATEC}}
}""",
    "BQ": """\
@inproceedings{chen2018bq,
  title = {The {BQ} Corpus: A Large-scale Domain-specific {C}hinese Corpus For Sentence Semantic Equivalence Identification},
  author = {Chen, Jing and Chen, Qingcai and Liu, Xin and Yang, Haijun and Lu, Daohe and Tang, Buzhou},
  booktitle = {Proceedings of EMNLP},
  year = {2018}
}""",
    "LCQMC": """\
@inproceedings{liu2018lcqmc,
  title = {{LCQMC}: A Large-scale {C}hinese Question Matching Corpus},
  author = {Liu, Xin and Chen, Qingcai and Deng, Chong and Zeng, Huajun and Chen, Jing and Li, Dongfang and Tang, Buzhou},
  booktitle = {Proceedings of COLING},
  year = {2018}
}""",
    "PAWSX": """\
@inproceedings{pawsx2019emnlp,
  title = {{PAWS-X}: A Cross-lingual Adversarial Dataset for Paraphrase Identification},
  author = {Yang, Yinfei and Zhang, Yuan and Tar, Chris and Baldridge, Jason},
  booktitle = {Proc. of EMNLP},
  year = {2019}
}""",
    "STS-B": CNSD_CITATION,
}

_TASK_DESCRIPTIONS = {
    "ATEC": "ATEC (Ant Financial customer-service question pairs), labels 0/1.",
    "BQ": "BQ Corpus (bank customer-service question pairs), labels 0/1.",
    "LCQMC": "LCQMC (Baidu Zhidao question pairs), labels 0/1.",
    "PAWSX": "PAWS-X Chinese (adversarial paraphrase pairs), labels 0/1.",
    "STS-B": "Chinese STS-B (CNSD's translation of the STS Benchmark), labels 0..5.",
}

_CHINESE_LICENSES = {
    "ATEC": "ATEC competition data; no licence published (research use).",
    "BQ": "BQ Corpus: research use, by application to HIT Shenzhen.",
    "LCQMC": "LCQMC: research use, by application to HIT Shenzhen.",
    "PAWSX": "PAWS-X: free for any use; acknowledge Google LLC as the source.",
    "STS-B": "CNSD: academic research only, no commercial use.",
}


@dataclasses.dataclass(eq=False)
class ChineseStsConfig(tfds.core.BuilderConfig):
    """One of Su's Chinese tasks."""

    task: str = ""
    data_card: str = ""


class ChineseSts(Builder):
    """Su Jianlin's Chinese sentence-similarity tasks (senteval_cn layout).

    Example:
    ```python
    import pathlib

    import tensorflow_datasets as tfds

    import kcse

    # A real manual folder holds Su's senteval_cn bundle; here a tiny ATEC in
    # its layout (all three splits are needed).
    pathlib.Path("manual/ATEC").mkdir(parents=True)
    for split in ("train", "valid", "test"):
        pathlib.Path(f"manual/ATEC/ATEC.{split}.data").write_text(
            "花呗怎么还款\\t借呗怎么还款\\t0\\n怎么更改花呗手机号码\\t花呗怎么改手机号\\t1\\n",
            encoding="utf-8")
    builder = kcse.data.ChineseSts(config="ATEC", data_dir="tfds")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(manual_dir="manual"))
    test = list(tfds.as_numpy(builder.as_dataset(split="test")))
    len(test), test[1]["sentence2"].decode(), float(test[1]["label"])  # (2, '花呗怎么改手机号', 1.0)
    ```
    """

    VERSION = VERSION
    RELEASE_NOTES = RELEASE_NOTES
    DATA_CARD = "chinese_sts.md"
    BUILDER_CONFIGS = [
        ChineseStsConfig(
            name=task,
            description=_TASK_DESCRIPTIONS[task],
            task=task,
            data_card=chinese.DATA_CARDS[task],
        )
        for task in chinese.CHINESE_TASKS
    ]
    MANUAL_DOWNLOAD_INSTRUCTIONS = textwrap.dedent("""\
        These files have no stable public URL. Download Su Jianlin's senteval_cn
        bundle (link in the README of https://github.com/bojone/SimCSE) or the
        original releases (data_cards/chinese_sts.md), and put them in the manual
        folder as

            <manual_dir>/senteval_cn/<TASK>/<TASK>.{train,valid,test}.data

        (or <manual_dir>/<TASK>/...), TASK in ATEC, BQ, LCQMC, PAWSX, STS-B:
        UTF-8, one `sentence1<TAB>sentence2<TAB>label` pair a line.
        """)

    def _info(self):
        task = self.builder_config.task
        return tfds.core.DatasetInfo(
            builder=self,
            description=(
                "The five Chinese tasks of Su Jianlin's SimCSE / BERT-whitening "
                "comparison, in the layout of his senteval_cn bundle. "
                + _TASK_DESCRIPTIONS[task]
                + f" Data card: data_cards/{self.builder_config.data_card}."
            ),
            features=pair_features({"label": np.float32}),
            homepage=chinese.SOURCE_URLS[task],
            citation=_TASK_CITATIONS[task] + "\n" + _SU_CITATION,
            license=_CHINESE_LICENSES[task],
            disable_shuffling=True,
        )

    def _split_generators(self, dl_manager):
        root = pathlib.Path(os.fspath(dl_manager.manual_dir))
        task = self.builder_config.task
        for split in chinese.CHINESE_SPLITS:  # All files, before any is read.
            chinese.chinese_task_path(root, task, split)
        return {
            name: self._generate_examples(root, split)
            for name, split in SPLITS.items()
        }

    def _generate_examples(self, root, split):
        pairs = chinese.read_chinese_task(root, self.builder_config.task, split)
        yield from similarity_examples(pairs, "label")
