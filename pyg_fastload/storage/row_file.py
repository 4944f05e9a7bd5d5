r"""A raw row-major file of feature rows: its shape and element type,
checked against the file's size, and a read-only memory map of it (for
whole-tensor reads and memory-mapped row reads)."""
from __future__ import annotations

import os
import warnings
from typing import Any, Dict, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from ..graph.ranges import expand_ranges
from .tier import StorageTier

__all__ = ['RowFile', 'FileStorageTier', 'PAGE_BYTES']

#: The page size the page cache and the memory map work in.
PAGE_BYTES = 4096


class RowFile:
    r"""The rows of a raw row-major file, never read whole.

    Args:
        path (str): the raw binary file.
        dtype (torch.dtype): element type.
        shape (Sequence[int]): ``[num_rows, ...]``.
        offset (int): byte offset of the first row in the file.
    """
    def __init__(self, path: str, dtype: torch.dtype, shape: Sequence[int],
                 offset: int = 0):
        self.path = os.fspath(path)
        self.dtype = dtype
        self.shape: Tuple[int, ...] = tuple(int(s) for s in shape)
        self.itemsize = torch.empty((), dtype=dtype).element_size()
        self.needed = offset + int(np.prod(self.shape)) * self.itemsize
        actual = os.path.getsize(self.path)
        if actual < self.needed:
            raise ValueError(f"'{self.path}' holds {actual} bytes, but shape "
                             f"{list(self.shape)} of {dtype} needs "
                             f"{self.needed}: the file is truncated")
        self.offset = offset
        self.row_bytes = int(np.prod(self.shape[1:])) * self.itemsize
        self._map()

    def _map(self) -> None:
        np_dtype = torch.empty((), dtype=self.dtype).numpy().dtype
        array = np.memmap(self.path, dtype=np_dtype, mode='r',
                          offset=self.offset, shape=self.shape)
        with warnings.catch_warnings():  # the mapping is read-only
            warnings.simplefilter('ignore', UserWarning)
            self.tensor: Tensor = torch.from_numpy(array)

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state.pop('tensor')
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._map()

    def check_size(self, fd: int) -> None:
        r"""Raises :class:`OSError` naming the file if it was shortened since
        it was mapped (:obj:`fd`: open on it): reading a mapped page past
        the end of a file kills the process with ``SIGBUS`` instead of
        raising."""
        actual = os.fstat(fd).st_size
        if actual < self.needed:
            raise OSError(f"'{self.path}' was truncated while in use: it "
                          f"holds {actual} bytes, its rows need "
                          f"{self.needed}; restore the file (or prepare the "
                          f"dataset again) and restart")

    def _page_span(self, rows: Tensor) -> Tuple[Tensor, Tensor]:
        start = self.offset + rows * self.row_bytes
        first = torch.div(start, PAGE_BYTES, rounding_mode='floor')
        last = torch.div(start + self.row_bytes - 1, PAGE_BYTES,
                         rounding_mode='floor')
        return first, last

    def pages(self, rows: Tensor) -> Tensor:
        r"""Sorted distinct file pages covered by sorted unique
        :obj:`rows`."""
        first, last = self._page_span(rows)
        return torch.unique_consecutive(expand_ranges(first,
                                                      last - first + 1))

    def pages_of(self, rows: Tensor) -> int:
        r"""Distinct file pages covered by :obj:`rows` (sorted, unique):
        the pages of every row, less one wherever a row starts on the page
        the previous row ends on (counted without listing the pages)."""
        if rows.numel() == 0:
            return 0
        first, last = self._page_span(rows)
        shared = int((first[1:] == last[:-1]).sum())
        return int((last - first).sum()) + rows.numel() - shared

    def evict_page_cache(self) -> None:
        r"""Drops the file's clean pages from the page cache (cold-start
        measurements; needs no privileges)."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


class FileStorageTier(StorageTier):
    r"""A storage tier over a :class:`RowFile` (:attr:`file`): its shape,
    element type and row size are the file's, a whole-tensor read is a
    copy-free view of the file's memory map, and the page cache it leaves
    can be dropped. :class:`~pyg_fastload.storage.mmap_storage.MmapStorage`
    and :class:`~pyg_fastload.storage.direct.DirectStorage` differ in how
    they read rows."""
    file: RowFile

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.file.shape

    @property
    def dtype(self) -> torch.dtype:
        return self.file.dtype

    @property
    def row_bytes(self) -> int:
        return self.file.row_bytes

    def full(self) -> Tensor:
        r"""The whole tensor as a copy-free view of a memory map of the
        file (reading it all pulls the file through the page cache)."""
        return self.file.tensor

    def evict_page_cache(self) -> None:
        self.file.evict_page_cache()
