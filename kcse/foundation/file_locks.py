"""Locks and claims on files, released when their process ends.

A claim is a `flock` held on a small file: the process that holds it may
write what the claim is for; any other learns that at once
(non-blocking), and a process that dies, however, releases its claims
with it. Two uses: the cells of a shared results folder
(`kcse.experiments.results.store.ResultStore`), and the output of a `kcse`
command (`claiming`), so that two commands started together on one new
output do not both write it.

On a file system without locks (some network mounts) kcse warns once and
goes on without them.

Example:
```python
from kcse.foundation import file_locks

with file_locks.claiming("runs/e5"):  # OutputClaimedError if another run holds it
    ...  # write runs/e5
```
"""

import contextlib
import errno
import os
import pathlib
import time
import warnings

from kcse.foundation import atomic_files

try:
    import fcntl
except ImportError:  # Windows: no flock.
    fcntl = None

# errno values of a file system that does not lock (NFS without lockd...).
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
_warned_no_locks = []


class OutputClaimedError(FileExistsError):
    """Another live process is writing `path` (`pid`, when it said so)."""

    def __init__(self, path, pid=None):
        self.path, self.pid = pathlib.Path(path), pid
        holder = f"process {pid}" if pid else "another process"
        super().__init__(errno.EEXIST, f"{path} is being written by {holder} "
                         "(a kcse run on the same output); wait for it to end or "
                         "choose another output", str(path))

    def __str__(self):
        return self.strerror


def lock(file, blocking, risk):
    """flock's exclusive lock on open `file`: True if held, False if another
    holder has it (non-blocking only), None where locks are unsupported
    (then a warning, once, says `risk`)."""
    try:
        if fcntl is None:
            raise OSError(errno.ENOSYS, "no flock on this platform")
        fcntl.flock(file, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        return True
    except BlockingIOError:
        return False
    except OSError as error:
        if error.errno not in _NO_LOCKS:
            raise
        if not _warned_no_locks:
            _warned_no_locks.append(True)
            warnings.warn(f"{file.name}: files cannot be locked here "
                          f"({error.strerror}); {risk}", stacklevel=3)
        return None


def unlock(file):
    """Releases the lock `lock` took on `file` (a no-op without flock)."""
    if fcntl is not None:
        fcntl.flock(file, fcntl.LOCK_UN)


def claim_file(path, risk):
    """An open claim file at `path` holding its lock; False if another
    process holds it (`risk`: as `lock`).

    A holder deletes its file before it lets the lock go (`release`): a
    file locked after that is no longer at `path`, and is opened again.
    """
    while True:
        file = open(path, "ab", buffering=0)
        held = lock(file, blocking=False, risk=risk)
        if held is False:
            file.close()
            return False
        try:
            current = os.stat(path)
        except FileNotFoundError:
            current = None
        opened = os.fstat(file.fileno())
        if held is None or (current is not None and (current.st_dev, current.st_ino)
                            == (opened.st_dev, opened.st_ino)):
            return file
        file.close()  # Released and deleted meanwhile: claim the new one.


def release(file, path=None):
    """Closes a claim file (releasing its lock), deleting it first at `path`.

    Deleted while still locked: a process that opened it meanwhile then
    locks a file no longer at `path`, and opens `path` again (`claim_file`).
    """
    if path is not None:
        with contextlib.suppress(OSError):
            os.unlink(path)
    file.close()


def claim_path(output):
    """The hidden claim file of `output`, beside it: `.<name>.kcse-claim`
    (of its resolved path: two spellings of one output share a claim)."""
    output = pathlib.Path(output).resolve()
    return output.parent / f".{output.name}.kcse-claim"


@contextlib.contextmanager
def claiming(output):
    """Holds the claim on `output` (a file or folder to be written) for the body.

    Raises `OutputClaimedError` naming the holder's pid when another live
    process holds it, and `kcse.foundation.atomic_files.WriteError` naming `output`
    when the claim file cannot be made. The claim file (`claim_path`) is
    deleted when the body ends, however it ends; one a killed process left
    behind holds no lock and is taken over by the next claim. Folders made
    to hold it are removed again when empty.
    """
    path = claim_path(output)
    made = [folder for folder in [path.parent, *path.parent.parents] if not folder.exists()]
    try:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            file = claim_file(path, risk=f"two kcse runs writing {output} at once are "
                              "not kept apart")
        except OSError as error:  # A full disk, a read-only file system...
            raise atomic_files.WriteError(output, error) from None
        if file is False:
            raise OutputClaimedError(output, holder_pid(path))
        with contextlib.suppress(OSError):  # The pid is for the message only.
            os.ftruncate(file.fileno(), 0)
            os.write(file.fileno(), str(os.getpid()).encode("ascii"))
        try:
            yield
        finally:
            release(file, path)
    finally:
        for folder in made:  # Deepest first; only if still empty.
            with contextlib.suppress(OSError):
                folder.rmdir()


def holder_pid(path, tries=20):
    """The pid written in claim file `path`, or None. The holder writes it
    just after it locks: an empty file is read again a few times."""
    for _ in range(tries):
        try:
            text = pathlib.Path(path).read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        if text:
            return int(text) if text.isdigit() else None
        time.sleep(0.005)
    return None
