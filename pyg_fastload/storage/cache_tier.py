r"""Caches in front of a fallback tier: the slot-map cache every cache link
is (:class:`CacheTier`) and the static cache (:class:`StaticCache`: the
PaGraph/DSP device cache, the GIDS host buffer).

A cache answers "which of these rows do you hold" with a slot map (one
entry per node, ``-1`` if absent), so a lookup is one gather, as in
PaGraph's ``gpu_flag``/``localid2cacheid`` arrays. Slots are ``int32`` while
the capacity fits (4 bytes per node and cache: 0.21 GiB on papers-like's 56M
nodes).
"""
from __future__ import annotations

import contextlib
import time
from typing import ContextManager, Dict, Optional

import torch
from torch import Tensor

from ..graph.topology import index_dtype_for
from .rows import gather_rows
from .tier import Misses, Read, Tier, spent
from .tier_counters import TierCounters

__all__ = ['CacheTier', 'StaticCache']


class CacheTier(Tier):
    r"""A link that holds some rows (:attr:`values`, one per slot) and asks
    :attr:`fallback` for the others: each read serves its hits first, then
    the rows its fallback returns.

    Args:
        fallback (Tier): the next, slower link.
        values (torch.Tensor): the slots' rows, on the cache's device.
        name (str): the tier's key in the store's ``stats()``
            (``'device'``, ``'host'``).
        capacity (int, optional): the slots the cache may hold (default:
            the rows of :obj:`values`).
    """
    def __init__(self, fallback: Tier, values: Tensor, name: str,
                 capacity: Optional[int] = None):
        self.fallback = fallback
        self.values = values
        self.name = name
        rows = int(values.shape[0]) if capacity is None else capacity
        self.slot = torch.full((fallback.shape[0], ), -1,
                               dtype=index_dtype_for(rows))
        self.counters = TierCounters()

    @property
    def capacity(self) -> int:
        r"""Rows the cache holds at most."""
        return int(self.values.shape[0])

    @property
    def place(self) -> str:
        r"""Where the rows live, in words (run summaries and plots)."""
        device = self.values.device
        return 'CPU memory' if device.type == 'cpu' else (
            f'GPU memory, {device}' if device.type == 'cuda' else
            f'{device} memory')

    @property
    def out_device(self) -> torch.device:
        return self.values.device

    def nbytes(self) -> int:
        return self.values.nbytes

    def exclusive(self) -> ContextManager:
        r"""Holds the cache while its slots are looked up and read, where
        another thread may change them (never, for a static cache)."""
        return contextlib.nullcontext()

    def lookup(self, ids: Tensor) -> Tensor:
        r"""Slot of every id in :attr:`values`, ``-1`` where not held."""
        return self.slot.index_select(0, ids)

    def read_slots(self, slots: Tensor,
                   out: Optional[Tensor] = None) -> Tensor:
        r"""Rows in :obj:`slots`, into :obj:`out` if given (on any
        device)."""
        rows = gather_rows(self.values, slots.to(self.values.device),
                           out=out if out is None or
                           out.device == self.values.device else None)
        if out is not None and rows is not out:
            out.copy_(rows)
            return out
        return rows

    def read(self, ids: Tensor, out: Tensor,
             timings: Dict[str, float]) -> Read:
        r"""Writes the rows this cache holds first, then those its fallback
        reads (offered to :meth:`admit_fetched`)."""
        started = time.perf_counter()
        with self.exclusive():  # no eviction between lookup and read
            slot = self.lookup(ids)
            hit = slot >= 0
            hit_at = hit.nonzero().view(-1)
            held = hit_at.numel()
            self.counters.add(ids.numel(), held, self.row_bytes)
            if held:
                self.read_slots(slot.index_select(0, hit_at), out[:held])
        miss_at = (~hit).nonzero().view(-1)
        missed = ids.index_select(0, miss_at) if held else ids
        spent(timings, self.name, started)
        if miss_at.numel() == 0:
            return Read(hit_at, 0)
        below = self.fallback.read(missed, out[held:], timings)
        if below.fetched:
            self.admit_fetched(missed, below, out[held:], timings)
        if not held:
            return below
        order = miss_at if below.order is None else \
            miss_at.index_select(0, below.order)
        return Read(torch.cat([hit_at, order]), below.fetched, below.sorted)

    def admit_fetched(self, ids: Tensor, below: Read, rows: Tensor,
                      timings: Dict[str, float]) -> None:
        r"""Rows just read from storage, offered to the cache: the last
        ``below.fetched`` of :obj:`rows` (placed as :obj:`below` says for
        :obj:`ids`). A static cache takes none."""

    def write(self, index: Tensor, rows: Tensor) -> bool:
        r"""Writes through: the fallback's rows, then the copies held
        here."""
        if not self.fallback.write(index, rows):
            return False
        with self.exclusive():
            slot = self.lookup(index)
            held = slot >= 0
            self.values[slot[held].to(self.values.device)] = rows[
                held.to(rows.device)].to(self.values.device)
        return True


class StaticCache(CacheTier):
    r"""A fixed set of rows (PaGraph/DSP hot-node cache, GIDS host buffer),
    filled once from the tier below and never updated.

    Args:
        fallback (Tier): the next, slower link.
        node_ids (torch.Tensor): the nodes to hold.
        values (torch.Tensor): their rows, already on the cache's device.
        name (str): the tier's key in ``stats()`` (default ``'host'``).
    """
    def __init__(self, fallback: Tier, node_ids: Tensor, values: Tensor,
                 name: str = 'host'):
        super().__init__(fallback, values, name,
                         capacity=max(int(node_ids.numel()),
                                      int(values.shape[0])))
        self.slot[node_ids] = torch.arange(node_ids.numel(),
                                           dtype=self.slot.dtype)
        self.node_ids = node_ids

    def held_ids(self) -> Tensor:
        return self.node_ids

    def announce(self, ids: Tensor, misses: Optional[Misses] = None) -> None:
        r"""Passes on the announced rows this cache does not hold (it will
        serve the others)."""
        def missed() -> Tensor:
            rows = ids if misses is None else misses()
            return rows[self.lookup(rows) < 0]

        self.fallback.announce(ids, missed)
