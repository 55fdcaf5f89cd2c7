"""`--train-file`: unsupervised training on a text file of sentences, one a
line, as princeton-nlp/SimCSE's train.py trains on wiki1m_for_simcse.txt
(its `load_dataset("text")` gives every line; blank lines are left out here)."""

import json
import random

import pytest

from kcse.commands.main import main as kcse_main
from kcse.foundation.arguments import UsageError
from kcse.data import read_sentence_file
from kcse.foundation.digests import content_digest
from kcse.experiments import protocols
from tiny_grid import tiny_task_and_model

SENTENCES = ["一个男人在弹吉他。", "一只猫在睡觉。", "一个女人在切洋葱。", "一只猫在睡觉。"]


def test_the_file_gives_every_non_blank_line_as_written(tmp_path):
    path = tmp_path / "wiki.txt"
    path.write_bytes(("\ufeff" + SENTENCES[0] + "\r\n\n  \t\n" + "\n".join(SENTENCES[1:])
                      + "\n\n").encode("utf-8"))
    file = read_sentence_file(path)
    assert file.sentences() == SENTENCES  # Duplicates kept, BOM and CR dropped.
    assert file.blank_lines == [2, 3, 7]
    assert file.digest == content_digest(SENTENCES)
    (tmp_path / "same.txt").write_text("\n".join(SENTENCES), encoding="utf-8")
    assert read_sentence_file(tmp_path / "same.txt").digest == file.digest
    (tmp_path / "other.txt").write_text("\n".join(SENTENCES[:3]), encoding="utf-8")
    assert read_sentence_file(tmp_path / "other.txt").digest != file.digest


def test_the_protocol_draws_the_files_sentences_with_the_seed():
    class File:  # What training_sentences asks of a SentenceFile.
        digest = "d"

        def sentences(self):
            return [f"s{i}" for i in range(10)]

    protocol = protocols.with_train_file(protocols.PROTOCOLS["clean"], File())
    data = {"train": None, protocols.TRAIN_FILE: File()}
    expected = File().sentences()
    random.Random(3).shuffle(expected)
    limited = protocols.with_overrides(protocol, max_sentences=4)
    assert protocols.training_sentences(data, limited, "STS-B", 3) == expected[:4]
    # More asked than the file has, or PAWSX (Su keeps all its split sentences): the file's limit.
    assert protocols.training_sentences(data, protocol, "STS-B", 3) == expected
    assert len(protocols.training_sentences(data, limited, "PAWSX", 3)) == 4
    settings = protocols.protocol_settings(protocol)
    assert settings["train_file_digest"] == "d" and settings["training_splits"] == ("train_file",)
    # Without a file the settings are those of results before --train-file.
    assert "train_file_digest" not in protocols.protocol_settings(protocols.PROTOCOLS["clean"])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, shared_data):
    folder = tmp_path_factory.mktemp("train_file")
    model = tiny_task_and_model(folder, shared_data)
    pairs = (folder / "data" / "STS-B" / "STS-B.train.data").read_text(encoding="utf-8")
    sentences = [s for line in pairs.splitlines() for s in line.split("\t")[:2]][:40]
    (folder / "wiki.txt").write_text("\n".join(sentences[:20]) + "\n\n"
                                     + "\n".join(sentences[20:]) + "\n", encoding="utf-8")
    return folder, model, sentences


def train_arguments(folder, model, *extra):
    return ["train", "--model", model, "--pooling", "P1", "--data-dir", str(folder / "data"),
            "--protocol", "su", "--batch-size", "16", "--learning-rate", "1e-3", *extra]


def test_kcse_train_trains_on_the_file_and_records_its_digest(tiny, capsys):
    folder, model, sentences = tiny
    code = kcse_main(train_arguments(folder, model, "--train-file", str(folder / "wiki.txt"),
                                    "--sentences", "64", "--output", str(folder / "run")))
    out = capsys.readouterr().out
    assert code == 0
    record = json.loads((folder / "run" / "train.json").read_text())
    assert record["training_samples"] == 40  # All of them: the file has fewer than 64.
    assert record["settings"]["train_file_digest"] == content_digest(sentences)
    assert record["settings"]["training_splits"] == ["train_file"]
    assert (f"training sentences: all 40 of {folder / 'wiki.txt'} (digest "
            f"{content_digest(sentences)}; 1 blank line left out; --sentences 64 asks "
            "for more than the file has)") in out


@pytest.mark.parametrize("case", ["not utf-8", "blank", "missing", "labelled method",
                                  "one sentence", "one of them"])
def test_a_bad_train_file_is_one_line_before_any_work(tiny, case, capsys):
    folder, model, _ = tiny
    (folder / "latin1.txt").write_bytes("a line\nanother\ncafé\n".encode("latin-1"))
    (folder / "blank.txt").write_text("\n  \n\n")
    (folder / "one.txt").write_text("\nthe only sentence\n\n")
    file, expected = {
        "not utf-8": ("latin1.txt", f"--train-file {folder / 'latin1.txt'}:3: not UTF-8 "
                      "text (invalid continuation byte at byte 3 of the line)"),
        "blank": ("blank.txt", f"--train-file {folder / 'blank.txt'}: no sentence to "
                  "train on (one a line; 3 blank lines)"),
        "missing": ("nope.txt", f"--train-file {folder / 'nope.txt'}: no such file"),
        "labelled method": ("wiki.txt", "--train-file: --method sup_simcse trains on "
                            "labelled pairs, not on unlabelled sentences"),
        # In-batch negatives need 2 (SimCSE's loss); it was refused after the model loaded.
        "one sentence": ("one.txt", f"--train-file {folder / 'one.txt'}: 1 sentence; "
                         "--method simcse contrasts in-batch negatives and needs at least 2"),
        "one of them": ("wiki.txt", "--sentences 1: --method simcse contrasts in-batch "
                        "negatives and trains on at least 2 of --train-file's sentences"),
    }[case]
    extra = {"labelled method": ["--method", "sup_simcse"],
             "one of them": ["--sentences", "1"]}.get(case, [])
    code = kcse_main(train_arguments(folder, model, "--train-file", str(folder / file),
                                    "--output", str(folder / "bad"), *extra))
    captured = capsys.readouterr()
    assert code == 2 and "model:" not in captured.out
    [line] = captured.err.splitlines()
    assert line.startswith("kcse train: error: ") and expected in line, line


def test_sentences_all_keeps_every_training_sentence():
    from kcse.experiments import command_line
    from kcse.experiments import methods

    parser = command_line.comparison_parser("doc\n\nmore", "out")
    protocol = protocols.protocol_from_args(parser.parse_args(["--sentences", "all"]),
                                            methods.SimCSEMethod())
    assert protocol.max_sentences is None and protocol.sentence_limit("STS-B") is None
    with pytest.raises(UsageError, match="--sentences: must be an integer >= 1 or all; got '0'"):
        parser.parse_args(["--sentences", "0"])
