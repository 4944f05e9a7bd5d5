r"""The direct-read storage tier: feature rows read from their file with
``O_DIRECT`` (no page cache), many reads in flight, neighbouring rows merged
into one read (GIDS's storage path, with CPU threads in place of GPU
threads).

The page cache would otherwise keep every row read once, so host memory
would not be bounded by the host buffer's budget, and "bytes read" would be
rows times row size rather than what the device delivered. Here the only
host copy of a row is the host buffer (when it holds the row) and the batch
being assembled; every read is counted in device blocks.

Where the file system refuses ``O_DIRECT`` (tmpfs, some network file
systems) the tier says so once and reads through the page cache, dropping
what it read from it right after (``posix_fadvise(DONTNEED)``), so memory
stays bounded; its counters then say ``direct = 0``.
"""
from __future__ import annotations

import mmap
import os
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor

from .accumulator import StorageAccumulator
from .tiers import MmapStorage

__all__ = ['DirectStorage', 'DirectStorageError', 'InFlightTuner',
           'BLOCK_BYTES']

#: Alignment of direct reads: offsets, lengths and buffers (the page size
#: covers every logical block size in use, 512 B and 4 KiB).
BLOCK_BYTES = 4096
#: Bytes of the aligned read buffer: larger gathers are read in waves.
WAVE_BYTES = 64 * 2**20
#: The longest single read (merged reads are cut to run in parallel).
READ_BYTES = 2**20


class DirectStorageError(ValueError):
    r"""A read returned fewer bytes than the rows need (the file shrank
    after it was opened): never a partial row."""


