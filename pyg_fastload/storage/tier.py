r"""What every feature tier is: one link of a chain, fastest first, that
reads the rows it holds and asks its fallback (the next, slower link) for
the others, as GraphBolt's ``CPUCachedFeature(fallback)`` does. Caches wrap
a fallback; a storage ends the chain and holds every row.

A feature store builds one chain per attribute (storage, then the host
buffer around it, then the device cache around that) and only ever talks to
its first link through this interface."""
from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from typing import Callable, Dict, Iterator, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from .buffer_pool import BufferPool
from .read_ahead import ReadAheadWindow
from .rows import gather_rows
from .tier_counters import TierCounters

__all__ = ['Tier', 'StorageTier', 'Read', 'Misses', 'spent', 'host_rows']

_NO_IDS = torch.empty(0, dtype=torch.long)
#: The ids of an announced batch that no static cache in front of a link
#: holds, computed only if that link asks (most never do).
Misses = Callable[[], Tensor]


def spent(timings: Dict[str, float], tier: str, started: float) -> None:
    r"""Adds the seconds since :obj:`started` to :obj:`timings[tier]`."""
    timings[tier] = timings.get(tier, 0.0) + time.perf_counter() - started


class Read(NamedTuple):
    r"""Where a :meth:`Tier.read` put the rows it was asked for.

    Attributes:
        order (torch.Tensor, optional): ``out[i]`` holds row
            ``ids[order[i]]``; :obj:`None`: ``out`` is in the order of
            ``ids``.
        fetched (int): the last :obj:`fetched` rows of ``out`` came from
            storage (no cache of the chain held them).
        sorted (bool): those fetched rows are of sorted, distinct ids.
    """
    order: Optional[Tensor]
    fetched: int
    sorted: bool = False


class Tier(ABC):
    r"""One link of an attribute's chain of tiers.

    A link reads rows into a buffer it is given (:meth:`read`, in an order
    of its choosing; :meth:`gather` in the order asked), hears of the
    loader's look-ahead (:meth:`announce`, :meth:`retire`), counts what it
    serves (:attr:`counters`, under :attr:`name` in the store's
    ``stats()``), says where its rows live (:attr:`place`) and how much
    memory it holds (:meth:`nbytes`). Everything a link does not do itself
    it passes to :attr:`fallback`.
    """
    #: The key of this tier in ``stats()`` and ``places()``.
    name: str = 'storage'
    #: The next, slower link (:obj:`None` for a storage).
    fallback: Optional['Tier'] = None
    counters: TierCounters

    @property
    @abstractmethod
    def place(self) -> str:
        r"""Where this tier's rows live or come from, in words (run
        summaries and plots)."""

    @abstractmethod
    def read(self, ids: Tensor, out: Tensor,
             timings: Dict[str, float]) -> Read:
        r"""Writes rows :obj:`ids` into :obj:`out` (as many rows, on any
        device) in the order the returned :class:`Read` says, adding the
        seconds spent to :obj:`timings` under :attr:`name`."""

    @property
    def shape(self) -> Tuple[int, ...]:
        return self.fallback.shape

    @property
    def dtype(self) -> torch.dtype:
        return self.fallback.dtype

    @property
    def row_bytes(self) -> int:
        return self.fallback.row_bytes

    @property
    def out_device(self) -> torch.device:
        r"""Where the rows of a gather through this link are returned."""
        return self.fallback.out_device

    def gather(self, ids: Tensor, out: Tensor,
               timings: Optional[Dict[str, float]] = None,
               staging: Optional[BufferPool] = None) -> None:
        r"""Writes rows :obj:`ids` into :obj:`out` in their order: every
        link reads its rows into one block (a recycled buffer of
        :obj:`staging` on the CPU), then one gather puts them in place,
        timed under :attr:`name`. Gathering only: scattering rows into
        :obj:`out` (``index_copy_``) takes 1.8x (products-like) to 3.0x
        (arxiv-like) the time of gathering them (``pyg-fastload bench
        loader --preset P``, 'placing rows')."""
        timings = {} if timings is None else timings
        if out.device.type == 'cpu' and staging is not None:
            block = staging.empty(out.shape, out.dtype)
        else:
            block = torch.empty_like(out)
        placed = self.read(ids, block, timings)
        started = time.perf_counter()
        if placed.order is None:
            out.copy_(block)
        else:
            source = torch.empty(ids.numel(), dtype=torch.long)
            source.index_copy_(0, placed.order, torch.arange(ids.numel()))
            gather_rows(block, source.to(block.device), out=out)
        spent(timings, self.name, started)

    def announce(self, ids: Tensor, misses: Optional[Misses] = None) -> None:
        r"""A sampled batch needing the node :obj:`ids` entered the
        loader's look-ahead window; :obj:`misses` gives those no static
        cache before this link holds (default: all of them)."""
        if self.fallback is not None:
            self.fallback.announce(ids, misses)

    def retire(self, ids: Tensor) -> None:
        r"""The batch announced with :obj:`ids` is being fetched."""
        if self.fallback is not None:
            self.fallback.retire(ids)

    def write(self, index: Tensor, rows: Tensor) -> bool:
        r"""Overwrites rows :obj:`index` with :obj:`rows` (the storage, and
        every cached copy); :obj:`False` where the storage is read-only."""
        return self.fallback is not None and self.fallback.write(index, rows)

    def held_ids(self) -> Tensor:
        r"""The rows this link holds for good in front of its fallback
        (none for a storage, nor for a cache whose rows change)."""
        return _NO_IDS

    def nbytes(self) -> int:
        r"""Bytes of rows this link holds in memory of its own."""
        return 0

    def reset_counters(self) -> None:
        self.counters.reset()

    def links(self) -> Iterator['Tier']:
        r"""This link and every link behind it, fastest first."""
        link: Optional[Tier] = self
        while link is not None:
            yield link
            link = link.fallback


