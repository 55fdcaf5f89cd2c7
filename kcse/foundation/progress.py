"""Progress of long work (encoding, training steps, exports) for the commands.

One mechanism for every long piece of work. The library says nothing
unless a command or recipe turned reporting on (`reporting(True)`;
`--quiet` leaves it off). Then each `task` shows, on standard error:

- on a terminal, tqdm's live bar (done/total, rate, ETA);
- on a file or pipe, a plain line every `LINE_INTERVAL` seconds while it
  runs (`description: 2048/2722 sentences (75%), 41 s, about 14 s left`),
  and a last line when it ends, so a log shows work, not a hang. Work done
  within the interval writes nothing: a log keeps the lines of long work.

`labelled(text)` puts a label before the descriptions of the tasks inside
it (the grid's cell: `BERT P3 STS-B: encoding`).

Example:
```python
import io
import time
from kcse.foundation import progress

log = io.StringIO()
with progress.reporting(True, stream=log, interval=0.1):
    with progress.task("encoding", total=3, unit="sentence") as bar:
        bar.add(1)
        time.sleep(0.15)
        bar.add(2)
log.getvalue()
# 'encoding: 1/3 sentences (33%), 0 s, about 0 s left\\nencoding: 3/3 sentences (100%) in 0 s\\n'
```
"""

import contextlib
import contextvars
import sys
import threading
import time

# Seconds between two lines of a task on a file or pipe.
LINE_INTERVAL = 30.0

_stream = contextvars.ContextVar("kcse_progress_stream", default=None)
_labels = contextvars.ContextVar("kcse_progress_labels", default=())


@contextlib.contextmanager
def reporting(enabled, stream=None, interval=None):
    """Shows the progress of the tasks inside it on `stream` (default:
    standard error) when `enabled`, a line every `interval` seconds
    (default: `LINE_INTERVAL`) on a file or pipe; none when not (`--quiet`)."""
    token = _stream.set((stream or sys.stderr, interval or LINE_INTERVAL) if enabled else None)
    try:
        yield
    finally:
        _stream.reset(token)


def is_reporting():
    return _stream.get() is not None


@contextlib.contextmanager
def labelled(label):
    """Prefixes the descriptions of the tasks inside it with `label`."""
    token = _labels.set(_labels.get() + (label,))
    try:
        yield
    finally:
        _labels.reset(token)


class SilentTask:
    """A task nobody watches: `add` does nothing.

    Every task has `status`: None, or a function giving a short text shown
    after the count (training's loss), called only when a line or the bar
    is drawn.
    """

    status = None

    def add(self, count=1):
        pass

    def set_total(self, total):
        pass

    def close(self):
        pass


class LineTask:
    """A task written as a line every `interval` seconds, by a timer
    thread (a step may take longer than the interval), and once at the end
    when it wrote any. The time left is at the rate since the first count,
    so that start-up (tokenising, tracing) does not stretch it."""

    def __init__(self, description, total, unit, stream, interval):
        self.description, self.total, self.unit = description, total, unit
        self.stream, self.done, self.start = stream, 0, time.monotonic()
        self.written, self.status = False, None
        self.first = None  # (time, done) at the first count.
        self.stopped = threading.Event()
        self.lock = threading.Lock()
        self.timer = threading.Thread(target=self.beat, args=(interval,), daemon=True)
        self.timer.start()

    def add(self, count=1):
        with self.lock:
            self.done += count
            if self.first is None:
                self.first = (time.monotonic(), self.done)

    def set_total(self, total):
        self.total = total

    def beat(self, interval):
        while not self.stopped.wait(interval):
            self.write(self.line(finished=False))
            self.written = True

    def line(self, finished):
        with self.lock:
            done, first = self.done, self.first
        now = time.monotonic()
        elapsed = now - self.start
        units = f"{self.unit}s" if (self.total or done) != 1 else self.unit
        if self.total:
            text = f"{self.description}: {done}/{self.total} {units} ({100 * done // self.total}%)"
        elif self.unit:
            text = f"{self.description}: {done} {units}"
        else:  # Work shown by its time alone.
            text = f"{self.description}:"
            return f"{text} {'done in ' * finished}{elapsed:.0f} s"
        if self.status and done:
            text += f", {self.status()}"
        if finished:
            return f"{text} in {elapsed:.0f} s"
        text += f", {elapsed:.0f} s"
        if self.total and done:
            since, counted = (now - first[0], done - first[1])
            if not (since > 0 and counted > 0):  # One count so far.
                since, counted = elapsed, done
            text += f", about {since * (self.total - done) / counted:.0f} s left"
        return text

    def write(self, line):
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):  # A closed pipe: the work goes on.
            pass

    def close(self):
        self.stopped.set()
        self.timer.join()
        if self.written:
            self.write(self.line(finished=True))


class BarTask:
    """tqdm's live bar, on a terminal; `status` redrawn once a second."""

    status = None

    def __init__(self, description, total, unit, stream):
        from tqdm import tqdm

        self.status_time = time.monotonic()
        self.bar = tqdm(total=total, desc=description, unit=f" {unit}s" if unit else "",
                        file=stream, dynamic_ncols=True, leave=True,
                        bar_format=None if unit else "{desc}: {elapsed}")

    def add(self, count=1):
        if self.status and time.monotonic() - self.status_time >= 1:
            self.status_time = time.monotonic()
            self.bar.set_postfix_str(self.status(), refresh=False)
        self.bar.update(count)

    def set_total(self, total):
        self.bar.total = total
        self.bar.refresh()

    def close(self):
        self.bar.close()


def stream_is_terminal(stream):
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@contextlib.contextmanager
def task(description, total=None, unit="step"):
    """A piece of long work: yields an object whose `add(count)` counts
    what is done, of `total` (None: unknown until `set_total(total)`)
    `unit`s (None: work shown by its time alone, as one export). Silent
    unless `reporting`."""
    if _stream.get() is None:
        yield SilentTask()
        return
    stream, interval = _stream.get()
    description = ": ".join(_labels.get() + (description,))
    if stream_is_terminal(stream):
        shown = BarTask(description, total, unit, stream)
    else:
        shown = LineTask(description, total, unit, stream, interval)
    try:
        yield shown
    finally:
        shown.close()
