r"""The memory-mapped storage tier: rows read from their file through the
page cache, each requested row once, in file order; with the store's
read-ahead, the rows announced batches will miss are hinted to the kernel
ahead (``posix_fadvise(WILLNEED)``)."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

import torch
from torch import Tensor

from .buffer_pool import BufferPool
from .io_stats import process_read_bytes
from .read_ahead import ReadAheadWindow
from .row_file import PAGE_BYTES, FileStorageTier, RowFile
from .rows import gather_rows
from .tier import Misses
from .tier_counters import TierCounters

__all__ = ['MmapStorage']


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
