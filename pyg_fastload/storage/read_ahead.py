r"""How many batches ahead the storage reads of a batch are issued to the
page cache (memory-mapped storage; the depth follows the measured storage
share, with no model of the reads in flight: direct reads have GIDS's
accumulator, :mod:`pyg_fastload.storage.accumulator`)."""
from __future__ import annotations

import math
from typing import Optional

__all__ = ['AdaptiveReadAhead']


class AdaptiveReadAhead:
    r"""How many batches ahead a batch's storage reads are issued, from the
    share of the time between batches spent reading storage: at least
    :obj:`grow_share` doubles the depth (latency is exposed), at most
    :obj:`shrink_share` lowers it by one (the reads are hidden; a shallower
    look-ahead holds less memory). Bounded by :obj:`max_batches` and by
    what :obj:`max_bytes` holds of the storage bytes a batch reads.

    Args:
        max_batches (int): the deepest look-ahead.
        max_bytes (int): bytes the read-ahead batches may hold.
        grow_share (float): storage share of a batch's time that grows the
            depth.
        shrink_share (float): storage share that shrinks it.
        smoothing (float): weight of the newest batch in the averages.
    """
    def __init__(self, max_batches: int, max_bytes: int,
                 grow_share: float = 0.25, shrink_share: float = 0.05,
                 smoothing: float = 0.3):
        if max_batches < 1 or max_bytes < 1:
            raise ValueError(f"'max_batches={max_batches}' and "
                             f"'max_bytes={max_bytes}' must be >= 1")
        if not 0 <= shrink_share < grow_share:
            raise ValueError(f"'shrink_share={shrink_share}' must be >= 0 "
                             f"and below 'grow_share={grow_share}'")
        self.max_batches, self.max_bytes = max_batches, max_bytes
        self.grow_share, self.shrink_share = grow_share, shrink_share
        self.smoothing = smoothing
        self.depth = 1
        self.read_share: Optional[float] = None
        self.batch_bytes: Optional[float] = None

    def _average(self, old: Optional[float], new: float) -> float:
        return new if old is None else old + self.smoothing * (new - old)

    def observe(self, read_seconds: float, interval: float,
                batch_bytes: int) -> int:
        r"""A batch read :obj:`batch_bytes` from storage in
        :obj:`read_seconds`, :obj:`interval` seconds after the previous
        batch; returns the new depth."""
        share = min(read_seconds / interval, 1.0) if interval > 0 else 1.0
        self.read_share = self._average(self.read_share, share)
        self.batch_bytes = self._average(self.batch_bytes, batch_bytes)
        depth = self.depth
        if self.read_share >= self.grow_share:
            depth *= 2
        elif self.read_share <= self.shrink_share:
            depth -= 1
        fits = (self.max_bytes // math.ceil(self.batch_bytes)
                if self.batch_bytes >= 1 else self.max_batches)
        self.depth = max(1, min(depth, self.max_batches, fits))
        return self.depth
