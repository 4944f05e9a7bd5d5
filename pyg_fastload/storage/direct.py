r"""The direct-read storage tier: feature rows read from their file with
``O_DIRECT`` (no page cache), many reads in flight, neighbouring rows merged
into one read (GIDS's storage path, with CPU threads in place of GPU
threads).

The page cache would otherwise keep every row read once, so host memory
would not be bounded by the host buffer's budget, and "bytes read" would be
rows times row size rather than what the device delivered. Here the only
host copy of a row is the host buffer (when it holds the row) and the batch
being assembled; every read is counted in device blocks.

The reads are planned here (block-aligned, touching rows merged, long
reads cut into pieces) and issued by a block reader
(:mod:`pyg_fastload.storage.block_reads`): ``preadv`` threads into host
memory, the page cache bypassed where the file system allows, or kvikio's
reads into GPU memory (:mod:`pyg_fastload.storage.gpu_direct`).
"""
from __future__ import annotations

import functools
import threading
import time
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from .block_reads import (BLOCK_BYTES, BlockReads, DirectStorageError,
                          HostReads, Reads)
from .buffer_pool import BufferPool
from .read_accumulator import StorageAccumulator
from .read_ahead import ReadAheadWindow
from .row_file import FileStorageTier, RowFile
from .tier import Misses
from .tier_counters import TierCounters

__all__ = ['DirectStorage', 'DirectStorageError', 'InFlightTuner']

#: Bytes of the aligned read buffer: larger gathers are read in waves.
WAVE_BYTES = 64 * 2**20
#: The longest single read (merged reads are cut to run in parallel).
READ_BYTES = 2**20


def _split(reads: Reads) -> Reads:
    r"""Long merged reads cut into pieces of at most :data:`READ_BYTES`, so
    that they too run in parallel."""
    out = []
    for offset, length, at in reads:
        for piece in range(0, length, READ_BYTES):
            out.append((offset + piece, min(READ_BYTES, length - piece),
                        at + piece))
    return out


