"""Writing files and folders so that a kill never leaves a broken one.

Everything kcse writes goes first to a temporary name in the destination's
folder and is then renamed into place (`os.replace`, atomic on POSIX and
Windows within one file system). A process killed at any moment leaves
either the previous file, untouched, or the new one, complete; at worst a
hidden temporary (`.<name>.<random>.tmp<suffix>`) stays behind beside it.
A write that fails (a full disk, a read-only file system) or is
interrupted (Ctrl-C) removes its temporary and the folders it created,
and a failed write raises `WriteError`, which names the destination, not
the temporary, and the space free there.

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
import errno
import json
import math
import os
import pathlib
import shutil
import tempfile

from kcse import interrupts

TEMPORARY_MARK = ".tmp"

# errno values that mean "the destination cannot take the file": reading a
# file never gives them, so they name a write whichever file raised them.
SPACE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
WRITE_ERRORS = SPACE_ERRORS + (errno.EROFS, errno.EIO)

# The destinations this process has written, in order (`replacing`,
# `replace_directory`): what an interrupted command says it kept.
written = []


class WriteError(OSError):
    """`path` could not be written; the message says why and the free space.

    Raised by `replacing` and `writing_folder` in place of the `OSError` of
    the temporary they wrote: its `filename` is the destination.
    """

    def __init__(self, path, error, needed_bytes=None):
        path = pathlib.Path(path)
        reason = error.strerror or str(error)
        if error.errno in SPACE_ERRORS:
            reason += f" ({free_space_text(path)}"
            reason += f", about {size_text(needed_bytes)} needed)" if needed_bytes else ")"
        super().__init__(error.errno, f"cannot write {path}: {reason}", str(path))

    def __str__(self):
        return self.strerror


def size_text(count):
    """`count` bytes in words: `"3.2 MB"`."""
    for unit in ("bytes", "KB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1000


def free_space_text(path):
    """`"12.0 MB free there"` for the file system that would hold `path`."""
    try:
        return f"{size_text(shutil.disk_usage(_existing_folder(path)).free)} free there"
    except OSError:
        return "free space unknown"


def check_room(path, needed_bytes):
    """Raises `WriteError` (ENOSPC) when the file system of `path` has less
    than `needed_bytes` free: a check before work whose result would be
    lost for want of space."""
    if shutil.disk_usage(_existing_folder(path)).free < needed_bytes:
        raise WriteError(path, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), needed_bytes)


def is_write_error(error, *paths):
    """Whether `OSError` `error` came from writing one of `paths` (or any
    file, for errors only writes give: `WRITE_ERRORS`)."""
    names = {str(path) for path in paths}
    return error.errno in WRITE_ERRORS or (error.filename is not None
                                           and str(error.filename) in names)


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
    the temporary is removed (or, after a kill, left behind hidden), with
    the folders made for it. An `OSError` of writing becomes `WriteError`
    naming `path`.
    """
    with writing(path, directory=False) as temporary:
        yield temporary
        _flush_to_disk(temporary)
        interrupts.check()  # A Ctrl-C a library swallowed: not renamed.
        os.replace(temporary, path)
        written.append(pathlib.Path(path))


@contextlib.contextmanager
def writing_folder(path):
    """Yields an empty temporary folder; on success it replaces `path`
    (`replace_directory`). Otherwise as `replacing`."""
    with writing(path, directory=True) as temporary:
        yield temporary
        interrupts.check()
        replace_directory(temporary, path)


@contextlib.contextmanager
def writing(path, directory):
    """A temporary sibling of `path` (file or folder), removed with the
    folders made for it unless the body moved it into place; OSErrors of
    writing become `WriteError`."""
    path = pathlib.Path(path)
    existing = _existing_folder(path)
    made = [folder for folder in path.parents if folder != existing
            and existing in folder.parents]  # Deepest first.
    temporary = None
    try:
        temporary = temporary_sibling(path, directory)
        yield temporary
    except BaseException as error:
        if temporary is not None:
            if directory:
                shutil.rmtree(temporary, ignore_errors=True)
            else:
                temporary.unlink(missing_ok=True)
        for folder in made:  # Deepest first; only if still empty.
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(error, OSError) and not isinstance(error, WriteError) and (
                is_write_error(error, temporary, path)):
            raise WriteError(path, error) from None
        raise


def check_replaceable(path, overwrite):
    """Raises `FileExistsError` when `path` is a file or a non-empty folder
    and not `overwrite` (an empty folder is taken as it is)."""
    path = pathlib.Path(path)
    if not overwrite and path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise FileExistsError(f"{path} exists and is not empty; pass overwrite=True to replace it.")


def _existing_folder(path):
    """The nearest folder above `path` that exists."""
    folder = pathlib.Path(path).parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


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
        written.append(destination)
        return
    if not _exchange(source, destination):
        aside = temporary_sibling(destination, directory=True)
        aside.rmdir()
        os.replace(destination, aside)
        os.replace(source, destination)
        source = aside
    written.append(destination)
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
    """fsync, so that a crash of the machine cannot leave a renamed empty
    file. A file system that cannot fsync is let be; one that fails to
    store the data (ENOSPC, EIO at fsync) raises."""
    try:
        with open(path, "rb+") as file:
            os.fsync(file.fileno())
    except OSError as error:
        if error.errno in WRITE_ERRORS:
            raise
