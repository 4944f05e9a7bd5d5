r"""A storage whose rows are some rows of another storage: a part of a
partition whose feature rows stay in the partitioned dataset's file
(``pyg-fastload partition --features source``) reads them there, through
the same storage (memory-mapped or direct) and caches as any other."""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from .buffer_pool import BufferPool
from .read_ahead import ReadAheadWindow
from .tier import Misses, Read, StorageTier

__all__ = ['MappedRows']


class MappedRows(StorageTier):
    r"""Row ``i`` of this storage is row ``rows[i]`` of :obj:`source`:
    every read, gather and look-ahead hint is passed on in the source's
    row ids, so the source reads each distinct row once in its file order
    and counts what it reads (this storage reports the source's
    counters). Read-only.

    Args:
        source (StorageTier): the storage holding the rows.
        rows (torch.Tensor): ``int64 [num_rows]``, the source row of each
            row, each in ``[0, source.shape[0])``.

    Example:
        >>> import torch
        >>> from pyg_fastload.storage import MappedRows, MemoryStorage
        >>> base = MemoryStorage(torch.arange(10.).view(5, 2))
        >>> part = MappedRows(base, torch.tensor([4, 0]))
        >>> out = torch.empty(2, 2)
        >>> part.gather(torch.tensor([1, 0]), out)
        >>> out
        tensor([[0., 1.],
                [8., 9.]])
    """
    def __init__(self, source: StorageTier, rows: Tensor):
        if rows.dim() != 1 or rows.dtype != torch.long:
            raise ValueError(f"'rows' must be a 1-D int64 tensor, got "
                             f"{rows.dtype} of shape {list(rows.shape)}")
        if rows.numel() and (int(rows.min()) < 0 or
                             int(rows.max()) >= source.shape[0]):
            raise ValueError(f"'rows' must be in [0, {source.shape[0]}) "
                             f"(the source's rows), got "
                             f"[{int(rows.min())}, {int(rows.max())}]")
        self.source = source
        self.rows = rows
        self.counters = source.counters

    @property
    def place(self) -> str:  # type: ignore[override]
        return f'{self.source.place}, rows of the partitioned dataset'

    @property
    def shape(self) -> Tuple[int, ...]:
        return (self.rows.numel(), *self.source.shape[1:])

    @property
    def dtype(self) -> torch.dtype:
        return self.source.dtype

    @property
    def row_bytes(self) -> int:
        return self.source.row_bytes

    @property
    def out_device(self) -> torch.device:
        return self.source.out_device

    def _of(self, ids: Tensor) -> Tensor:
        return self.rows[ids.to(self.rows.device)]

    def read(self, ids: Tensor, out: Tensor,
             timings: Dict[str, float]) -> Read:
        return self.source.read(self._of(ids), out, timings)

    def gather(self, ids: Tensor, out: Tensor,
               timings: Optional[Dict[str, float]] = None,
               staging: Optional[BufferPool] = None) -> None:
        self.source.gather(self._of(ids), out, timings, staging)

    def announce(self, ids: Tensor, misses: Optional[Misses] = None) -> None:
        self.source.announce(self._of(ids), None if misses is None else
                             (lambda: self._of(misses())))

    def retire(self, ids: Tensor) -> None:
        self.source.retire(self._of(ids))

    def full(self) -> Tensor:
        r"""Every row, gathered from the source (a copy: these rows are
        not one slice of the source's file)."""
        out = torch.empty(self.shape, dtype=self.dtype)
        self.source.gather(self.rows, out)
        return out

    def set_read_ahead(self, window: Optional[ReadAheadWindow]) -> None:
        self.source.set_read_ahead(window)

    def read_ahead_stats(self) -> Optional[Dict[str, float]]:
        return self.source.read_ahead_stats()

    def evict_page_cache(self) -> None:
        self.source.evict_page_cache()
