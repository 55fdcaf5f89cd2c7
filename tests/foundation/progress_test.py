"""Progress of long work: lines in a log, tqdm's bar on a terminal, nothing
when quiet or outside a command; encoding and training counted."""

import io
import re
import time

import keras
import numpy as np
import pytest

import kcse
from conftest import tiny_bert
from conftest import tiny_preprocessor
from kcse.foundation import progress

LINE = re.compile(r"^(?P<description>.+): (?P<done>\d+)/(?P<total>\d+) (?P<unit>\w+) "
                  r"\((?P<percent>\d+)%\)(, loss (?P<loss>[-+.e\d]+))?"
                  r"(, \d+ s(, about \d+ s left)?| in \d+ s)$")


class Terminal(io.StringIO):
    def isatty(self):
        return True


def lines_of(log):
    return log.getvalue().splitlines()


def test_a_log_gets_a_line_every_interval_with_done_total_and_eta():
    log = io.StringIO()
    with progress.reporting(True, stream=log, interval=0.05):
        with progress.task("encoding", total=8, unit="sentence") as task:
            for _ in range(4):
                time.sleep(0.1)  # Two intervals a step: a line while each runs.
                task.add(2)
    lines = lines_of(log)
    assert len(lines) >= 5, lines
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    done = [int(match["done"]) for match in parsed]
    assert done == sorted(done) and done[-1] == 8 and done[0] < 8
    assert all(match["total"] == "8" and match["unit"] == "sentences" for match in parsed)
    assert lines[-1].startswith("encoding: 8/8 sentences (100%) in ")
    assert any("left" in line for line in lines[:-1] if not line.startswith("encoding: 0/"))


def test_work_within_the_interval_writes_nothing_and_quiet_writes_nothing(capsys):
    log = io.StringIO()
    with progress.reporting(True, stream=log, interval=60):
        with progress.task("encoding", total=3, unit="sentence") as task:
            task.add(3)
    with progress.reporting(False, stream=log, interval=0.01):
        with progress.task("training", total=3, unit="step") as task:
            time.sleep(0.05)
            task.add(3)
    with progress.task("outside any command", total=3) as task:  # The library's default.
        time.sleep(0.05)
        task.add(3)
    assert log.getvalue() == "" and capsys.readouterr() == ("", "")


def test_a_terminal_gets_tqdms_bar_and_labels_nest():
    terminal = Terminal()
    with progress.reporting(True, stream=terminal, interval=0.01):
        with progress.labelled("BERT-P3-STS-B"), progress.labelled("c"):
            with progress.task("training", unit="step") as task:
                task.set_total(5)
                task.add(5)
        with progress.task("writing onnx", unit=None):
            pass
    text = terminal.getvalue()
    assert "\r" in text and "BERT-P3-STS-B: c: training: 100%" in text and "5/5" in text
    assert "writing onnx: 00:00" in text


def test_time_alone_for_work_without_a_count():
    log = io.StringIO()
    with progress.reporting(True, stream=log, interval=0.02):
        with progress.task("writing onnx", unit=None):
            time.sleep(0.1)
    lines = lines_of(log)
    assert re.fullmatch(r"writing onnx: \d+ s", lines[0]), lines
    assert re.fullmatch(r"writing onnx: done in \d+ s", lines[-1]), lines


def test_encoding_counts_every_sentence_repeated_ones_too():
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="P3")
    texts = ["the cat sat", "a dog ran", "the cat sat"] * 30
    log = io.StringIO()
    with progress.reporting(True, stream=log, interval=1e-4):
        vectors = encoder.encode(texts, batch_size=4)
    assert vectors.shape == (90, encoder.output_dim)
    parsed = [LINE.match(line) for line in lines_of(log)]
    assert parsed and all(parsed), lines_of(log)
    assert lines_of(log)[-1].startswith("encoding: 90/90 sentences (100%) in ")


@pytest.mark.parametrize("quiet", [False, True])
def test_training_counts_its_steps_instead_of_keras_bar(quiet, capsys):
    """6 sentences in batches of 2, 2 epochs: 3 steps an epoch, 6 in all."""
    keras.utils.set_random_seed(0)
    encoder = kcse.SentenceEncoder(tiny_bert(), tiny_preprocessor(), pooling="P3")
    simcse = kcse.SimCSE(encoder)
    simcse.compile(optimizer=keras.optimizers.Adam(1e-3))
    log = io.StringIO()
    with progress.reporting(not quiet, stream=log, interval=1e-4):
        history = simcse.fit(["the cat sat", "a dog ran", "the dog sat", "a cat ran", "the cat", "a dog"],
                             batch_size=2, epochs=2)
    assert np.isfinite(history.history["loss"]).all()
    out = capsys.readouterr().out
    if quiet:  # Keras' own bar, as outside any command.
        assert log.getvalue() == "" and "3/3" in out
        return
    assert out == ""  # Not Keras' bar too.
    # Before its first step (tracing), training has no total yet.
    counted = [line for line in lines_of(log) if not re.fullmatch(r"training: 0 steps, \d+ s", line)]
    parsed = [LINE.match(line) for line in counted]
    assert parsed and all(parsed), lines_of(log)
    assert {match["total"] for match in parsed} == {"6"}
    assert counted[-1].startswith("training: 6/6 steps (100%), loss ")
    # The loss shown last is the last step's, as Keras' History has it.
    assert float(parsed[-1]["loss"]) == pytest.approx(history.history["loss"][-1], rel=1e-3)


def test_the_time_left_is_at_the_rate_since_the_first_count():
    """A slow start (tokenising, tracing) then 1 item each 0.1 s: 8 left
    are about 1 s, not the start's rate."""
    log = io.StringIO()
    with progress.reporting(True, stream=log, interval=0.05):
        with progress.task("encoding", total=10, unit="sentence") as task:
            for pause in (1.5, 0.1):
                time.sleep(pause)
                task.add(1)
            time.sleep(0.06)  # A line at 2/10.
    lefts = [int(left) for left in re.findall(r"2/10 sentences \(20%\), \d+ s, about (\d+) s left",
                                             log.getvalue())]
    assert lefts and max(lefts) <= 2, log.getvalue()  # The start's rate would say 8 × 1.6 s.
