r"""GIDS's window-buffered cache: a dynamic cache that never evicts a row
an announced batch still needs."""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Dict, Iterator, Optional

import torch
from torch import Tensor

from .cache_tier import CacheTier
from .tier import Misses, Read, Tier, spent

__all__ = ['WindowBufferedCache']


class WindowBufferedCache(CacheTier):
    r"""A dynamic cache with GIDS's window buffering: the loader announces
    each batch when it is sampled (``W`` batches before it is consumed), a
    cached row whose node is still needed by an announced batch is never
    evicted, and among the others the victim is random. It starts empty and
    takes the rows its fallback reads from storage.

    Loaders in several threads may share it (a training loader and a
    validation pass started inside its epoch, or two loaders): every
    operation runs under :meth:`exclusive`, so a row is never evicted
    between looking up its slot and reading it.

    Args:
        fallback (Tier): the next, slower link.
        capacity (int): rows the cache holds.
        device (torch.device): where the rows live.
        seed (int): seed of the eviction order.
        name (str): the tier's key in ``stats()`` (default ``'device'``).
    """
    def __init__(self, fallback: Tier, capacity: int,
                 device: torch.device, seed: int = 0, name: str = 'device'):
        super().__init__(fallback, torch.empty(
            (capacity, *fallback.shape[1:]), dtype=fallback.dtype,
            device=device), name)
        self.slot_node = torch.full((capacity, ), -1, dtype=torch.int64)
        self.pending = torch.zeros(fallback.shape[0], dtype=torch.int32)
        self.generator = torch.Generator().manual_seed(seed)
        self.evictions = 0
        self._lock = threading.RLock()
        self._done: Optional[Any] = None  # CUDA event of the last holder

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state['_lock'] = state['_done'] = None
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        r"""Holds the cache for one thread: a slot lookup and the read of
        those slots, or an admission, as one step. On CUDA the work the
        holder queued is ordered after the previous holder's (an event
        chain across the threads' streams), not waited for."""
        with self._lock:
            cuda = self.values.is_cuda
            if cuda:
                stream = torch.cuda.current_stream(self.values.device)
                if self._done is not None:
                    stream.wait_event(self._done)
            try:
                yield
            finally:
                if cuda:
                    self._done = torch.cuda.Event()
                    self._done.record(stream)

    def announce(self, ids: Tensor, misses: Optional[Misses] = None) -> None:
        r"""A batch needing the (unique) :obj:`ids` entered the window."""
        with self._lock:
            self.pending.index_add_(0, ids,
                                    torch.ones_like(ids, dtype=torch.int32))
        self.fallback.announce(ids, misses)

    def retire(self, ids: Tensor) -> None:
        r"""The batch announced with :obj:`ids` was consumed."""
        with self._lock:
            self.pending.index_add_(0, ids, torch.full_like(
                ids, -1, dtype=torch.int32))
        self.fallback.retire(ids)

    def admit_fetched(self, ids: Tensor, below: Read, rows: Tensor,
                      timings: Dict[str, float]) -> None:
        r"""Offers the rows the fallback read from storage, once per node
        (in node order)."""
        started = time.perf_counter()
        count = ids.numel()
        if below.order is not None:
            ids = ids.index_select(0, below.order)
        ids, rows = ids[count - below.fetched:], rows[count - below.fetched:]
        if below.sorted:
            self.admit(ids, rows)
        else:
            first, inverse = torch.unique(ids, return_inverse=True)
            keep = torch.full((first.numel(), ), ids.numel(),
                              dtype=torch.long).scatter_reduce_(
                                  0, inverse, torch.arange(ids.numel()),
                                  'amin')
            self.admit(first, rows, keep)
        spent(timings, self.name, started)

    def admit(self, ids: Tensor, rows: Tensor,
              row_index: Optional[Tensor] = None) -> None:
        r"""Offers freshly fetched rows to the cache: unique :obj:`ids` whose
        rows are ``rows[row_index]`` (default: ``rows``). Rows an announced
        batch still needs go in first, into free slots, then random slots
        whose node no announced batch needs; the other rows only fill free
        slots. Rows another thread admitted since they were looked up are
        skipped (a node is never held twice)."""
        if ids.numel() == 0 or self.capacity == 0:
            return
        if row_index is None:
            row_index = torch.arange(ids.numel())
        with self.exclusive():
            absent = (self.slot.index_select(0, ids) < 0).nonzero().view(-1)
            if absent.numel() < ids.numel():
                ids = ids.index_select(0, absent)
                row_index = row_index.index_select(0, absent)
            self._admit(ids, rows, row_index)

    def _admit(self, ids: Tensor, rows: Tensor, row_index: Tensor) -> None:
        needed = self.pending.index_select(0, ids) > 0
        occupied = self.slot_node >= 0
        free = (~occupied).nonzero().view(-1)
        # Rows no announced batch needs only take free slots: evicting for
        # them costs a copy and, measured, gains no hits
        # (``pyg-fastload bench cache``).
        spare = (~needed).nonzero().view(-1)[:max(
            0, free.numel() - int(needed.sum()))]
        order = torch.cat([needed.nonzero().view(-1), spare])
        idle = occupied & (self.pending.index_select(
            0, self.slot_node.clamp(min=0)) == 0)
        victims = idle.nonzero().view(-1)
        victims = victims[torch.randperm(victims.numel(),
                                         generator=self.generator)]
        slots = torch.cat([free, victims])[:order.numel()]
        chosen = order[:slots.numel()]
        ids = ids.index_select(0, chosen)
        evicted = self.slot_node.index_select(0, slots)
        evicted = evicted[evicted >= 0]
        self.evictions += int(evicted.numel())
        self.slot[evicted] = -1
        self.slot[ids] = slots.to(self.slot.dtype)
        self.slot_node[slots] = ids
        picked = rows.index_select(0, row_index.index_select(0, chosen).to(
            rows.device))
        self.values.index_copy_(0, slots.to(self.values.device),
                                picked.to(self.values.device))
