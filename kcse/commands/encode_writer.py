"""`kcse encode`'s output file, written row by row as the vectors come."""

import errno
import json
import os
import pathlib

import numpy as np

from kcse.foundation import atomic_files


class EncodeWriter:
    """Writes `kcse encode`'s vectors to a .npy or .jsonl file as they come.

    A .npy file gets a float32 array of `count` rows: its header and the
    space of all its rows at the first vectors (which give its width), so
    that a full disk is an `OSError` then, before the encoding, not a
    crash of a memory map later. A .jsonl file gets a record
    `{field: text, "line": number, "embedding": vector}` per vector, its
    line and text taken from `records`, an iterator of `(line, text)`.
    Rows are written in order, with ordinary writes. `name` is the file
    errors name (the destination `path` is a temporary of).
    """

    def __init__(self, path, count, field, records=None, name=None):
        self.path, self.count, self.field, self.records = pathlib.Path(path), count, field, records
        self.name = name or self.path
        self.file = self.dimension = None

    def __enter__(self):
        self.file = open(self.path, "wb" if self.path.suffix == ".npy" else "w",
                         encoding=None if self.path.suffix == ".npy" else "utf-8")
        return self

    def write(self, rows, vectors):
        """`vectors` as rows `rows` (a slice, following the last one)."""
        if self.path.suffix != ".npy":
            # Vectors first: zip stops at their end without taking a record.
            for vector, (number, text) in zip(vectors, self.records):
                record = {self.field: text, "line": number, "embedding": vector.tolist()}
                self.file.write(json.dumps(record, ensure_ascii=False) + "\n")
            self.dimension = vectors.shape[1]
            return
        if self.dimension is None:
            self.dimension = vectors.shape[1]
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype("float32")),
                      "fortran_order": False, "shape": (self.count, self.dimension)}
            np.lib.format.write_array_header_1_0(self.file, header)
            self.reserve(self.file.tell() + self.count * self.dimension * 4)
        self.file.write(np.ascontiguousarray(vectors, dtype="<f4").tobytes())

    def reserve(self, size):
        """Allocates the file's `size` bytes now (where the system can)."""
        try:
            os.posix_fallocate(self.file.fileno(), 0, size)
        except AttributeError:  # No posix_fallocate (macOS, Windows).
            pass
        except OSError as error:
            if error.errno in atomic_files.SPACE_ERRORS:
                raise atomic_files.WriteError(self.name, error, size) from None
            if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise

    def __exit__(self, *error):
        self.file.close()
