"""Where a result comes from: software versions, code commit, date, digests.

Every cell of a comparison records `run_provenance()`; its identity holds
digests of what it was computed from (`kcse.foundation.digests`), so that a result is
never reused for other inputs.

Example:
```python
from kcse.experiments import provenance

provenance.run_provenance()
# {"kcse": "0.1.0", "keras": "3.15.1", "keras_hub": "0.32.0",
#  "tensorflow": "2.21.0", "backend": "tensorflow",
#  "git_commit": "4901964…", "date": "2026-11-23T10:01:00+00:00"}
```
"""

import datetime
import functools
import importlib.metadata
import pathlib
import subprocess

import keras

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
