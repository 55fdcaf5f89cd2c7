"""Ctrl-C that always stops kcse, even where a library swallows it.

Python raises `KeyboardInterrupt` at SIGINT wherever the main thread is.
Inside a C extension calling back into Python (TensorFlow's nest, tf.data)
that exception can be turned into a `SystemError` or dropped, and the
command would carry on and write its output. `install()` keeps Python's
behaviour and also records the signal, so that `check()` raises
`KeyboardInterrupt` again at the points that must not be passed after a
Ctrl-C: before a file is renamed into place (`kcse.atomic_files`), between
chunks of `kcse encode`, between training steps.

Example:
```python
from kcse import interrupts

interrupts.install()
for chunk in chunks:
    interrupts.check()  # KeyboardInterrupt if Ctrl-C was pressed
    ...
```
"""

import signal
import threading

_received = []


def _on_sigint(signum, frame):
    _received.append(signum)
    raise KeyboardInterrupt


def install():
    """Records SIGINT beside Python's KeyboardInterrupt from now on (main
    thread only; a handler someone else installed is kept)."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)


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
