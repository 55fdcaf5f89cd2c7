"""Short digests that key cached and stored results by what they came from.

Light (standard library only): model resolution uses them before Keras loads.

Example:
```python
from kcse.foundation import digests

digests.content_digest(["一个女孩在梳头。", 4.2])  # 16 hex digits
```
"""

import hashlib
import json
import pathlib

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
