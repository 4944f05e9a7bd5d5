r"""The memory-mapped storage tier: rows read from their file through the
page cache, each requested row once, in file order; with the store's
read-ahead, the rows announced batches will miss are hinted to the kernel
ahead (``posix_fadvise(WILLNEED)``)."""
from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from torch import Tensor

from .buffer_pool import BufferPool
from .io_stats import process_read_bytes
from .read_ahead import ReadAheadWindow
from .row_file import PAGE_BYTES, FileStorageTier, RowFile
from .rows import gather_rows
from .tier import Misses, Read, host_rows, spent
from .tier_counters import TierCounters

__all__ = ['MmapStorage', 'distinct_sorted']


def distinct_sorted(ids: Tensor) -> Tuple[Tensor, Tensor, bool]:
    r"""``(sorted ids, their positions in ids, whether they are
    distinct)``: a sampled batch's ids are, and are then read in file
    order with no staging."""
    rows, order = torch.sort(ids)
    return rows, order, bool((rows[1:] != rows[:-1]).all())


class MmapStorage(FileStorageTier):
    r"""All rows of a raw row-major file, memory-mapped and never read
    whole: a gather reads each requested row once, in file order.

    Args:
        path (str): the raw binary file.
        dtype (torch.dtype): element type.
        shape (Sequence[int]): ``[num_rows, ...]``.
        offset (int): byte offset of the first row in the file.
    """
    place = 'file, memory-mapped'

    def __init__(self, path: str, dtype: torch.dtype, shape: Sequence[int],
                 offset: int = 0):
        self.file = RowFile(path, dtype, shape, offset)
        self._fd = os.open(self.file.path, os.O_RDONLY)
        self.counters = TierCounters()
        self.prefetched_pages = 0
        self._staging = BufferPool(max_buffers=1)
        self._window: Optional[ReadAheadWindow] = None
        self._pending: List[Tensor] = []  # misses not yet hinted

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state.pop('_fd')
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._fd = os.open(self.file.path, os.O_RDONLY)

    def __del__(self) -> None:
        fd = getattr(self, '_fd', None)
        if fd is not None:
            os.close(fd)


    def pages_of(self, rows: Tensor) -> int:
        r"""Distinct file pages covered by sorted unique :obj:`rows`."""
        return self.file.pages_of(rows)

    # Reading #################################################################

    def gather(self, ids: Tensor, out: Tensor,
               timings: Optional[Dict[str, float]] = None,
               staging: Optional[BufferPool] = None) -> None:
        r"""Writes rows :obj:`ids` into :obj:`out`, reading every distinct
        row once, in file order."""
        started, before = time.perf_counter(), self.counters.bytes
        self._gather(ids, out)
        self._timed(timings, started, before)

    def read(self, ids: Tensor, out: Tensor,
             timings: Dict[str, float]) -> Read:
        started, before = time.perf_counter(), self.counters.bytes
        with host_rows(out) as target:
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
        if ids.numel() == 0:
            return
        if bool((ids[1:] > ids[:-1]).all()):  # sorted, distinct: in place
            self.read_sorted(ids, out)
            return
        rows, inverse = torch.unique(ids, sorted=True, return_inverse=True)
        block = self._staging.empty((rows.numel(), *self.shape[1:]),
                                    self.dtype)
        self.read_sorted(rows, block, requests=ids.numel())
        gather_rows(block, inverse, out=out)

    def _timed(self, timings: Optional[Dict[str, float]], started: float,
               before: int) -> None:
        r"""Counts the seconds and bytes of a read since :obj:`started` for
        :obj:`timings` and the read-ahead depth."""
        if timings is not None:
            spent(timings, self.name, started)
        if self._window is not None:
            self._window.add_read(time.perf_counter() - started,
                                  self.counters.bytes - before)

    def read_sorted(self, rows: Tensor, out: Tensor,
                    requests: Optional[int] = None) -> None:
        r"""Reads sorted distinct :obj:`rows` into :obj:`out` in file order
        (counted as :obj:`requests` requested rows, default one per row)."""
        self.file.check_size(self._fd)
        before = process_read_bytes()
        gather_rows(self.file.tensor, rows, out=out)
        after = process_read_bytes()
        self.counters.add(rows.numel() if requests is None else requests,
                          rows.numel(), self.row_bytes,
                          self.pages_of(rows))
        if before is not None and after is not None:
            self.counters.disk_bytes += after - before

    # Read-ahead: page-cache hints ############################################

    def set_read_ahead(self, window: Optional[ReadAheadWindow]) -> None:
        self._window = window
        self._pending = []

    def announce(self, ids: Tensor, misses: Optional[Misses] = None) -> None:
        r"""Queues the rows of :obj:`misses` for a page-cache hint, issued
        once enough are pending or their batch is due."""
        if self._window is None:
            return
        rows = ids if misses is None else misses()
        with self._window.lock:
            self._pending.append(rows)
            self._flush_due()

    def retire(self, ids: Tensor) -> None:
        if self._window is None:
            return
        with self._window.lock:
            self._flush_due()

    def _flush_due(self) -> None:
        r"""Issues the pending hints if the read-ahead window says they
        are due (its lock held)."""
        if not self._pending:
            return
        rows = sum(p.numel() for p in self._pending)
        if self._window.due(len(self._pending), rows, self.row_bytes):
            self.prefetch(torch.cat(self._pending))
            self._pending.clear()

    def prefetch(self, ids: Tensor) -> int:
        r"""Asks the kernel to start reading the pages of rows :obj:`ids`
        (``posix_fadvise(WILLNEED)`` on merged, sorted page ranges) without
        waiting; returns the number of pages requested."""
        if ids.numel() == 0:
            return 0
        pages = self.file.pages(torch.unique(ids))
        breaks = (pages[1:] - pages[:-1] != 1).nonzero().view(-1) + 1
        starts = torch.cat([pages[:1], pages[breaks]])
        ends = torch.cat([pages[breaks - 1], pages[-1:]]) + 1
        for begin, end in zip(starts.tolist(), ends.tolist()):
            os.posix_fadvise(self._fd, begin * PAGE_BYTES,
                             (end - begin) * PAGE_BYTES,
                             os.POSIX_FADV_WILLNEED)
        self.prefetched_pages += pages.numel()
        return int(pages.numel())
