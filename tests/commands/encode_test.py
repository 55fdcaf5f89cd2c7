"""`kcse encode` of tests/conftest.py's trained encoder: text and JSON lines
input, .npy and .jsonl output, shards, and the input read lazily."""

import json
import re

import keras
import numpy as np
import pytest

import kcse
from command_runs import kcse_in_process
from kcse.commands.encode import read_texts
from kcse.commands.main import main
from kcse.foundation.arguments import UsageError


def test_encode_text_and_jsonl_in_input_order(trained_command, shared_data, capsys):
    folder, _, _ = trained_command
    pairs = kcse.data.read_pairs(shared_data / "senteval_cn" / "STS-B" / "STS-B.test.data")
    texts = pairs.sentences1[:40] + [""] + pairs.sentences2[:9]  # An empty line stays.
    (folder / "texts.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    model = folder / "run" / "encoder.keras"
    out = kcse_in_process(capsys, "encode", "--model", model, "--input",
                          folder / "texts.txt", "--output", folder / "v.npy")
    assert f"wrote 50 vectors of dimension 8 to {folder / 'v.npy'}: every line of" in out
    encoder = keras.saving.load_model(model)
    np.testing.assert_allclose(np.load(folder / "v.npy"), encoder.encode(texts), atol=1e-6)

    lines = [json.dumps({"id": i, "sentence": t}, ensure_ascii=False) for i, t in enumerate(texts)]
    (folder / "texts.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    kcse_in_process(capsys, "encode", "--model", model, "--input", folder / "texts.jsonl",
                    "--field", "sentence", "--normalize", "--output", folder / "v.jsonl")
    rows = [json.loads(line) for line in (folder / "v.jsonl").read_text().splitlines()]
    assert [row["sentence"] for row in rows] == texts
    assert [row["line"] for row in rows] == list(range(1, 51))
    expected = encoder.encode(texts)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose([row["embedding"] for row in rows], expected, atol=1e-6)
    # Written through temporary names, renamed when complete: none is left.
    assert not [path.name for path in folder.iterdir() if ".tmp" in path.name]


def test_encode_shards_reassemble_to_the_whole_output(trained_command, shared_data, capsys):
    """Three `--shard K/3` runs, put back as documented, equal the whole run.

    In process (the console script's `main`): eight runs of a process each
    would mostly time TensorFlow's start.
    """
    folder, _, _ = trained_command
    pairs = kcse.data.read_pairs(shared_data / "senteval_cn" / "STS-B" / "STS-B.test.data")
    texts = pairs.sentences1[:70] + pairs.sentences1[:5]  # Repeated lines too.
    (folder / "shard_in.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    model = folder / "run" / "encoder.keras"

    def encode(output, *extra):
        return kcse_in_process(capsys, "encode", "--model", model, "--input",
                               folder / "shard_in.txt", "--output", output, *extra)

    encode(folder / "whole.npy")
    encode(folder / "whole.jsonl")
    whole = np.load(folder / "whole.npy")
    reassembled = np.full_like(whole, np.nan)
    records = []
    for index in (1, 2, 3):
        out = encode(folder / f"shard{index}.npy", "--shard", f"{index}/3")
        assert (f"wrote 25 vectors of dimension 8 to {folder / f'shard{index}.npy'}: lines "
                f"{index}, {index + 3}, {index + 6}, ... (shard {index}/3) of") in out
        reassembled[index - 1 :: 3] = np.load(folder / f"shard{index}.npy")
        encode(folder / f"shard{index}.jsonl", "--shard", f"{index}/3")
        shard = [json.loads(line) for line in (folder / f"shard{index}.jsonl").open()]
        assert [record["line"] for record in shard] == list(range(index, 76, 3))
        records += shard
    np.testing.assert_array_equal(reassembled, whole)
    whole_records = [json.loads(line) for line in (folder / "whole.jsonl").open()]
    assert sorted(records, key=lambda record: record["line"]) == whole_records
    assert [record["text"] for record in whole_records] == texts


def test_encode_reads_its_input_lazily(tmp_path):
    (tmp_path / "texts.jsonl").write_bytes(
        b'{"text": "a"}\r\n{"text": "b\\u2028c"}\n{"text": \xff}\n')
    lines = read_texts(tmp_path / "texts.jsonl", "text")
    assert next(lines) == (1, "a") and next(lines) == (2, "b\u2028c")
    with pytest.raises(UsageError, match=r"texts.jsonl:3: not UTF-8 text"):
        next(lines)
    (tmp_path / "texts.txt").write_bytes(b"\xef\xbb\xbfa\rb\r\n\nc")
    assert list(read_texts(tmp_path / "texts.txt", "text")) == [
        (1, "a\rb"), (2, ""), (3, "c")]


@pytest.mark.parametrize("quiet", [False, True])
def test_encode_shows_its_progress_in_a_log_unless_quiet(trained_command, monkeypatch, capsys,
                                                         quiet):
    """On a pipe or file (capsys is neither a terminal), progress lines go
    to standard error; here a line every millisecond instead of 30 s."""
    from kcse.foundation import progress

    folder, _, _ = trained_command
    monkeypatch.setattr(progress, "LINE_INTERVAL", 1e-3)
    (folder / "progress.txt").write_text("\n".join(f"句子{i}" for i in range(300)) + "\n",
                                         encoding="utf-8")
    code = main(["encode", "--model", str(folder / "run" / "encoder.keras"), "--input",
                 str(folder / "progress.txt"), "--output", str(folder / "p.npy"),
                 "--overwrite", *["--quiet"] * quiet])
    captured = capsys.readouterr()
    assert code == 0 and "wrote 300 vectors" in captured.out
    lines = [line for line in captured.err.splitlines() if "encoding" in line]
    if quiet:
        assert lines == []
        return
    assert lines and lines[-1].startswith("encoding: 300/300 sentences (100%) in "), lines
    assert all(re.match(r"encoding: \d+/300 sentences \(\d+%\)", line) for line in lines), lines
