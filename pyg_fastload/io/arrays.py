r"""Streaming one array to disk: chunks of about ``CHUNK_BYTES`` from a
tensor, a (memory-mapped) array or a chunk iterator, hashed as written."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import (Any, Callable, Dict, Iterable, Iterator, Optional, Tuple,
                    Union)

import numpy as np
from torch import Tensor

from . import format as fmt
from .format import to_numpy

__all__ = ['ArrayWriter', 'row_chunks', 'Source']

#: What an array can be given as: a tensor, an array, or a callable
#: returning an iterable of row chunks.
Source = Union[Tensor, np.ndarray, Callable[[], Iterable[Any]]]


class ArrayWriter:
    r"""Streams row chunks of one array into ``<name>.bin.tmp``, hashing
    them, and renames the file on :meth:`close`."""

    def __init__(self, directory: Path, name: str):
        self.name = name
        self.file = directory / f'{name}.bin'
        self.tmp = directory / f'{name}.bin.tmp'
        self._f = open(self.tmp, 'wb')
        self._sha = hashlib.sha256()
        self.dtype_name: Optional[str] = None
        self.row_shape: Optional[Tuple[int, ...]] = None
        self.rows = 0
        self.bytes = 0

    def write(self, chunk: np.ndarray, dtype_name: str) -> None:
        if chunk.ndim == 0:
            raise ValueError(
                f"array '{self.name}' ({self.file.name}): got a scalar "
                f"chunk; every array needs a first (row) dimension")
        if self.dtype_name is None:
            self.dtype_name, self.row_shape = dtype_name, chunk.shape[1:]
        elif dtype_name != self.dtype_name or chunk.shape[1:] != \
                self.row_shape:
            raise ValueError(
                f"array '{self.name}' ({self.file.name}): a chunk has dtype "
                f"{dtype_name} and row shape {list(chunk.shape[1:])} but "
                f"the first chunk had {self.dtype_name} and "
                f"{list(self.row_shape)}; yield chunks of one dtype and "
                f"width")
        raw = chunk.reshape(-1).view(np.uint8)
        self._f.write(raw)
        self._sha.update(raw)
        self.rows += chunk.shape[0]
        self.bytes += raw.size

    def close(self, default_dtype: str = 'float32',
              default_row_shape: Tuple[int, ...] = ()) -> Dict[str, Any]:
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()
        os.replace(self.tmp, self.file)
        if self.dtype_name is None:  # no chunk at all: an empty array
            self.dtype_name, self.row_shape = default_dtype, default_row_shape
        return {
            'file': self.file.name,
            'dtype': self.dtype_name,
            'shape': [self.rows, *self.row_shape],
            'bytes': self.bytes,
            'sha256': self._sha.hexdigest(),
        }

    def abort(self) -> None:
        self._f.close()
        self.tmp.unlink(missing_ok=True)


def row_chunks(source: Source, what: str) -> Iterator[Tuple[np.ndarray,
                                                             str]]:
    r"""Yields ``(numpy chunk, dtype name)`` pairs of about
    :obj:`fmt.CHUNK_BYTES` from a tensor, an array (memory-mapped or not) or a
    callable returning an iterable of chunks."""
    if isinstance(source, (Tensor, np.ndarray)):
        if source.ndim == 0:
            raise ValueError(f'{what} is a scalar; pass an array with one '
                             f'row per element')
        row_items = int(np.prod(source.shape[1:], dtype=np.int64))
        itemsize = source.element_size() if isinstance(source, Tensor) \
            else source.itemsize
        step = max(1, fmt.CHUNK_BYTES // max(1, row_items * itemsize))
        num_rows = source.shape[0]
        if num_rows == 0:
            yield to_numpy(source, what)
        for start in range(0, num_rows, step):
            yield to_numpy(source[start:start + step], what)
    elif callable(source):
        for chunk in source():
            yield to_numpy(chunk, what)
    else:
        raise TypeError(f'{what} must be a torch.Tensor, a numpy array or a '
                        f'callable returning an iterable of row chunks, got '
                        f'{type(source).__name__}')
