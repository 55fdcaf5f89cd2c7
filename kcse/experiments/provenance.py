"""Where a result comes from: software versions, code commit, date, digests.

Every cell of a comparison records `run_provenance()`, and its identity
holds digests of what it was computed from (`folder_digest` of a model
folder, `content_digest` of the sentences and labels), so that a result is
never reused for other inputs.

Example:
```python
from kcse.experiments import provenance

provenance.run_provenance()
# {"kcse": "0.1.0", "keras": "3.15.1", "keras_hub": "0.32.0",
#  "tensorflow": "2.21.0", "backend": "tensorflow",
#  "git_commit": "4901964…", "date": "2026-11-23T10:01:00+00:00"}
provenance.content_digest(["一个女孩在梳头。", 4.2])  # 16 hex digits
```
"""

import datetime
import functools
import hashlib
import importlib.metadata
import json
import pathlib
import subprocess

import keras

DIGEST_LENGTH = 16


def content_digest(value):
    """A short SHA-256 of `value`'s canonical JSON (lists, dicts, numbers, str)."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=_plain)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_LENGTH]


def _plain(value):
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    raise TypeError(f"cannot digest a {type(value).__name__}")


def folder_digest(path):
    """A digest of the names, sizes and modification times of a folder's files.

    It changes whenever a file of the folder is written again (new weights
    in the same place), without reading gigabytes of weights; touching a
    file without changing it also changes it (a result is then recomputed,
    never reused wrongly). A file gives its own digest.
    """
    path = pathlib.Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    entries = []
    for file in files:
        stat = file.stat()
        entries.append([str(file.relative_to(path)) if path.is_dir() else file.name,
                        stat.st_size, stat.st_mtime_ns])
    return content_digest(entries)


def package_version(name):
    """The installed version of distribution `name`, or None."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def git_commit():
    """The commit of the kcse source tree, `+dirty` if it has changes; or None.

    None when kcse is not run from a git checkout (an installed wheel) or
    git is missing.
    """
    folder = pathlib.Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
        changes = subprocess.run(
            ["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if changes else "") if commit else None


def run_provenance():
    """Versions of kcse and its stack, the git commit, the date (UTC)."""
    return {
        "kcse": package_version("kcse"),
        "keras": keras.__version__,
        "keras_hub": package_version("keras-hub"),
        "tensorflow": package_version("tensorflow"),
        "backend": keras.config.backend(),
        "git_commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
