r"""Feature tiers, fastest first: caches (device cache, host buffer) that hold
some rows, and the storage that holds all of them (in memory or on disk).

Every tier answers "which of these rows do you hold" with a slot map (one
entry per node, ``-1`` if absent), so a lookup is one gather, as in
PaGraph's ``gpu_flag``/``localid2cacheid`` arrays. Slots are ``int32`` while
the capacity fits (4 bytes per node and cache: 0.21 GiB on papers-like's 56M
nodes).
"""
from __future__ import annotations

import contextlib
import os
import threading
import warnings
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from ..graph.ranges import expand_ranges
from ..graph.topology import index_dtype_for
from .buffer_pool import BufferPool
from .counters import TierCounters
from .io_stats import process_read_bytes
from .rows import gather_rows

__all__ = [
    'MemoryStorage',
    'MmapStorage',
    'StaticCache',
    'WindowBufferedCache',
    'PAGE_BYTES',
]

PAGE_BYTES = 4096


class MemoryStorage:
    r"""All rows of a tensor held in (host) memory.

    Args:
        tensor (torch.Tensor): the full ``[num_rows, ...]`` tensor.
    """
    #: Whether :meth:`gather` reads into the output's device itself (only
    #: :class:`~pyg_fastload.storage.GpuDirectStorage`); otherwise rows are
    #: gathered in host memory and moved.
    reads_to_device = False
    #: Where the rows come from, in words (run summaries and plots).
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

    def gather(self, ids: Tensor, out: Tensor) -> None:
        r"""Writes rows :obj:`ids` into :obj:`out` (same length)."""
        gather_rows(self.tensor, ids, out=out)
        self.counters.add(ids.numel(), ids.numel(), self.row_bytes)


