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

Nothing kcse did not write is replaced. A write with `replace=False` never
replaces a file or folder that appeared while it was being written
(`OutputExistsError`). A folder `writing_folder` writes lists its files in
`kcse_export.json` (`MANIFEST`); `check_replaceable` lets a later write
replace a folder only when it holds nothing else (`foreign_file`).

Example:
```python
from kcse.foundation import atomic_files

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

from kcse.foundation import interrupts

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


class OutputExistsError(WriteError, FileExistsError):
    """`path` appeared (or took files kcse did not write) while kcse wrote
    what was to take its place: it is left as it was, and the new one is
    not kept. `detail` says what was found."""

    def __init__(self, path, detail=None):
        found = f" ({detail.rstrip('.')})" if detail else ""
        super().__init__(path, FileExistsError(
            errno.EEXIST, f"it appeared or changed while kcse was writing it{found}; "
            "it is left as it was and the new one is not kept"))


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


def probe_room(path, size):
    """Raises the `OSError` of writing `size` bytes beside `path`, if any.

    Writers that do not say that a write failed (ONNX Runtime's and onnx's
    C++ ones, on a full disk): ONNX Runtime reports "Protobuf serialization failed",
    the quantiser a short file that it then cannot parse. After such an
    error this writes (and removes) a file of `size` bytes in `path`'s
    folder, so that a full disk is the `OSError` saying so, which
    this module reports as a `WriteError` naming the file.
    """
    probe = pathlib.Path(path).with_name(f".{pathlib.Path(path).name}.room")
    try:
        with open(probe, "wb") as file:
            file.write(bytes(size))
            file.flush()
            os.fsync(file.fileno())
    finally:
        probe.unlink(missing_ok=True)


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
def replacing(path, replace=True):
    """Yields a temporary file path; on success it replaces `path`.

    If the body raises (or the process dies), `path` is left as it was and
    the temporary is removed (or, after a kill, left behind hidden), with
    the folders made for it. An `OSError` of writing becomes `WriteError`
    naming `path`. With `replace=False` a `path` that exists when the file
    is renamed into place (made meanwhile by another program) is kept:
    `OutputExistsError`.
    """
    with writing(path, directory=False) as temporary:
        yield temporary
        _flush_to_disk(temporary)
        interrupts.check()  # A Ctrl-C a library swallowed: not renamed.
        if replace:
            os.replace(temporary, path)
        else:
            _rename_no_replace(temporary, path)
        written.append(pathlib.Path(path))


@contextlib.contextmanager
def writing_folder(path, overwrite=False):
    """Yields an empty temporary folder; on success it becomes `path`.

    Its files are listed in `MANIFEST` (`kcse_export.json`) within it, and
    it replaces `path` (`replace_directory`) when `check_replaceable(path,
    overwrite)` allows it then: an absent or empty folder, or with
    `overwrite` one holding only what kcse wrote. Otherwise as `replacing`.
    """
    with writing(path, directory=True) as temporary:
        yield temporary
        interrupts.check()
        write_manifest(temporary)
        try:  # Again: what appeared while it was written is kept.
            check_replaceable(path, overwrite)
        except FileExistsError as error:
            raise OutputExistsError(path, str(error)) from None
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


# The file `writing_folder` leaves in each folder it writes: the files kcse
# wrote there, which a later `overwrite` may replace (and nothing else).
MANIFEST = "kcse_export.json"


def write_manifest(folder):
    """Lists the files in `folder` (relative, `/`-separated) in its `MANIFEST`."""
    folder = pathlib.Path(folder)
    files = sorted(name for name in _files_in(folder) if name != MANIFEST)
    text = json.dumps({"written_by": "kcse", "files": files}, indent=1) + "\n"
    (folder / MANIFEST).write_text(text, encoding="utf-8")


def foreign_file(folder):
    """The first file in `folder` kcse did not write there (relative to
    it), or None: one not listed in the folder's `MANIFEST`. Without a
    readable manifest, every file is foreign."""
    folder = pathlib.Path(folder)
    try:
        listed = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
        listed = {name for name in listed if isinstance(name, str)}
    except (OSError, ValueError, KeyError, TypeError):
        listed = set()
    return next((name for name in sorted(_files_in(folder))
                 if name != MANIFEST and name not in listed), None)


def _files_in(folder):
    """The relative names of the files (and links) under `folder`; links
    to folders are not followed."""
    for root, folders, files in os.walk(folder):
        here = pathlib.Path(root).relative_to(folder)
        links = [name for name in folders if os.path.islink(os.path.join(root, name))]
        for name in files + links:
            yield (here / name).as_posix()


def check_replaceable(path, overwrite):
    """Raises `FileExistsError` unless a folder may be written at `path`.

    An absent path or an empty folder may; a file or a non-empty folder
    only with `overwrite`, and then only a folder holding nothing but the
    files kcse wrote there (`foreign_file`): a file of the user's (a note,
    the model being exported) is never deleted.
    """
    path = pathlib.Path(path)
    if not path.exists() and not path.is_symlink():
        return
    if not overwrite:
        if not path.is_dir() or any(path.iterdir()):
            raise FileExistsError(f"{path} exists and is not empty; pass overwrite=True "
                                  "to replace it.")
        return
    if not path.is_dir():
        raise FileExistsError(f"{path} is a file; kcse writes a folder only in place of "
                              "a folder it wrote: move it or choose another path.")
    foreign = foreign_file(path)
    if foreign is not None:
        raise FileExistsError(f"{path} holds {foreign}, which kcse did not write there; "
                              "overwrite replaces only a folder kcse wrote (the files its "
                              f"{MANIFEST} lists): move it or choose another path.")


def _existing_folder(path):
    """The nearest folder above `path` that exists."""
    folder = pathlib.Path(path).parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def write_text(path, text, replace=True):
    """Writes `text` (UTF-8) to `path` atomically (`replace`: see `replacing`)."""
    with replacing(path, replace) as temporary:
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


def write_json(path, value, indent=1, replace=True):
    """Writes `value` as strict JSON (non-finite floats as null), atomically
    (`replace`: see `replacing`)."""
    text = json.dumps(strict(value), indent=indent, ensure_ascii=False, allow_nan=False)
    write_text(path, text + "\n", replace)


def replace_directory(source, destination):
    """Moves the folder `source` to `destination`, replacing what is there.

    Where the kernel can swap two paths in one step (Linux `renameat2`
    with `RENAME_EXCHANGE`), `destination` is at every moment either the
    old folder or the new one; elsewhere there is a moment between two
    renames when it is absent (the old folder is then at `source`). What was
    there, a folder or a file, is deleted afterwards.
    """
    source, destination = pathlib.Path(source), pathlib.Path(destination)
    if not destination.exists() and not destination.is_symlink():
        _rename_no_replace(source, destination)  # Not one made meanwhile.
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


def _rename_no_replace(source, destination):
    """Renames `source` to `destination` unless that exists, atomically where
    the kernel can (Linux `renameat2` with `RENAME_NOREPLACE`); else
    `OutputExistsError`."""
    done = _renameat2(source, destination, flags=1)  # RENAME_NOREPLACE
    if done is True:
        return
    if done == errno.EEXIST or os.path.lexists(destination):
        raise OutputExistsError(destination)
    os.rename(source, destination)


def _exchange(a, b):
    """Swaps paths `a` and `b` atomically if the platform can; True if done."""
    return _renameat2(a, b, flags=2) is True  # RENAME_EXCHANGE


def _renameat2(source, destination, flags):
    """Linux `renameat2`: True if done, else its errno (None: no renameat2)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return None
    at_fdcwd = -100
    result = renameat2(at_fdcwd, os.fsencode(source), at_fdcwd, os.fsencode(destination),
                       flags)
    return True if result == 0 else ctypes.get_errno()


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
