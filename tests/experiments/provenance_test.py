import os
import subprocess

import keras

import kcse
from kcse.experiments import provenance


def test_folder_digest_changes_when_a_file_is_written_again(tmp_path):
    (tmp_path / "bert_model.ckpt.index").write_bytes(b"index")
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    first = provenance.folder_digest(tmp_path)
    assert provenance.folder_digest(tmp_path) == first
    stat = (tmp_path / "vocab.txt").stat()
    (tmp_path / "vocab.txt").write_text("[UNK]\n")  # Same size, new content.
    os.utime(tmp_path / "vocab.txt", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert provenance.folder_digest(tmp_path) != first


def test_content_digest_is_canonical():
    assert provenance.content_digest({"a": 1, "b": [1.5, "句子"]}) == (
        provenance.content_digest({"b": [1.5, "句子"], "a": 1}))
    assert provenance.content_digest([1, 2]) != provenance.content_digest([2, 1])
    assert len(provenance.content_digest("x")) == 16


def test_run_provenance_names_the_stack_and_the_commit():
    origin = provenance.run_provenance()
    assert origin["kcse"] == kcse.__version__ and origin["keras"] == keras.__version__
    assert origin["backend"] == keras.config.backend()
    folder = os.path.dirname(provenance.__file__)
    head = subprocess.run(["git", "-C", folder, "rev-parse", "HEAD"],
                          capture_output=True, text=True)
    if head.returncode == 0:  # A checkout: the commit, maybe "+dirty".
        assert origin["git_commit"].split("+")[0] == head.stdout.strip()
    else:
        assert origin["git_commit"] is None
    assert origin["date"].endswith("+00:00")
