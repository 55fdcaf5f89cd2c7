"""What every floor of kcse stands on; no Keras model lives here.

Argument and file checks (`arguments`, `validation`, `truncation`), files
written whole or not at all (`atomic_files`, `file_locks`, `digests`),
Ctrl-C and failed runs (`interrupts`, `training_stops`), the backend and
its start (`backend_choice`, `keras_start`, `optional_packages`,
`transformers_backend`), numerics
and compiled steps (`precision`, `compilation`), every private Keras
attribute kcse uses (`compat`). On the same floor, beside it:
`kcse.public_api`, the table of every package's public names. Internal:
the package exports nothing (`__all__` is empty); import a module by its
path.
"""

from kcse.public_api import exports

__all__, __getattr__, __dir__ = exports(__name__)
