r"""The in-memory storage tier: every row of a tensor held in host
memory."""
from __future__ import annotations

import time
from typing import Dict, Optional, Tuple

import torch
from torch import Tensor

from .buffer_pool import BufferPool
from .rows import gather_rows
from .tier import Read, StorageTier, host_rows, spent
from .tier_counters import TierCounters

__all__ = ['MemoryStorage']


class MemoryStorage(StorageTier):
    r"""All rows of a tensor held in (host) memory; the only tier whose
    rows can be overwritten (:meth:`write`).

    Args:
        tensor (torch.Tensor): the full ``[num_rows, ...]`` tensor.

    Example:
        >>> import torch
        >>> from pyg_fastload.storage import MemoryStorage
        >>> storage = MemoryStorage(torch.arange(10.).view(5, 2))
        >>> out = torch.empty(2, 2)
        >>> storage.gather(torch.tensor([4, 0]), out)
        >>> out
        tensor([[8., 9.],
                [0., 1.]])
    """
    place = 'in memory'

    def __init__(self, tensor: Tensor):
        self.tensor = tensor
        self.counters = TierCounters()

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self.tensor.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.tensor.dtype

    @property
    def row_bytes(self) -> int:
        return self.tensor[0].nbytes if self.tensor.numel() else 0

    def full(self) -> Tensor:
        return self.tensor

    def gather(self, ids: Tensor, out: Tensor,
               timings: Optional[Dict[str, float]] = None,
               staging: Optional[BufferPool] = None) -> None:
        r"""Writes rows :obj:`ids` into :obj:`out` (same length)."""
        started = time.perf_counter()
        gather_rows(self.tensor, ids, out=out)
        self.counters.add(ids.numel(), ids.numel(), self.row_bytes)
        if timings is not None:
            spent(timings, self.name, started)

    def read(self, ids: Tensor, out: Tensor,
             timings: Dict[str, float]) -> Read:
        started = time.perf_counter()
        with host_rows(out) as rows:
            self.gather(ids, rows)
        spent(timings, self.name, started)
        return Read(None, ids.numel())

    def write(self, index: Tensor, rows: Tensor) -> bool:
        self.tensor[index] = rows
        return True
