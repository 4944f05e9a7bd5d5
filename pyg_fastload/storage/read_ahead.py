r"""A store's storage read-ahead: the settings and the look-ahead
bookkeeping its storage tiers share (:class:`ReadAheadWindow`), and how
many batches ahead the storage reads of a batch are issued to the page
cache (:class:`AdaptiveReadAhead`: memory-mapped storage; the depth follows
the measured storage share, with no model of the reads in flight: direct
reads have GIDS's accumulator,
:mod:`pyg_fastload.storage.read_accumulator`)."""
from __future__ import annotations

import math
import threading
import time
from typing import Any, Dict, Optional

from ..config import MAX_LOOKAHEAD

__all__ = ['AdaptiveReadAhead', 'ReadAheadWindow']


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


class ReadAheadWindow:
    r"""The read-ahead of one feature store, shared by its storage tiers:
    the settings of
    :meth:`~pyg_fastload.storage.TieredFeatureStore.set_read_ahead`, the
    batches the loader announced and retired so far, the storage seconds
    and bytes of the batch being gathered, and the depth they set
    (:class:`AdaptiveReadAhead`).

    :meth:`batch_announced` runs in the loader's sampling thread,
    :meth:`batch_retired` in its feature-loading thread: the counts, and a
    tier's pending reads, change under :attr:`lock`.

    Args:
        batches (int): the most batches read ahead (1 to
            :data:`~pyg_fastload.config.MAX_LOOKAHEAD`).
        min_reads (int): pending rows that issue a memory-mapped tier's
            reads.
        max_pending_bytes (int): pending (or staged) bytes that do.
        share (float): the share of the peak read rate a direct tier's
            accumulator aims at.
    """
    def __init__(self, batches: int, min_reads: int = 4096,
                 max_pending_bytes: int = 2**28, share: float = 0.95):
        check_read_ahead(batches, min_reads, max_pending_bytes)
        self.batches, self.min_reads = batches, min_reads
        self.max_pending_bytes, self.share = max_pending_bytes, share
        self._depth = AdaptiveReadAhead(batches, max_pending_bytes)
        self.announced = self.retired = 0
        self._reads = [0.0, 0]  # storage seconds and bytes of this batch
        self._started: Optional[float] = None
        self.lock = threading.Lock()

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state.pop('lock')
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.lock = threading.Lock()

    @property
    def depth(self) -> int:
        r"""Batches ahead of being gathered at which a batch's storage
        reads are issued at the latest."""
        return self._depth.depth

    def batch_announced(self) -> None:
        with self.lock:
            self.announced += 1

    def batch_retired(self) -> None:
        r"""A batch is being fetched: the previous one's storage share
        sets the depth."""
        with self.lock:
            self.retired += 1
            now = time.perf_counter()
            if self._started is not None:
                self._depth.observe(self._reads[0], now - self._started,
                                    self._reads[1])
            self._started, self._reads = now, [0.0, 0]

    def add_read(self, seconds: float, nbytes: int) -> None:
        r"""A storage tier read :obj:`nbytes` for the batch being gathered
        in :obj:`seconds`."""
        self._reads[0] += seconds
        self._reads[1] += nbytes

    def due(self, batches: int, rows: int, row_bytes: int) -> bool:
        r"""Whether :obj:`rows` pending rows of :obj:`batches` announced
        batches are read now: enough rows or bytes, or the oldest of those
        batches is within :attr:`depth` of being gathered (call under
        :attr:`lock`)."""
        before = self.announced - self.retired - batches
        return (rows >= self.min_reads
                or rows * row_bytes >= self.max_pending_bytes
                or before < self.depth)


def check_read_ahead(batches: int, min_reads: int,
                     max_pending_bytes: int) -> None:
    r"""Raises :class:`ValueError` naming a read-ahead setting out of
    range."""
    if not 0 <= batches <= MAX_LOOKAHEAD or min_reads < 1 or \
            max_pending_bytes < 1:
        raise ValueError(f"'batches={batches}' must lie in [0, "
                         f"{MAX_LOOKAHEAD}], "
                         f"'min_reads={min_reads}' >= 1 and "
                         f"'max_pending_bytes={max_pending_bytes}' >= 1")
