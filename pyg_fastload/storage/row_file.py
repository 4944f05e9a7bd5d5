r"""A raw row-major file of feature rows: its shape and element type,
checked against the file's size, and a read-only memory map of it (for
whole-tensor reads and memory-mapped row reads)."""
from __future__ import annotations

import contextlib
import os
import time
import warnings
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from ..graph.ranges import expand_ranges
from .buffer_pool import BufferPool
from .read_ahead import ReadAheadWindow
from .rows import gather_rows
from .tier import Read, StorageTier, host_rows, spent

__all__ = ['RowFile', 'FileStorageTier', 'PAGE_BYTES', 'distinct_sorted']

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


def distinct_sorted(ids: Tensor) -> Tuple[Tensor, Tensor, bool]:
    r"""``(sorted ids, their positions in ids, whether they are
    distinct)``: a sampled batch's ids are, and are then read in file
    order with no staging."""
    rows, order = torch.sort(ids)
    return rows, order, bool((rows[1:] != rows[:-1]).all())


class FileStorageTier(StorageTier):
    r"""A storage tier over a :class:`RowFile` (:attr:`file`): its shape,
    element type and row size are the file's, a whole-tensor read is a
    copy-free view of the file's memory map, and the page cache it leaves
    can be dropped. A read takes each requested row once, in file order
    (sorted distinct ids straight into the output, others through a
    staging block), timed for the read-ahead depth.
    :class:`~pyg_fastload.storage.mmap_storage.MmapStorage` and
    :class:`~pyg_fastload.storage.direct.DirectStorage` differ in how they
    read sorted rows (:meth:`read_sorted`) and where rows can land
    (:meth:`lands_on`)."""
    file: RowFile
    _staging: BufferPool
    _window: Optional[ReadAheadWindow]

    def read_sorted(self, rows: Tensor, out: Tensor,
                    requests: Optional[int] = None) -> None:
        r"""Reads sorted distinct :obj:`rows` into :obj:`out` in file order
        (counted as :obj:`requests` requested rows, default one per
        row)."""
        raise NotImplementedError

    def lands_on(self, device: torch.device) -> torch.device:
        r"""Where rows bound for :obj:`device` are read to (host memory,
        unless the tier reads into the device itself)."""
        return torch.device('cpu')

    def gather(self, ids: Tensor, out: Tensor,
               timings: Optional[Dict[str, float]] = None,
               staging: Optional[BufferPool] = None) -> None:
        r"""Writes rows :obj:`ids` into :obj:`out` (on any device), reading
        every distinct row once, in file order, into where the reads land
        for :obj:`out` (:meth:`lands_on`)."""
        started, before = time.perf_counter(), self.counters.bytes
        self._gather(ids, out)
        self._timed(timings, started, before)

    def read(self, ids: Tensor, out: Tensor,
             timings: Dict[str, float]) -> Read:
        started, before = time.perf_counter(), self.counters.bytes
        on_device = self.lands_on(out.device) == out.device
        with (contextlib.nullcontext(out) if on_device
              else host_rows(out)) as target:
            rows, order, distinct = distinct_sorted(ids)
            if distinct:
                self.read_sorted(rows, target)
                placed = Read(order, ids.numel(), sorted=True)
            else:
                self._gather(ids, target)
                placed = Read(None, ids.numel())
        self._timed(timings, started, before)
        return placed

    def _gather(self, ids: Tensor, out: Tensor) -> None:
        r"""Rows :obj:`ids` into :obj:`out` in their order, each distinct
        row read once, in file order."""
        if ids.numel() == 0:
            return
        device = self.lands_on(out.device)
        if device == out.device and bool((ids[1:] > ids[:-1]).all()):
            self.read_sorted(ids, out)  # sorted, distinct: in place
            return
        rows, inverse = torch.unique(ids, sorted=True, return_inverse=True)
        shape = (rows.numel(), *self.shape[1:])
        block = self._staging.empty(shape, self.dtype) \
            if device.type == 'cpu' else \
            torch.empty(shape, dtype=self.dtype, device=device)
        self.read_sorted(rows, block, requests=ids.numel())
        if block.device == out.device:
            gather_rows(block, inverse.to(block.device), out=out)
        else:
            out.copy_(gather_rows(block, inverse))

    def _timed(self, timings: Optional[Dict[str, float]], started: float,
               before: int) -> None:
        r"""Counts the seconds and bytes of a read since :obj:`started` for
        :obj:`timings` and the read-ahead depth."""
        if timings is not None:
            spent(timings, self.name, started)
        if self._window is not None:
            self._window.add_read(time.perf_counter() - started,
                                  self.counters.bytes - before)

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
