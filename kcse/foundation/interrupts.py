"""Ctrl-C that stops kcse at a safe point, with one line, whatever runs.

Python's own answer to SIGINT raises `KeyboardInterrupt` wherever the main
thread is. Inside a garbage-collection callback or a `__del__` (JAX and
TensorFlow have both) it is printed as "Exception ignored" and dropped;
inside a C extension calling back into Python (TensorFlow's nest) it can
become a `SystemError`. Either way the user reads a traceback, and the
command may carry on and write its output.

`install()` records the first SIGINT instead, and kcse raises
`KeyboardInterrupt` itself at the next safe point (`check()`): between
training steps (`kcse.foundation.training_stops.StopOnInterrupt`),
between chunks of sentences being encoded, after a model loads, and before
any file is renamed into place (`kcse.foundation.atomic_files`). A second Ctrl-C
raises at once, as Python would. After a Ctrl-C the errors Python can
only print ("Exception ignored in ...": a `__del__` of an object whose
`__init__` the interruption cut short, TensorFlow's among them) are
dropped, so the command's one line is all the user reads.

Example:
```python
from kcse.foundation import interrupts

interrupts.install()
for chunk in chunks:
    interrupts.check()  # KeyboardInterrupt once Ctrl-C was pressed
    ...
```
"""

import signal
import sys
import threading

_received = []
_unraisable_hook = []  # The hook `install()` replaced.


def _on_sigint(signum, frame):
    _received.append(signum)
    if len(_received) > 1:  # Asked twice: stop wherever it is.
        raise KeyboardInterrupt


def install():
    """Records SIGINT from now on, to stop at the next `check()` (main
    thread only; a handler someone else installed is kept)."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, _on_sigint):
        signal.signal(signal.SIGINT, _on_sigint)
    if sys.unraisablehook is not _on_unraisable:
        _unraisable_hook[:] = [sys.unraisablehook]
        sys.unraisablehook = _on_unraisable


def _on_unraisable(unraisable):
    """Python's report of an error it cannot raise, unless after a Ctrl-C."""
    if not interrupted():
        _unraisable_hook[0](unraisable)


def interrupted():
    """Whether SIGINT arrived since `install()`."""
    return bool(_received)


def caused(error):
    """Whether `error` is a Ctrl-C: a `KeyboardInterrupt`, or any error
    raised after SIGINT arrived (a library may have turned it into one)."""
    return isinstance(error, KeyboardInterrupt) or (
        isinstance(error, Exception) and interrupted())


def check():
    """Raises `KeyboardInterrupt` if SIGINT arrived since `install()`."""
    if _received:
        raise KeyboardInterrupt
