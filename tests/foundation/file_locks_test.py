"""Claims on outputs: one holder at a time, across processes, released by
the end of the body or of the process however it ends."""

import os
import pathlib
import signal
import subprocess
import sys

import pytest

from kcse.foundation import file_locks

# Claims its argument, says so on stdout, then waits to be killed.
HOLDER = """
import sys, time
from kcse.foundation import file_locks
with file_locks.claiming(sys.argv[1]):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_claim_held_by_another_process_is_refused_until_it_is_killed(tmp_path):
    output = tmp_path / "served"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(output)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        with pytest.raises(file_locks.OutputClaimedError) as refused:
            with file_locks.claiming(output):
                pass
        assert refused.value.pid == holder.pid
        assert str(refused.value) == (
            f"{output} is being written by process {holder.pid} (a kcse run on the same "
            "output); wait for it to end or choose another output")
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    # The kill left its claim file, hidden, which blocks no one.
    assert [path.name for path in tmp_path.iterdir()] == [".served.kcse-claim"]
    with file_locks.claiming(output):
        assert file_locks.holder_pid(file_locks.claim_path(output)) == os.getpid()
    assert list(tmp_path.iterdir()) == []


def test_a_claim_is_released_and_removed_when_the_body_fails(tmp_path):
    output = tmp_path / "new" / "deeper" / "vectors.npy"
    with pytest.raises(KeyboardInterrupt):
        with file_locks.claiming(output):
            assert file_locks.claim_path(output).is_file()
            with pytest.raises(file_locks.OutputClaimedError, match=str(os.getpid())):
                with file_locks.claiming(pathlib.Path(str(output))):
                    pass
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []  # The folders made for the claim too.


def test_a_claim_file_deleted_as_it_is_locked_is_not_taken(tmp_path, monkeypatch):
    """A claim file the holder deleted between our open and our lock (its
    release) is no longer the claim: locking it would let a third run
    claim the new file at the path too. claim_file opens the path again."""
    path = tmp_path / ".x.kcse-claim"
    real_lock, calls = file_locks.lock, []

    def lock_after_a_release(file, blocking, risk):
        calls.append(file)
        held = real_lock(file, blocking, risk)
        if len(calls) == 1:  # The holder released: deleted, then unlocked.
            os.unlink(path)
        return held

    monkeypatch.setattr(file_locks, "lock", lock_after_a_release)
    claim = file_locks.claim_file(path, risk="")
    assert len(calls) == 2 and calls[0].closed
    assert os.fstat(claim.fileno()).st_ino == os.stat(path).st_ino
    monkeypatch.setattr(file_locks, "lock", real_lock)
    assert file_locks.claim_file(path, risk="") is False
    file_locks.release(claim, path)
    assert list(tmp_path.iterdir()) == []


def test_processes_started_together_on_one_output_write_it_once(tmp_path):
    """Five processes claim one output at the same moment: one holds it,
    the four others are told who does."""
    script = """
import pathlib, sys, time
from kcse.foundation import file_locks
output, index = pathlib.Path(sys.argv[1]), sys.argv[2]
(output.parent / f"ready.{index}").touch()
while len(list(output.parent.glob("ready.*"))) < 5:  # All start together.
    time.sleep(0.01)
try:
    with file_locks.claiming(output):
        for _ in range(6000):  # Held until the four others have tried.
            if len(list(output.parent.glob("tried.*"))) == 4:
                break
            time.sleep(0.01)
        print("wrote")
except file_locks.OutputClaimedError as error:
    print(error)
    (output.parent / f"tried.{index}").touch()
"""
    runs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path / "out"), str(index)],
                             stdout=subprocess.PIPE, text=True) for index in range(5)]
    lines = [run.communicate()[0].strip() for run in runs]
    assert lines.count("wrote") == 1, lines
    holder = runs[lines.index("wrote")].pid
    assert all(line.startswith(f"{tmp_path / 'out'} is being written by process {holder} ")
               for line in lines if line != "wrote"), lines


def test_two_spellings_of_one_output_share_its_claim(tmp_path, monkeypatch):
    (tmp_path / "runs").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "runs")
    monkeypatch.chdir(tmp_path / "runs")
    with file_locks.claiming(tmp_path / "runs" / "x"):
        for spelling in ("x", "../link/x", "./x/../x"):
            with pytest.raises(file_locks.OutputClaimedError,
                               match=f"^{spelling} is being written by process {os.getpid()}"):
                with file_locks.claiming(spelling):
                    pass
    assert list((tmp_path / "runs").iterdir()) == []
