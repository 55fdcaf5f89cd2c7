import os

from kcse.foundation import digests


def test_folder_digest_changes_when_a_file_is_written_again(tmp_path):
    (tmp_path / "bert_model.ckpt.index").write_bytes(b"index")
    (tmp_path / "vocab.txt").write_text("[PAD]\n")
    first = digests.folder_digest(tmp_path)
    assert digests.folder_digest(tmp_path) == first
    stat = (tmp_path / "vocab.txt").stat()
    (tmp_path / "vocab.txt").write_text("[UNK]\n")  # Same size, new content.
    os.utime(tmp_path / "vocab.txt", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))
    assert digests.folder_digest(tmp_path) != first


def test_content_digest_is_canonical():
    assert digests.content_digest({"a": 1, "b": [1.5, "句子"]}) == (
        digests.content_digest({"b": [1.5, "句子"], "a": 1}))
    assert digests.content_digest([1, 2]) != digests.content_digest([2, 1])
    assert len(digests.content_digest("x")) == 16