class MmapStorage:
    r"""All rows of a raw row-major file, memory-mapped and never read
    whole: a gather reads each requested row once, in file order.

    Args:
        path (str): the raw binary file.
        dtype (torch.dtype): element type.
        shape (Sequence[int]): ``[num_rows, ...]``.
        offset (int): byte offset of the first row in the file.
    """
    reads_to_device = False
    place = 'file, memory-mapped'

    def __init__(self, path: str, dtype: torch.dtype, shape: Sequence[int],
                 offset: int = 0):
        self.path = os.fspath(path)
        self._dtype = dtype
        self._shape = tuple(int(s) for s in shape)
        itemsize = torch.empty((), dtype=dtype).element_size()
        self._needed = offset + int(np.prod(self._shape)) * itemsize
        actual = os.path.getsize(self.path)
        if actual < self._needed:
            raise ValueError(f"'{self.path}' holds {actual} bytes, but shape "
                             f"{list(self._shape)} of {dtype} needs "
                             f"{self._needed}: the file is truncated")
        self.offset = offset
        self._map()
        self._fd = os.open(self.path, os.O_RDONLY)
        self.counters = TierCounters()
        self.prefetched_pages = 0
        self._staging = BufferPool(max_buffers=1)

    def _map(self) -> None:
        np_dtype = torch.empty((), dtype=self._dtype).numpy().dtype
        self._array = np.memmap(self.path, dtype=np_dtype, mode='r',
                                offset=self.offset, shape=self._shape)
        with warnings.catch_warnings():  # the mapping is read-only
            warnings.simplefilter('ignore', UserWarning)
            self._tensor = torch.from_numpy(self._array)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.pop('_array')
        state.pop('_tensor')
        state.pop('_fd')
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._map()
        self._fd = os.open(self.path, os.O_RDONLY)

    def __del__(self) -> None:
        fd = getattr(self, '_fd', None)
        if fd is not None:
            os.close(fd)

    def _pages(self, rows: Tensor) -> Tensor:
        r"""Sorted distinct file pages covered by sorted unique rows."""
        start = self.offset + rows * self.row_bytes
        first = torch.div(start, PAGE_BYTES, rounding_mode='floor')
        last = torch.div(start + self.row_bytes - 1, PAGE_BYTES,
                         rounding_mode='floor')
        return torch.unique_consecutive(expand_ranges(first,
                                                      last - first + 1))

    def check_size(self) -> None:
        r"""Raises :class:`OSError` naming the file if it was shortened since
        it was mapped: reading a mapped page past the end of a file kills
        the process with ``SIGBUS`` instead of raising."""
        actual = os.fstat(self._fd).st_size
        if actual < self._needed:
            raise OSError(f"'{self.path}' was truncated while in use: it "
                          f"holds {actual} bytes, its rows need "
                          f"{self._needed}; restore the file (or prepare the "
                          f"dataset again) and restart")

    def prefetch(self, ids: Tensor) -> int:
        r"""Asks the kernel to start reading the pages of rows :obj:`ids`
        (``posix_fadvise(WILLNEED)`` on merged, sorted page ranges) without
        waiting; returns the number of pages requested."""
        if ids.numel() == 0:
            return 0
        pages = self._pages(torch.unique(ids))
        breaks = (pages[1:] - pages[:-1] != 1).nonzero().view(-1) + 1
        starts = torch.cat([pages[:1], pages[breaks]])
        ends = torch.cat([pages[breaks - 1], pages[-1:]]) + 1
        for begin, end in zip(starts.tolist(), ends.tolist()):
            os.posix_fadvise(self._fd, begin * PAGE_BYTES,
                             (end - begin) * PAGE_BYTES,
                             os.POSIX_FADV_WILLNEED)
        self.prefetched_pages += pages.numel()
        return int(pages.numel())

    def evict_page_cache(self) -> None:
        r"""Drops the file's clean pages from the page cache (for cold-start
        measurements; needs no privileges)."""
        os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_DONTNEED)

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self._shape[1:])) * self._array.itemsize

    def full(self) -> Tensor:
        r"""The whole tensor as a copy-free view of the mapping (reading it
        all pulls the file through the page cache)."""
        return self._tensor

    def pages_of(self, rows: Tensor) -> int:
        r"""Distinct file pages covered by :obj:`rows` (sorted, unique):
        the pages of every row, less one wherever a row starts on the page
        the previous row ends on (counted without listing the pages)."""
        if rows.numel() == 0:
            return 0
        start = self.offset + rows * self.row_bytes
        first = torch.div(start, PAGE_BYTES, rounding_mode='floor')
        last = torch.div(start + self.row_bytes - 1, PAGE_BYTES,
                         rounding_mode='floor')
        shared = int((first[1:] == last[:-1]).sum())
        return int((last - first).sum()) + rows.numel() - shared

    def gather(self, ids: Tensor, out: Tensor) -> None:
        r"""Writes rows :obj:`ids` into :obj:`out`, reading every distinct
        row once, in file order."""
        if ids.numel() == 0:
            return
        rows, inverse = torch.unique(ids, sorted=True, return_inverse=True)
        block = self._staging.empty((rows.numel(), *self._shape[1:]),
                                    self._dtype)
        self.read_sorted(rows, block, requests=ids.numel())
        gather_rows(block, inverse, out=out)

    def read_sorted(self, rows: Tensor, out: Tensor,
                    requests: Optional[int] = None) -> None:
        r"""Reads sorted distinct :obj:`rows` into :obj:`out` in file order
        (counted as :obj:`requests` requested rows, default one per row)."""
        self.check_size()
        before = process_read_bytes()
        gather_rows(self._tensor, rows, out=out)
        after = process_read_bytes()
        self.counters.add(rows.numel() if requests is None else requests,
                          rows.numel(), self.row_bytes, self.pages_of(rows))
        if before is not None and after is not None:
            self.counters.disk_bytes += after - before


