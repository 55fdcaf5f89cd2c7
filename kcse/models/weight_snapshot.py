"""A model's weights kept on disk, to put back before each training run."""

import math
import pathlib
import tempfile

import ml_dtypes
import numpy as np
from keras import ops

from kcse.foundation import compat
from kcse.models.embedding_lookup import gather_rows

# Rows of a variable read or written at a time (e5-small's table: 1.5 MB).
ROWS_PER_BLOCK = 1024


def variables_bytes(variables):
    """The bytes `variables` hold: about the size of a model's saved files."""
    return sum(math.prod(variable.shape)
               * np.dtype(getattr(ml_dtypes, variable.dtype, variable.dtype)).itemsize
               for variable in variables)


def _row_blocks(variable):
    """The value of `variable` as numpy blocks of rows (the whole of a scalar)."""
    if len(variable.shape) == 0:
        yield ops.convert_to_numpy(variable)
        return
    for start in range(0, variable.shape[0], ROWS_PER_BLOCK):
        rows = np.arange(start, min(start + ROWS_PER_BLOCK, variable.shape[0]))
        yield ops.convert_to_numpy(gather_rows(variable, rows))


class WeightSnapshot:
    """The values of `variables` now, in a temporary folder, for `restore()`.

    The comparison grid trains every cell from the model's initial
    weights, and `STSEvaluator` puts back the best ones it saw; held in
    memory (`get_weights()`) they would cost their whole size (e5-small:
    0.47 GB). Here each variable is written to a `.npy` file in row blocks
    and read back the same way, so neither side holds more than a block
    beyond the variables. `take()` replaces the kept values by the current
    ones; `close()` (or the end of a `with` block) deletes the folder.

    Example:
    ```python
    import keras
    import numpy as np
    from kcse.models.weight_snapshot import WeightSnapshot

    layer = keras.layers.Dense(3)
    layer.build((None, 2))
    initial = layer.get_weights()
    with WeightSnapshot(layer.weights) as snapshot:
        layer.set_weights([w + 1 for w in initial])
        snapshot.restore()
    assert all(np.array_equal(a, b) for a, b in zip(layer.get_weights(), initial))
    ```
    """

    def __init__(self, variables):
        self.variables = list(variables)
        self._folder = tempfile.TemporaryDirectory(prefix="kcse-weights-")
        self.paths = [
            pathlib.Path(self._folder.name, f"{index}.npy")
            for index in range(len(self.variables))
        ]
        self.take()

    def take(self):
        """Keeps the variables' current values (in place of the previous ones)."""
        for variable, path in zip(self.variables, self.paths):
            with open(path, "wb") as file:
                np.lib.format.write_array_header_1_0(file, {
                    "descr": np.lib.format.dtype_to_descr(np.dtype(variable.dtype)),
                    "fortran_order": False,
                    "shape": tuple(variable.shape),
                })
                for block in _row_blocks(variable):
                    file.write(np.ascontiguousarray(block).tobytes())

    def restore(self):
        """Sets every variable back to its value when the snapshot was taken."""
        for variable, path in zip(self.variables, self.paths):
            value = np.load(path, mmap_mode="r")
            if len(variable.shape) == 0:
                variable.assign(np.asarray(value))
                continue
            compat.assign_in_row_chunks(variable, (
                np.array(value[start : start + ROWS_PER_BLOCK])
                for start in range(0, value.shape[0], ROWS_PER_BLOCK)
            ))
            del value

    def arrays(self):
        """The kept values, as read-only memory-mapped numpy arrays."""
        return [np.load(path, mmap_mode="r") for path in self.paths]

    def close(self):
        """Deletes the snapshot's files."""
        self._folder.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
