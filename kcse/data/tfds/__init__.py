"""TensorFlow Datasets builders for kcse's evaluation and training data.

| builder | configs | splits | source |
|---|---|---|---|
| `chinese_sts` | ATEC, BQ, LCQMC, PAWSX, STS-B | train, validation, test | manual (Su's senteval_cn) |
| `stsb_multi_mt` | de en es fr it ja nl pl pt ru zh | train, validation, test | manual folder, else GitHub |
| `sts_en` | STS12 … STS16, SICK | test | manual folder, else GitHub (brmson/dataset-sts) |
| `nli_zh` | (CNSD SNLI) | train, validation, test | manual |
| `snli` | | train, validation, test | manual folder, else nlp.stanford.edu |

Every builder prepares offline from a manual folder laid out like
`../shared/data` (`DownloadConfig(manual_dir=...)`); builders with a public
source download only the files the manual folder lacks. Reading goes through
the plain readers of `kcse.data` (same checks, same counts), and the
examples keep their file order (`disable_shuffling=True`).

`chinese_sts`, `stsb_multi_mt`, `sts_en` and `nli_zh` are registered with
TFDS when this package is imported (`tfds.builder("sts_en/STS12", ...)`);
TFDS has its own `snli`, so kcse's (`kcse.data.Snli`, no "-" labels,
`sentence1`/`sentence2` fields) is used through its class only.

Example:
```python
import tensorflow_datasets as tfds
import kcse.data

builder = kcse.data.ChineseSts(config="STS-B", data_dir="tfds")
builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
    manual_dir=kcse.data.BUNDLED_CHINESE_STS))  # or your senteval_cn folder
test = builder.as_dataset(split="test")  # sentence1, sentence2, label
```
"""

from kcse.foundation import optional_packages
from kcse.public_api import exports

# Without tensorflow-datasets: one line naming it, not a traceback from a builder.
optional_packages.require("tensorflow_datasets", "kcse's TFDS builders (kcse.data.tfds)")

from kcse.data.tfds.chinese_sts import ChineseSts  # noqa: E402
from kcse.data.tfds.nli_zh import NliZh  # noqa: E402
from kcse.data.tfds.snli import Snli  # noqa: E402
from kcse.data.tfds.sts_en import StsEn  # noqa: E402
from kcse.data.tfds.stsb_multi_mt import StsbMultiMt  # noqa: E402

BUILDERS = (ChineseSts, StsbMultiMt, StsEn, NliZh, Snli)

__all__, __getattr__, __dir__ = exports(__name__)