class StaticCache:
    r"""A fixed set of rows (PaGraph/DSP hot-node cache, GIDS host buffer),
    filled once from the tier below and never updated.

    Args:
        num_nodes (int): rows of the full tensor.
        node_ids (torch.Tensor): the nodes to hold.
        values (torch.Tensor): their rows, already on :obj:`device`.
    """
    def __init__(self, num_nodes: int, node_ids: Tensor, values: Tensor):
        capacity = max(int(node_ids.numel()), int(values.shape[0]))
        self.slot = torch.full((num_nodes, ), -1,
                               dtype=index_dtype_for(capacity))
        self.slot[node_ids] = torch.arange(node_ids.numel(),
                                           dtype=self.slot.dtype)
        self.node_ids = node_ids
        self.values = values
        self.counters = TierCounters()

    @property
    def capacity(self) -> int:
        return int(self.node_ids.numel())

    @property
    def place(self) -> str:
        r"""Where the rows live, in words (run summaries and plots)."""
        device = self.values.device
        return 'CPU memory' if device.type == 'cpu' else (
            f'GPU memory, {device}' if device.type == 'cuda' else
            f'{device} memory')

    @property
    def row_bytes(self) -> int:
        return self.values[0].nbytes if self.values.numel() else 0

    def lookup(self, ids: Tensor) -> Tensor:
        r"""Slot of every id in :obj:`values`, ``-1`` where not held."""
        return self.slot.index_select(0, ids)

    def read(self, slots: Tensor, out: Optional[Tensor] = None) -> Tensor:
        r"""Rows in :obj:`slots`, into :obj:`out` if given (same device)."""
        return gather_rows(self.values, slots.to(self.values.device),
                           out=out)

    def nbytes(self) -> int:
        return self.values.nbytes


class WindowBufferedCache(StaticCache):
    r"""A dynamic cache with GIDS's window buffering: the loader announces
    each batch when it is sampled (``W`` batches before it is consumed), a
    cached row whose node is still needed by an announced batch is never
    evicted, and among the others the victim is random.

    Loaders in several threads may share it (a training loader and a
    validation pass started inside its epoch, or two loaders): every
    operation runs under :meth:`exclusive`, so a row is never evicted
    between looking up its slot and reading it.

    Args:
        num_nodes (int): rows of the full tensor.
        capacity (int): rows the cache holds.
        row_shape (Sequence[int]): shape of one row.
        dtype (torch.dtype): element type.
        device (torch.device): where the rows live.
        seed (int): seed of the eviction order.
    """
    def __init__(self, num_nodes: int, capacity: int,
                 row_shape: Sequence[int], dtype: torch.dtype,
                 device: torch.device, seed: int = 0):
        super().__init__(num_nodes, torch.empty(0, dtype=torch.long),
                         torch.empty((capacity, *row_shape), dtype=dtype,
                                     device=device))
        self._capacity = capacity
        self.slot_node = torch.full((capacity, ), -1, dtype=torch.int64)
        self.pending = torch.zeros(num_nodes, dtype=torch.int32)
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

    @property
    def capacity(self) -> int:
        return self._capacity

    def announce(self, ids: Tensor) -> None:
        r"""A batch needing the (unique) :obj:`ids` entered the window."""
        with self._lock:
            self.pending.index_add_(0, ids,
                                    torch.ones_like(ids, dtype=torch.int32))

    def retire(self, ids: Tensor) -> None:
        r"""The batch announced with :obj:`ids` was consumed."""
        with self._lock:
            self.pending.index_add_(0, ids, torch.full_like(
                ids, -1, dtype=torch.int32))

    def admit(self, ids: Tensor, rows: Tensor,
              row_index: Optional[Tensor] = None) -> None:
        r"""Offers freshly fetched rows to the cache: unique :obj:`ids` whose
        rows are ``rows[row_index]`` (default: ``rows``). Rows an announced
        batch still needs go in first, into free slots, then random slots
        whose node no announced batch needs; the other rows only fill free
        slots. Rows another thread admitted since they were looked up are
        skipped (a node is never held twice)."""
        if ids.numel() == 0 or self._capacity == 0:
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

    def nbytes(self) -> int:
        return self.values.nbytes