class _AlignedBuffer:
    r"""A reusable block-aligned byte buffer (an anonymous mapping, aligned
    to the page size), grown on demand."""
    def __init__(self) -> None:
        self._map: Optional[mmap.mmap] = None
        self.view: Optional[memoryview] = None

    def get(self, nbytes: int) -> Tuple[memoryview, Tensor]:
        if self._map is None or len(self._map) < nbytes:
            self.close()
            size = max(BLOCK_BYTES, -(-nbytes // BLOCK_BYTES) * BLOCK_BYTES)
            self._map = mmap.mmap(-1, size)
            self.view = memoryview(self._map)
        with warnings.catch_warnings():  # writable, owned here
            warnings.simplefilter('ignore', UserWarning)
            tensor = torch.frombuffer(self._map, dtype=torch.uint8)
        return self.view, tensor

    def close(self) -> None:
        if self.view is not None:
            self.view.release()
            self.view = None
        if self._map is not None:
            self._map.close()
            self._map = None


def _open_direct(path: str, direct: Optional[bool]) -> Tuple[int, bool]:
    r"""``(fd, direct)``: the file opened with ``O_DIRECT`` if the file
    system allows it (probed with one aligned read), else without."""
    flag = getattr(os, 'O_DIRECT', None)
    if direct is not False and flag is not None:
        probe = mmap.mmap(-1, BLOCK_BYTES)
        fd = -1
        try:
            fd = os.open(path, os.O_RDONLY | flag)
            os.preadv(fd, [probe], 0)
            return fd, True
        except OSError as error:
            if fd >= 0:
                os.close(fd)
            reason = f'{error.strerror} (errno {error.errno})'
        finally:
            probe.close()
    else:
        reason = ('this platform has no O_DIRECT' if flag is None else
                  'direct=False')
    if direct:
        raise OSError(f"'{path}': direct reads are not possible: {reason}; "
                      f"use storage='mmap' or keep the file on a local file "
                      f"system that allows O_DIRECT (ext4, xfs)")
    if direct is None:
        warnings.warn(f"'{path}': the file system refuses O_DIRECT "
                      f"({reason}); reading through the page cache and "
                      f"dropping the rows from it after each read")
    return os.open(path, os.O_RDONLY), False


def _split(reads: List[Tuple[int, int, int]]) -> List[Tuple[int, int, int]]:
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
    :class:`~pyg_fastload.storage.accumulator.StorageAccumulator`): starting
    at :obj:`start`, every :obj:`waves` read waves of at least
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


class DirectStorage(MmapStorage):
    r"""All rows of a raw row-major file, read with direct I/O.

    Rows of a gather are read in file order; rows whose blocks touch (or
    lie within :obj:`merge_gap` blocks) are merged into one read, and up to
    :obj:`in_flight` reads run at once (reader threads: ``preadv`` releases
    the GIL). Rows are gathered from the aligned read buffer straight into
    the caller's buffer (the batch's). A whole-tensor read (:meth:`full`,
    used for small attributes) goes through the memory map. With an
    :attr:`accumulator` (GIDS's), a batch whose reads are too few to run
    near the peak rate reads the next announced batches' rows with its own.

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
    """
    place = 'file, direct reads'

    def __init__(self, path: str, dtype: torch.dtype, shape: Sequence[int],
                 offset: int = 0, in_flight: Union[int, str] = 16,
                 merge_gap: int = 0,
                 direct: Optional[bool] = None):
        super().__init__(path, dtype, shape, offset)
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
        itemsize = torch.empty((), dtype=dtype).element_size()
        if offset % itemsize:
            raise ValueError(f"'offset' = {offset} is not a multiple of the "
                             f"{itemsize}-byte element size of {dtype}")
        self.in_flight = in_flight
        self.merge_gap = merge_gap
        self._want_direct = direct
        self._open()

    def _open(self) -> None:
        os.close(self._fd)  # the buffered descriptor MmapStorage opened
        self._fd = None
        self._fd, self.direct = _open_direct(self.path, self._want_direct)
        self._buffer = _AlignedBuffer()
        self._pool: Optional[ThreadPoolExecutor] = None
        self._pool_size = 0
        self._lock = threading.Lock()  # one gather at a time per storage
        self.file_bytes = os.path.getsize(self.path)
        self.read_calls = 0
        #: GIDS's accumulator, set by the feature store's read-ahead.
        self.accumulator: Optional[StorageAccumulator] = None

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        for key in ('_buffer', '_pool', '_lock', 'accumulator'):
            state.pop(key)
        return state

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._open()

    def __del__(self) -> None:
        pool = getattr(self, '_pool', None)
        if pool is not None:
            pool.shutdown(wait=False)
        buffer = getattr(self, '_buffer', None)
        if buffer is not None:
            buffer.close()
        super().__del__()

    def prefetch(self, ids: Tensor) -> int:
        r"""Nothing to ask of the page cache: direct reads bypass it."""
        return 0

    def extents(self, rows: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        r"""The merged reads of sorted distinct :obj:`rows`: ``(first
        block, blocks, extent of every row)``."""
        start = self.offset + rows * self.row_bytes
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
                                           List[Tuple[int, int, int]]]:
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
            self._fetch(reads, total, torch.device('cpu'))
            return len(reads), time.perf_counter() - started

    def _read_wave(self, rows: Tensor, out: Tensor) -> None:
        if rows.numel() == 0:
            return
        begins, at, extent, total, reads = self._plan(rows)
        with self._lock:
            started = time.perf_counter()
            raw = self._fetch(reads, total, out.device)
            seconds = time.perf_counter() - started
            if self.accumulator is not None:
                self.accumulator.model.observe(len(reads), seconds)
            if self.tuner is not None:
                self._set_in_flight(self.tuner.observe(
                    len(reads), total // BLOCK_BYTES, seconds))
            start = self.offset + rows * self.row_bytes
            place = at.index_select(0, extent) * BLOCK_BYTES + (
                start - begins.index_select(0, extent) * BLOCK_BYTES)
            elems = self.row_bytes // self._array.itemsize
            # window i = elements i .. i + elems of the read buffer
            windows = raw.view(self._dtype).unfold(0, elems, 1)
            target = out.view(rows.numel(), elems) if out.is_contiguous() \
                else None
            picked = torch.index_select(
                windows, 0, (place // self._array.itemsize).to(raw.device),
                out=target)
            if target is None:
                out.copy_(picked.view(out.shape))
        self.read_calls += len(reads)
        self.counters.add(rows.numel(), rows.numel(), self.row_bytes,
                          total // BLOCK_BYTES)
        self.counters.disk_bytes += total

    def _fetch(self, reads: List[Tuple[int, int, int]], total: int,
               device: torch.device) -> Tensor:
        r"""Runs :obj:`reads` ``(file offset, length, buffer offset)`` into
        a buffer of :obj:`total` bytes for rows bound to :obj:`device`;
        returns the buffer (``uint8``)."""
        view, raw = self._buffer.get(total)
        self._run(reads, view)
        return raw[:total]

    def _set_in_flight(self, depth: int) -> None:
        if depth != self.in_flight and self.accumulator is not None:
            self.accumulator.model.reset()  # a new device rate to fit
        self.in_flight = depth

    def check_read(self, got: int, offset: int, length: int) -> None:
        r"""Raises :class:`DirectStorageError` if a read of :obj:`length`
        bytes at :obj:`offset` returned fewer bytes than the file should
        hold there (the last block of the file may be short)."""
        want = min(length, self.file_bytes - offset)
        if got < want:
            raise DirectStorageError(
                f"'{self.path}': read {got} of {want} bytes at offset "
                f"{offset}: the file is shorter than its "
                f"{list(self.shape)} rows of {self.dtype} (truncated "
                f"after it was opened?)")

    def _run(self, reads: List[Tuple[int, int, int]],
             view: memoryview) -> None:
        r"""Issues :obj:`reads` ``(file offset, length, buffer offset)``,
        up to :attr:`in_flight` at once."""
        workers = min(self.in_flight, len(reads))
        if workers <= 1:
            self._read_all(reads, view)
            return
        if self._pool is None or self._pool_size < self.in_flight:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
            self._pool_size = self.in_flight
            self._pool = ThreadPoolExecutor(
                self.in_flight, thread_name_prefix='pyg-fastload-read')
        futures = [self._pool.submit(self._read_all, reads[i::workers], view)
                   for i in range(workers)]
        for future in futures:
            future.result()

    def _read_all(self, reads: List[Tuple[int, int, int]],
                  view: memoryview) -> None:
        for offset, length, at in reads:
            got = os.preadv(self._fd, [view[at:at + length]], offset)
            self.check_read(got, offset, length)
            if not self.direct:
                os.posix_fadvise(self._fd, offset, length,
                                 os.POSIX_FADV_DONTNEED)
