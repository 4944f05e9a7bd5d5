r"""Reading rows through the tiers: each row from the fastest tier holding
it (device cache, host buffer, then storage), counted and timed per tier."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import ContextManager, Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor

from .buffer_pool import BufferPool
from .rows import gather_rows
from .tiers import MemoryStorage, MmapStorage, StaticCache, WindowBufferedCache

__all__ = ['TierEntry', 'gather_tiers', 'holding', 'split_hits', 'spent',
           'static_misses']


@dataclass
class TierEntry:
    r"""One attribute's storage and the caches in front of it."""
    storage: Union[MemoryStorage, MmapStorage]
    host: Optional[StaticCache] = None
    device: Optional[StaticCache] = None

    def caches(self) -> List[StaticCache]:
        return [c for c in (self.device, self.host) if c is not None]


def holding(cache: StaticCache) -> ContextManager:
    r"""Exclusive use of :obj:`cache` if another thread may change it (a
    window-buffered cache); a static cache never changes while read."""
    if isinstance(cache, WindowBufferedCache):
        return cache.exclusive()
    return contextlib.nullcontext()


def static_misses(entry: TierEntry, ids: Tensor) -> Tensor:
    r"""The :obj:`ids` no static cache of :obj:`entry` holds (what a
    window-buffered cache holds changes before they are gathered)."""
    for cache in entry.caches():
        if not isinstance(cache, WindowBufferedCache):
            ids = ids[cache.lookup(ids) < 0]
    return ids


def split_hits(cache: StaticCache,
               ids: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
    r"""Positions in :obj:`ids` the cache holds, their slots, and the
    positions it misses; counts the lookup."""
    slot = cache.lookup(ids)
    hit = slot >= 0
    hit_at = hit.nonzero().view(-1)
    cache.counters.add(ids.numel(), hit_at.numel(), cache.row_bytes)
    return hit_at, slot.index_select(0, hit_at), (~hit).nonzero().view(-1)


def spent(timings: Dict[str, float], tier: str, started: float) -> None:
    r"""Adds the seconds since :obj:`started` to :obj:`timings[tier]`."""
    timings[tier] = timings.get(tier, 0.0) + time.perf_counter() - started


def gather_tiers(entry: TierEntry, ids: Tensor, out: Tensor,
                 timings: Dict[str, float], staging: BufferPool) -> None:
    r"""Fills :obj:`out` from the caches, fastest first, then storage,
    adding the seconds spent per tier to :obj:`timings`."""
    if out.device.type == 'cpu':
        _compose_on_cpu(entry, ids, out, timings, staging)
        return
    storage = entry.storage
    pos = torch.arange(ids.numel())
    for tier, cache in (('device', entry.device), ('host', entry.host)):
        if cache is None:
            continue
        started = time.perf_counter()
        with holding(cache):  # no eviction between lookup and read
            hit_at, slots, miss_at = split_hits(cache, ids)
            if hit_at.numel():
                out.index_copy_(0, pos.index_select(0, hit_at).to(
                    out.device), cache.read(slots).to(out.device))
        if hit_at.numel():
            pos = pos.index_select(0, miss_at)
            ids = ids.index_select(0, miss_at)
        spent(timings, tier, started)
    if ids.numel():
        started = time.perf_counter()
        shape = (ids.numel(), *storage.shape[1:])
        # GPUDirect reads land on the device; others in pinned memory (from
        # torch's caching host allocator)
        rows = torch.empty(shape, dtype=storage.dtype, device=out.device) \
            if storage.reads_to_device else \
            torch.empty(shape, dtype=storage.dtype, pin_memory=True)
        storage.gather(ids, rows)
        out.index_copy_(0, pos.to(out.device),
                        rows.to(out.device, non_blocking=True))
        spent(timings, 'storage', started)
        _admit(entry, ids, rows, timings)


def _admit(entry: TierEntry, ids: Tensor, rows: Tensor,
           timings: Dict[str, float], distinct: bool = False) -> None:
    r"""Offers rows just read from storage (``rows[i]`` is row ``ids[i]``)
    to a window-buffered device cache."""
    if not isinstance(entry.device, WindowBufferedCache):
        return
    started = time.perf_counter()
    if distinct:
        entry.device.admit(ids, rows)
    else:
        first, inverse = torch.unique(ids, return_inverse=True)
        keep = torch.full((first.numel(), ), ids.numel(),
                          dtype=torch.long).scatter_reduce_(
                              0, inverse, torch.arange(ids.numel()), 'amin')
        entry.device.admit(first, rows, keep)
    spent(timings, 'device', started)


def _compose_on_cpu(entry: TierEntry, ids: Tensor, out: Tensor,
                    timings: Dict[str, float], staging: BufferPool) -> None:
    r"""CPU path of :func:`gather_tiers`: each tier gathers its rows into
    one recycled block (storage rows in file order; rows read from storage
    are offered to a window-buffered cache from there), then a single
    gather puts every row in place. Gathers only:
    scattering rows into :obj:`out` (``index_copy_``) takes 1.8x
    (products-like) to 3.0x (arxiv-like) the time of gathering them
    (``pyg-fastload bench loader --preset P``, 'placing rows'). The final
    gather is timed with the fastest cache tier."""
    storage = entry.storage
    block = staging.empty(out.shape, out.dtype)
    source = torch.empty(ids.numel(), dtype=torch.long)
    pos = torch.arange(ids.numel())
    filled = 0

    def place(at: Tensor, count: int) -> int:
        source.index_copy_(0, at, torch.arange(filled, filled + count))
        return filled + count

    for tier, cache in (('device', entry.device), ('host', entry.host)):
        if cache is None:
            continue
        started = time.perf_counter()
        with holding(cache):  # no eviction between lookup and read
            hit_at, slots, miss_at = split_hits(cache, ids)
            if hit_at.numel():
                cache.read(slots, out=block[filled:filled + hit_at.numel()])
        if hit_at.numel():
            filled = place(pos.index_select(0, hit_at), hit_at.numel())
            pos = pos.index_select(0, miss_at)
            ids = ids.index_select(0, miss_at)
        spent(timings, tier, started)
    if ids.numel():
        started = time.perf_counter()
        segment = block[filled:filled + ids.numel()]
        rows = order = None
        if isinstance(storage, MmapStorage):
            rows, order = torch.sort(ids)
        if rows is not None and bool((rows[1:] != rows[:-1]).all()):
            # A sampled batch's ids are distinct: read in file order.
            storage.read_sorted(rows, segment)
            filled = place(pos.index_select(0, order), ids.numel())
            spent(timings, 'storage', started)
            _admit(entry, rows, segment, timings, distinct=True)
        else:
            storage.gather(ids, segment)
            filled = place(pos, ids.numel())
            spent(timings, 'storage', started)
            _admit(entry, ids, segment, timings)
    started = time.perf_counter()
    gather_rows(block, source, out=out)
    spent(timings, 'host' if entry.host is not None else 'device',
          started)
