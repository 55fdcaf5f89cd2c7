"""What every floor of kcse stands on; no Keras model lives here.

Argument and file checks (`arguments`, `validation`, `truncation`), files
written whole or not at all (`atomic_files`, `file_locks`, `digests`),
Ctrl-C and failed runs (`interrupts`, `training_stops`), the backend and
its start (`backend_choice`, `keras_start`, `optional_packages`), numerics
and compiled steps (`precision`, `compilation`), every private Keras
attribute kcse uses (`compat`) and the packages' lazy exports
(`lazy_exports`). Internal: the package exports nothing (`__all__` is
empty); import a module by its path.
"""

__all__ = []