class InFlightTuner:
    r"""Chooses how many reads to keep in flight from measured throughput
    (reader threads; GIDS's accumulator, which keeps a submission's reads
    many enough for a share of the peak rate, is
    :class:`~pyg_fastload.storage.read_accumulator.StorageAccumulator`):
    starting at :obj:`start`, every :obj:`waves` read waves of at least
    :obj:`min_reads` reads it compares the blocks per second with the
    previous setting's and doubles the depth while that gains at least
    :obj:`gain`; at the first doubling that does not, it goes back and
    stays.

    Args:
        start (int): the first depth.
        limit (int): the largest depth tried.
        waves (int): waves measured per depth.
        min_reads (int): reads a wave needs to be measured.
        gain (float): relative gain that justifies doubling.
    """
    def __init__(self, start: int = 4, limit: int = 128, waves: int = 4,
                 min_reads: int = 256, gain: float = 0.05):
        self.depth = start
        self.limit = limit
        self.waves = waves
        self.min_reads = min_reads
        self.gain = gain
        self.settled = start >= limit
        self.rates: Dict[int, float] = {}
        self._blocks = 0
        self._seconds = 0.0
        self._waves = 0

    def observe(self, reads: int, blocks: int, seconds: float) -> int:
        r"""Records one wave; returns the depth for the next."""
        if self.settled or reads < self.min_reads or seconds <= 0:
            return self.depth
        self._blocks += blocks
        self._seconds += seconds
        self._waves += 1
        if self._waves < self.waves:
            return self.depth
        rate = self._blocks / self._seconds
        self.rates[self.depth] = rate
        self._blocks, self._seconds, self._waves = 0, 0.0, 0
        previous = self.rates.get(self.depth // 2)
        if previous is not None and rate < previous * (1 + self.gain):
            self.depth //= 2  # doubling did not pay: back, and stay
            self.settled = True
        elif self.depth * 2 <= self.limit:
            self.depth *= 2
        else:
            self.settled = True
        return self.depth


class DirectStorage(FileStorageTier):
    r"""All rows of a raw row-major file, read with direct I/O.

    Rows of a gather are read in file order; rows whose blocks touch (or
    lie within :obj:`merge_gap` blocks) are merged into one read, and up to
    :obj:`in_flight` reads run at once (:class:`HostReads`: reader
    threads, ``preadv`` releases the GIL). Rows are gathered from the
    aligned read buffer straight into the caller's buffer (the batch's). A
    whole-tensor read (:meth:`full`, used for small attributes) goes
    through a memory map of the file. With an :attr:`accumulator`
    (GIDS's, set by the store's read-ahead), a batch whose reads are too
    few to run near the peak rate reads the next announced batches' rows
    with its own.

    Args:
        path (str): the raw binary file.
        dtype (torch.dtype): element type.
        shape (Sequence[int]): ``[num_rows, ...]``.
        offset (int): byte offset of the first row (a multiple of the
            element size).
        in_flight (int or str): reads issued at once, or ``'auto'``: chosen
            from measured throughput (:class:`InFlightTuner`).
        merge_gap (int): blocks between two rows' reads that are read
            through rather than split (0: only touching reads merge).
        direct (bool, optional): require ``O_DIRECT`` (:obj:`True`), never
            use it (:obj:`False`), or use it where the file system allows
            (:obj:`None`, with a warning where it does not).
        reads (callable, optional): opens what issues the block reads of
            the file (default: :class:`HostReads` with :obj:`direct`).
    """
    def __init__(self, path: str, dtype: torch.dtype, shape: Sequence[int],
                 offset: int = 0, in_flight: Union[int, str] = 16,
                 merge_gap: int = 0, direct: Optional[bool] = None,
                 reads: Optional[Callable[[RowFile], BlockReads]] = None):
        self.file = RowFile(path, dtype, shape, offset)
        self.tuner = InFlightTuner() if in_flight == 'auto' else None
        if self.tuner is not None:
            in_flight = self.tuner.depth
        for key, value, low in (('in_flight', in_flight, 1),
                                ('merge_gap', merge_gap, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or \
                    value < low:
                raise ValueError(f"'{key}' = {value!r} must be an int >= "
                                 f"{low}" + (" or 'auto'" if key == 'in_flight'
                                             else ''))
        if offset % self.file.itemsize:
            raise ValueError(f"'offset' = {offset} is not a multiple of the "
                             f"{self.file.itemsize}-byte element size of "
                             f"{dtype}")
        self.counters = TierCounters()
        self.in_flight = in_flight
        self.merge_gap = merge_gap
        self.read_calls = 0
        self._window: Optional[ReadAheadWindow] = None
        #: GIDS's accumulator, set by the store's read-ahead.
        self.accumulator: Optional[StorageAccumulator] = None
        self._staging = BufferPool(max_buffers=1)
        opener = reads or functools.partial(HostReads, direct=direct)
        self.reads: BlockReads = opener(self.file)
        self.reads.set_threads(in_flight)
        self._lock = threading.Lock()  # one gather at a time per storage

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        for key in ('_lock', 'accumulator'):
            state.pop(key)
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.accumulator = None
        self._lock = threading.Lock()

    @property
    def place(self) -> str:
        return self.reads.place

    # Reading #################################################################

    def lands_on(self, device: torch.device) -> torch.device:
        return self.reads.lands_on(device)

    def extents(self, rows: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        r"""The merged reads of sorted distinct :obj:`rows`: ``(first
        block, blocks, extent of every row)``."""
        start = self.file.offset + rows * self.row_bytes
        first = torch.div(start, BLOCK_BYTES, rounding_mode='floor')
        last = torch.div(start + self.row_bytes - 1, BLOCK_BYTES,
                         rounding_mode='floor')
        new = torch.ones(rows.numel(), dtype=torch.bool)
        new[1:] = first[1:] > last[:-1] + 1 + self.merge_gap
        extent = torch.cumsum(new, 0) - 1
        begins = first[new]
        ends = torch.full((begins.numel(), ), -1, dtype=torch.long)
        ends.scatter_reduce_(0, extent, last, 'amax')
        return begins, ends - begins + 1, extent

    def read_sorted(self, rows: Tensor, out: Tensor,
                    requests: Optional[int] = None) -> None:
        r"""Reads sorted distinct :obj:`rows` into :obj:`out` (counted as
        :obj:`requests` requested rows, default one per row), through the
        :attr:`accumulator` if there is one."""
        if self.accumulator is not None:
            self.accumulator.read(self, rows, out, requests)
        else:
            self.read_direct(rows, out, requests)

    def read_direct(self, rows: Tensor, out: Tensor,
                    requests: Optional[int] = None) -> None:
        r"""Reads sorted distinct :obj:`rows` into :obj:`out` in one
        submission (counted as :obj:`requests` requested rows, default one
        per row; ``pages`` and ``disk_bytes`` are the blocks read), in
        waves whose read buffer stays within :data:`WAVE_BYTES`."""
        per_row = (self.row_bytes // BLOCK_BYTES + 2 + self.merge_gap) * \
            BLOCK_BYTES  # the most blocks one row can add to a wave
        step = max(1, WAVE_BYTES // per_row)
        for start in range(0, rows.numel(), step):
            self._read_wave(rows[start:start + step],
                            out[start:start + step])
        self.counters.requests += (rows.numel() if requests is None
                                   else requests) - rows.numel()

    def _plan(self, rows: Tensor) -> Tuple[Tensor, Tensor, Tensor, int,
                                           Reads]:
        r"""The reads of sorted distinct :obj:`rows`: ``(first block of
        each merged read, its place in the read buffer in blocks, extent
        of every row, buffer bytes, reads (file offset, length, buffer
        offset) cut to :data:`READ_BYTES`)``."""
        begins, blocks, extent = self.extents(rows)
        at = torch.cumsum(blocks, 0) - blocks
        total = int(blocks.sum()) * BLOCK_BYTES
        reads = _split(list(zip((begins * BLOCK_BYTES).tolist(),
                                (blocks * BLOCK_BYTES).tolist(),
                                (at * BLOCK_BYTES).tolist())))
        return begins, at, extent, total, reads

    def count_reads(self, rows: Tensor) -> int:
        r"""Reads a submission of sorted distinct :obj:`rows` issues."""
        if rows.numel() == 0:
            return 0
        _, blocks, _ = self.extents(rows)
        return int(torch.div(blocks * BLOCK_BYTES + READ_BYTES - 1,
                             READ_BYTES, rounding_mode='floor').sum())

    def probe(self, count: int,
              generator: torch.Generator) -> Tuple[int, float]:
        r"""Times one submission of up to :obj:`count` random distinct
        rows (not counted as reads): ``(reads, seconds)``."""
        rows = torch.unique(torch.randint(self.shape[0], (count, ),
                                          generator=generator))
        *_, total, reads = self._plan(rows)
        with self._lock:
            started = time.perf_counter()
            self.reads.fetch(reads, total, torch.device('cpu'),
                             self.in_flight)
            return len(reads), time.perf_counter() - started

    def _read_wave(self, rows: Tensor, out: Tensor) -> None:
        if rows.numel() == 0:
            return
        begins, at, extent, total, reads = self._plan(rows)
        with self._lock:
            started = time.perf_counter()
            raw = self.reads.fetch(reads, total, out.device, self.in_flight)
            seconds = time.perf_counter() - started
            if self.accumulator is not None:
                self.accumulator.model.observe(len(reads), seconds)
            if self.tuner is not None:
                self._set_in_flight(self.tuner.observe(
                    len(reads), total // BLOCK_BYTES, seconds))
            start = self.file.offset + rows * self.row_bytes
            place = at.index_select(0, extent) * BLOCK_BYTES + (
                start - begins.index_select(0, extent) * BLOCK_BYTES)
            itemsize = self.file.itemsize
            elems = self.row_bytes // itemsize
            # window i = elements i .. i + elems of the read buffer
            windows = raw.view(self.dtype).unfold(0, elems, 1)
            target = out.view(rows.numel(), elems) if out.is_contiguous() \
                else None
            index = (place // itemsize).to(raw.device)

            def gather() -> None:
                picked = torch.index_select(windows, 0, index, out=target)
                if target is None:
                    out.copy_(picked.view(out.shape))
            # on a GPU queued: the next wave's reads wait for it
            self.reads.read_out(gather, raw.device)
        self.read_calls += len(reads)
        self.counters.add(rows.numel(), rows.numel(), self.row_bytes,
                          total // BLOCK_BYTES)
        self.counters.disk_bytes += total

    def _set_in_flight(self, depth: int) -> None:
        if depth != self.in_flight and self.accumulator is not None:
            self.accumulator.model.reset()  # a new device rate to fit
        self.in_flight = depth
        self.reads.set_threads(depth)

    # Read-ahead: GIDS's accumulator ##########################################

    def set_read_ahead(self, window: Optional[ReadAheadWindow]) -> None:
        self._window = window
        self.accumulator = None if window is None else StorageAccumulator(
            window.batches, window.max_pending_bytes, window.share)

    def announce(self, ids: Tensor, misses: Optional[Misses] = None) -> None:
        r"""Tells the accumulator which storage rows the batch will read
        (:obj:`misses`, sorted) and how many of its rows the caches
        serve."""
        if self.accumulator is not None:
            rows = (ids if misses is None else misses()).sort()[0]
            self.accumulator.announce(ids, rows, self.count_reads(rows),
                                      ids.numel() - rows.numel())

    def retire(self, ids: Tensor) -> None:
        if self.accumulator is not None:
            self.accumulator.retire(ids)

    def read_ahead_stats(self) -> Optional[Dict[str, float]]:
        return None if self.accumulator is None else self.accumulator.stats()

    def reset_counters(self) -> None:
        super().reset_counters()
        if self.accumulator is not None:
            self.accumulator.reset_counts()