class StorageTier(Tier):
    r"""The last link of a chain: holds every row of the attribute.

    Besides :meth:`read` it reads in the order asked (:meth:`gather`), hands
    the whole tensor out (:meth:`full`) and takes the store's read-ahead
    settings (:meth:`set_read_ahead`); it has no fallback.
    """
    name = 'storage'
    fallback = None

    @property
    @abstractmethod
    def shape(self) -> Tuple[int, ...]:
        ...

    @property
    @abstractmethod
    def dtype(self) -> torch.dtype:
        ...

    @property
    @abstractmethod
    def row_bytes(self) -> int:
        ...

    @property
    def out_device(self) -> torch.device:
        return torch.device('cpu')

    @abstractmethod
    def gather(self, ids: Tensor, out: Tensor,
               timings: Optional[Dict[str, float]] = None,
               staging: Optional[BufferPool] = None) -> None:
        r"""Writes rows :obj:`ids` into :obj:`out` in their order."""

    @abstractmethod
    def full(self) -> Tensor:
        r"""The whole tensor (a copy-free view where the rows allow)."""

    def set_read_ahead(self, window: Optional[ReadAheadWindow]) -> None:
        r"""The store's read-ahead (:obj:`None`: off); a tier with
        nothing to read ahead ignores it."""

    def read_ahead_stats(self) -> Optional[Dict[str, float]]:
        r"""Counters of this tier's read-ahead, if it keeps any."""
        return None

    def evict_page_cache(self) -> None:
        r"""Drops this tier's file pages from the page cache, if any
        (cold-start measurements)."""


@contextlib.contextmanager
def host_rows(out: Tensor) -> Iterator[Tensor]:
    r"""Where a storage in host memory puts rows bound for :obj:`out`:
    :obj:`out` itself on the CPU; else pinned memory (from torch's caching
    host allocator), copied to :obj:`out` without waiting."""
    if out.device.type == 'cpu':
        yield out
        return
    rows = torch.empty(out.shape, dtype=out.dtype, pin_memory=True)
    yield rows
    out.copy_(rows, non_blocking=True)
