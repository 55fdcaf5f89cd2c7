"""Writing files and folders so that a kill never leaves a broken one.

Everything kcse writes goes first to a temporary name in the destination's
folder and is then renamed into place (`os.replace`, atomic on POSIX and
Windows within one file system). A process killed at any moment leaves
either the previous file, untouched, or the new one, complete; at worst a
hidden temporary (`.<name>.<random>.tmp<suffix>`) stays behind beside it.

Example:
```python
from kcse import atomic_files

atomic_files.write_json("out/results.json", {"spearman": 81.2})
with atomic_files.replacing("out/vectors.npy") as temporary:
    numpy.save(temporary, vectors)  # renamed to out/vectors.npy on success
```
"""

import contextlib
import ctypes
import json
import math
import os
import pathlib
import shutil
import tempfile

TEMPORARY_MARK = ".tmp"


def temporary_sibling(path, directory=False):
    """A new, unused hidden path beside `path` that keeps its suffix.

    The suffix is kept because some writers insist on it (Keras saves only
    to `*.keras`). With `directory`, the path is created as an empty folder;
    otherwise as an empty file.
    """
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{path.name}."
    suffix = TEMPORARY_MARK + "".join(path.suffixes[-1:])
    if directory:
        temporary = pathlib.Path(tempfile.mkdtemp(suffix, prefix, path.parent))
    else:
        handle, name = tempfile.mkstemp(suffix, prefix, path.parent)
        os.close(handle)
        temporary = pathlib.Path(name)
    # mkstemp / mkdtemp make private (0600 / 0700) entries; the renamed file
    # must have the mode the one it replaces had, or a new file's default.
    os.chmod(temporary, _mode_for(path, directory))
    return temporary


def _mode_for(path, directory):
    """The permission bits of `path` if it exists, else the umask's default."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return (0o777 if directory else 0o666) & ~umask


@contextlib.contextmanager
def replacing(path):
    """Yields a temporary file path; on success it replaces `path`.

    If the body raises (or the process dies), `path` is left as it was and
    the temporary is removed (or, after a kill, left behind hidden).
    """
    path = pathlib.Path(path)
    temporary = temporary_sibling(path)
    try:
        yield temporary
        _flush_to_disk(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` atomically."""
    with replacing(path) as temporary:
        temporary.write_text(text, encoding="utf-8")


def strict(value):
    """`value` with every non-finite float (NaN, ±Inf) replaced by None.

    JSON has no NaN: `json.dumps` would write a bare `NaN` that strict
    parsers (JavaScript, jq, Go) reject. An undefined number is `null`.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: strict(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(item) for item in value]
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return strict(value.item())  # numpy scalars
    return value


def write_json(path, value, indent=1):
    """Writes `value` as strict JSON (non-finite floats as null), atomically."""
    text = json.dumps(strict(value), indent=indent, ensure_ascii=False, allow_nan=False)
    write_text(path, text + "\n")


def replace_directory(source, destination):
    """Moves the folder `source` to `destination`, replacing what is there.

    Where the kernel can swap two paths in one step (Linux `renameat2`
    with `RENAME_EXCHANGE`), `destination` is at every moment either the
    old folder or the new one; elsewhere there is a moment between two
    renames when it is absent (the old folder is then at `source`). What was
    there, a folder or a file, is deleted afterwards.
    """
    source, destination = pathlib.Path(source), pathlib.Path(destination)
    if not destination.exists():
        os.replace(source, destination)
        return
    if not _exchange(source, destination):
        aside = temporary_sibling(destination, directory=True)
        aside.rmdir()
        os.replace(destination, aside)
        os.replace(source, destination)
        source = aside
    if source.is_dir() and not source.is_symlink():
        shutil.rmtree(source, ignore_errors=True)
    else:  # `destination` was a file or a link: it is not followed.
        source.unlink(missing_ok=True)


def _exchange(a, b):
    """Swaps paths `a` and `b` atomically if the platform can; True if done."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange)
    return result == 0


def _flush_to_disk(path):
    """fsync, so that a crash of the machine cannot leave a renamed empty file."""
    with contextlib.suppress(OSError):
        with open(path, "rb+") as file:
            os.fsync(file.fileno())
