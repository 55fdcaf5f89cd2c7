"""Datasets for sentence embeddings: readers and TensorFlow Datasets builders.

Plain readers (built on `kcse.data.read_pairs`):

- `read_chinese_task(data_dir, task, split)`: Su Jianlin's Chinese tasks
  (`CHINESE_TASKS`), `<TASK>/<TASK>.{train,valid,test}.data`, with label
  scale checks. `BUNDLED_CHINESE_STS` is a `data_dir` holding the Chinese
  STS-B shipped with kcse.
- `read_english_sts(data_dir, name)`: STS12–16 (pooled sub-corpora), STS-B,
  SICK-R; `read_stsb_multi_mt(data_dir, language, split)`.
- `read_nli(path)` and `nli_triplets(...)`: SNLI / CNSD JSON lines.
- `file_checksum(path)`: SHA-256, to compare a download with its data card.

TFDS builders (imported on first use, so `import kcse.datasets` does not
import TensorFlow Datasets): `ChineseSts`, `StsbMultiMt`, `StsEn`, `NliZh`,
`Snli`; see `kcse.datasets.tfds_builders`. Data cards: `data_cards/`.
"""

from kcse.datasets.checksums import card_checksums
from kcse.datasets.checksums import file_checksum
from kcse.datasets.checksums import verify_card
from kcse.datasets.chinese import BUNDLED_CHINESE_STS
from kcse.datasets.chinese import CHINESE_SPLITS
from kcse.datasets.chinese import CHINESE_TASKS
from kcse.datasets.chinese import LABEL_SCALES
from kcse.datasets.chinese import SPLIT_SIZES
from kcse.datasets.chinese import LabelScaleError
from kcse.datasets.chinese import chinese_task_path
from kcse.datasets.chinese import read_chinese_task
from kcse.datasets.english import ENGLISH_STS
from kcse.datasets.english import STS_YEARS
from kcse.datasets.english import STSB_MULTI_MT_LANGUAGES
from kcse.datasets.english import STSB_MULTI_MT_SPLITS
from kcse.datasets.english import PooledSentencePairs
from kcse.datasets.english import read_english_sts
from kcse.datasets.english import read_sick_file
from kcse.datasets.english import read_sts_files
from kcse.datasets.english import read_stsb_csv
from kcse.datasets.english import read_stsb_multi_mt
from kcse.datasets.english import sts_file_urls
from kcse.datasets.english import stsb_multi_mt_url
from kcse.datasets.nli import NLI_LABELS
from kcse.datasets.nli import NLIPairs
from kcse.datasets.nli import NLITriplets
from kcse.datasets.nli import nli_triplets
from kcse.datasets.nli import read_nli

_BUILDERS = ("ChineseSts", "StsbMultiMt", "StsEn", "NliZh", "Snli", "BUILDERS")


def __getattr__(name):
    if name in _BUILDERS:
        from kcse.datasets import tfds_builders

        return getattr(tfds_builders, name)
    raise AttributeError(f"module 'kcse.datasets' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_BUILDERS))
