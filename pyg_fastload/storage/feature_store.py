r"""``TieredFeatureStore``: a PyG ``FeatureStore`` whose rows come from the
fastest tier that holds them: device cache, host buffer, then storage (in
memory or a memory-mapped file)."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import FeatureStore, TensorAttr

from ..config import MAX_LOOKAHEAD, available_memory, free_cuda_memory
from .accumulator import StorageAccumulator
from .buffer_pool import BufferPool
from .counters import TierCounters
from .direct import DirectStorage
from .gpu_direct import GpuDirectStorage
from .io_stats import process_memory, reset_peak_rss
from .protocol import BatchIds, of_group
from .read_ahead import AdaptiveReadAhead
from .tier_gather import (TierEntry, gather_tiers, holding, static_misses,
                          spent as add_spent)
from .tiers import MemoryStorage, MmapStorage, StaticCache, WindowBufferedCache

__all__ = ['TieredFeatureStore']

Key = Tuple[Optional[str], str]


def _key(attr: TensorAttr) -> Key:
    return (attr.group_name, attr.attr_name)


class TieredFeatureStore(FeatureStore):
    r"""Node attributes served from a device cache, a host buffer and a
    storage tier, fastest first; rows are looked up through one slot map per
    cache and counted per tier (:meth:`stats`).

    Tensors enter with :meth:`put_tensor` (kept in memory) or
    :meth:`put_mmap_tensor` (a raw file, never read whole). Caches are filled
    by :func:`pyg_fastload.caching.configure_caches` from a hotness
    policy. Works as the first element of a ``(FeatureStore, GraphStore)``
    tuple for PyG's ``NeighborLoader`` and for
    :class:`~pyg_fastload.FastNeighborLoader`, which reads it through the
    :class:`~pyg_fastload.storage.FeatureSource` protocol (:meth:`gather`,
    :meth:`announce`, :meth:`retire`, :meth:`stats`).

    Args:
        device (torch.device, optional): where the device cache lives and
            where gathered rows are returned (default: CPU; on CPU the device
            cache is a separate tensor, so hits and misses are still real).
    """
    def __init__(self, device: Optional[Union[str, torch.device]] = None):
        super().__init__()
        self.device = torch.device(device or 'cpu')
        self.window_size = 0
        self.read_ahead = 0
        self.min_reads = 0
        self.max_pending_bytes = 0
        self._pending_reads: Dict[Key, List[Tensor]] = {}
        self._read_depth: Optional[AdaptiveReadAhead] = None
        # Batches announced and retired; the storage seconds and bytes of
        # the batch being gathered and when the previous one started.
        self._announced = self._retired = 0
        self._batch_reads = [0.0, 0]
        self._batch_started: Optional[float] = None
        self._entries: Dict[Key, TierEntry] = {}
        # device_budget='auto': sized once a training step is done (its
        # transient memory measured), at the end of the next gather
        self._after_step: Optional[Callable[[int], None]] = None
        self._step_bytes: Optional[int] = None
        self._peak_reset = False
        self._staging = BufferPool(max_buffers=1)
        # announce() runs in the loader's sampling thread, retire() in its
        # feature-loading thread: both update the read-ahead counts (each
        # window-buffered cache guards its own state).
        self._window_lock = threading.Lock()

    def __getstate__(self) -> Dict[str, Any]:
        state = self.__dict__.copy()
        state.pop('_window_lock')
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._window_lock = threading.Lock()

    # Tensors #################################################################

    def put_mmap_tensor(self, path: str, dtype: torch.dtype,
                        shape: Sequence[int], attr_name: str,
                        group_name: Optional[str] = None,
                        offset: int = 0, storage: str = 'mmap',
                        in_flight: Union[int, str] = 'auto') -> None:
        r"""Registers a raw row-major file as the storage of an attribute,
        read as :obj:`storage` says: ``'mmap'`` (memory-mapped),
        ``'direct'`` (direct I/O, :obj:`in_flight` reads at once;
        :class:`DirectStorage`) or ``'gds'`` (kvikio reads into the batch's
        device; :class:`~pyg_fastload.storage.gpu_direct.GpuDirectStorage`).
        """
        if storage == 'gds' and self.device.type != 'cuda':
            raise ValueError(f"storage='gds' reads rows into GPU memory, but "
                             f"the feature store's device is {self.device}: "
                             f"use storage='direct' on CPU")
        if storage == 'mmap':
            tier = MmapStorage(path, dtype, shape, offset)
        elif storage in ('direct', 'gds'):
            reader = DirectStorage if storage == 'direct' else GpuDirectStorage
            tier = reader(path, dtype, shape, offset, in_flight=in_flight)
        else:
            raise ValueError(f"'storage' = {storage!r}: pass 'mmap', "
                             f"'direct' or 'gds'")
        self._entries[(group_name, attr_name)] = TierEntry(tier)

    def _put_tensor(self, tensor: Tensor, attr: TensorAttr) -> bool:
        key = _key(attr)
        if attr.index is None:
            self._entries[key] = TierEntry(MemoryStorage(tensor))
            return True
        entry = self._entries.get(key)
        if entry is None or not isinstance(entry.storage, MemoryStorage):
            return False
        index = torch.as_tensor(attr.index).long()
        entry.storage.tensor[index] = tensor
        for cache in entry.caches():  # keep cached copies consistent
            with holding(cache):
                slot = cache.lookup(index)
                held = slot >= 0
                cache.values[slot[held].to(cache.values.device)] = tensor[
                    held.to(tensor.device)].to(cache.values.device)
        return True

    def _get_tensor(self, attr: TensorAttr) -> Optional[Tensor]:
        entry = self._entries.get(_key(attr))
        if entry is None:
            return None
        if attr.index is None:
            return entry.storage.full()
        index = attr.index
        if isinstance(index, slice):
            index = torch.arange(entry.storage.shape[0])[index]
        return self.gather(attr.attr_name, torch.as_tensor(index),
                           group_name=attr.group_name)

    def _multi_get_tensor(self, attrs: List[TensorAttr]) -> List[Tensor]:
        return [self._get_tensor(attr) for attr in attrs]

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        return self._entries.pop(_key(attr), None) is not None

    def _get_tensor_size(self, attr: TensorAttr) -> Optional[Tuple[int,
                                                                   ...]]:
        entry = self._entries.get(_key(attr))
        return None if entry is None else entry.storage.shape

    def get_all_tensor_attrs(self) -> List[TensorAttr]:
        return [TensorAttr(group, name) for group, name in self._entries]

    def dtype_of(self, attr_name: str,
                 group_name: Optional[str] = None) -> torch.dtype:
        r"""The element type of an attribute."""
        return self._entries[(group_name, attr_name)].storage.dtype

    # The fast path ###########################################################

    def gather(self, attr_name: str, index: Tensor,
               group_name: Optional[str] = None,
               out: Optional[Tensor] = None,
               timings: Optional[Dict[str, float]] = None) -> Tensor:
        r"""Rows :obj:`index` of an attribute, each from the fastest tier
        holding it, written into :obj:`out` if given. Seconds spent per tier
        (``'device'``, ``'host'``, ``'storage'``; host-side time, as CUDA
        work is asynchronous) are added to :obj:`timings` if given."""
        entry = self._entries.get((group_name, attr_name))
        if entry is None:
            raise KeyError(f"no tensor '{attr_name}' (group {group_name!r}) "
                           f"in the feature store")
        storage = entry.storage
        if self._after_step is not None and not self._peak_reset:
            self._reset_peak()  # the first step's memory counts from here
        ids = index.reshape(-1).to(torch.long).cpu()
        if ids.numel() and (int(ids.min()) < 0
                            or int(ids.max()) >= storage.shape[0]):
            raise IndexError(f"'{attr_name}' has {storage.shape[0]} rows; "
                             f"asked for rows {int(ids.min())} to "
                             f"{int(ids.max())}")
        out_device = entry.device.values.device if entry.device else (
            torch.device('cpu'))
        if out is None:
            out = torch.empty((ids.numel(), *storage.shape[1:]),
                              dtype=storage.dtype, device=out_device)
        spent: Dict[str, float] = {}
        read_bytes = storage.counters.bytes
        if entry.caches():
            gather_tiers(entry, ids, out, spent, self._staging)
        else:
            started = time.perf_counter()
            storage.gather(ids, out)
            add_spent(spent, 'storage', started)
        if self._read_depth is not None and isinstance(storage, MmapStorage):
            self._batch_reads[0] += spent.get('storage', 0.0)
            self._batch_reads[1] += storage.counters.bytes - read_bytes
        if timings is not None:
            for tier, seconds in spent.items():
                timings[tier] = timings.get(tier, 0.0) + seconds
        if self._after_step is not None and self._step_bytes is not None:
            callback, self._after_step = self._after_step, None
            callback(self._step_bytes)
        return out

    def free_device_bytes(self) -> int:
        r"""Free memory where the device cache lives (CUDA: with the
        caching allocator's unused blocks, :func:`free_cuda_memory`)."""
        if self.device.type == 'cuda':
            return free_cuda_memory(self.device)
        return available_memory()

    # Caches (what they hold is decided by pyg_fastload.caching) ##########

    def cacheable(self, attrs: Optional[Sequence[str]] = None
                  ) -> Dict[Optional[str], Tuple[List[Key], int, int]]:
        r"""The attributes a cache would hold (default: every attribute with
        2 or more dimensions, i.e. feature matrices), per node type (group):
        their keys, the type's row count and its bytes per row added up."""
        if attrs is None:
            keys = [k for k, e in self._entries.items()
                    if len(e.storage.shape) >= 2]
        else:
            keys = []
            for name in attrs:
                matches = [k for k in self._entries if k[1] == name]
                if not matches:
                    raise KeyError(f"'attrs' names {name!r}, which the "
                                   f"feature store does not hold")
                keys.extend(matches)
        out: Dict[Optional[str], Tuple[List[Key], int, int]] = {}
        for key in keys:
            group = key[0]
            storage = self._entries[key].storage
            held, rows, row_bytes = out.get(group, ([], storage.shape[0], 0))
            out[group] = ([*held, key], rows, row_bytes + storage.row_bytes)
        return out

    def fill_caches(self, keys: Sequence[Key], host_ids: Tensor,
                    device_ids: Optional[Tensor] = None,
                    window_rows: int = 0, window_size: int = 0,
                    seed: int = 0) -> None:
        r"""Replaces the caches of :obj:`keys`: the host buffer holds rows
        :obj:`host_ids`; the device cache holds rows :obj:`device_ids`
        (static) or, with :obj:`window_rows`, is a window-buffered cache of
        that many rows over a look-ahead of :obj:`window_size` batches."""
        self.window_size = window_size
        for key in keys:
            entry = self._entries[key]
            entry.host = entry.device = None
            if host_ids.numel():
                entry.host = self._fill(entry, host_ids,
                                        torch.device('cpu'))
            if device_ids is not None and device_ids.numel():
                entry.device = self._fill(entry, device_ids, self.device)
            elif window_rows:
                storage = entry.storage
                entry.device = WindowBufferedCache(
                    storage.shape[0], window_rows, storage.shape[1:],
                    storage.dtype, self.device, seed)

    def cached_ids(self, attr_name: str,
                   group_name: Optional[str] = None) -> Tensor:
        r"""The rows of an attribute its static caches (host buffer,
        static device cache) hold, sorted; a window-buffered cache's rows
        change with every batch and are not listed."""
        entry = self._entries.get((group_name, attr_name))
        held = [c.node_ids.long() for c in ([] if entry is None
                                            else entry.caches())
                if isinstance(c, StaticCache)
                and not isinstance(c, WindowBufferedCache)]
        if not held:
            return torch.empty(0, dtype=torch.long)
        return torch.unique(torch.cat(held))

    def when_first_step_done(
            self, callback: Optional[Callable[[int], None]]) -> None:
        r"""Calls :obj:`callback` once with the memory a training step
        took beyond what stays allocated (bytes: activations, gradients,
        the optimizer's temporaries), at the end of the first
        :meth:`gather` after :meth:`first_step_done` (a device cache sized
        once the model's own memory use is known, PaGraph). The memory's
        high-water mark is reset at the next :meth:`gather` (the step's
        batch), so what ran before the training does not count."""
        self._after_step, self._step_bytes = callback, None
        self._peak_reset = False

    def _reset_peak(self) -> None:
        self._peak_reset = True
        if self.device.type == 'cuda':
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            reset_peak_rss()

    def first_step_done(self) -> None:
        r"""Tells the store its consumer finished a training step (a
        loader calls it when the second batch is asked for): measures the
        step's memory for :meth:`when_first_step_done`."""
        if self._after_step is None or self._step_bytes is not None:
            return
        if not self._peak_reset:  # no batch gathered: no step to measure
            self._reset_peak()
            self._step_bytes = 0
            return
        if self.device.type == 'cuda':
            self._step_bytes = int(
                torch.cuda.max_memory_allocated(self.device)
                - torch.cuda.memory_allocated(self.device))
        else:
            memory = process_memory()
            self._step_bytes = max(memory.get('peak', 0)
                                   - memory.get('rss', 0), 0)

    def _fill(self, entry: TierEntry, ids: Tensor,
              device: torch.device) -> StaticCache:
        ids = torch.unique(ids)  # sorted: read in file order, no staging
        storage = entry.storage
        values = torch.empty((ids.numel(), *storage.shape[1:]),
                             dtype=storage.dtype)
        if isinstance(storage, MmapStorage):
            storage.read_sorted(ids, values)
        else:
            storage.gather(ids, values)
        storage.counters.reset()
        if device.type == 'cuda':
            values = values.to(device)
        elif torch.cuda.is_available():
            values = values.pin_memory()
        return StaticCache(storage.shape[0], ids, values)

    def set_read_ahead(self, batches: int, min_reads: int = 4096,
                       max_pending_bytes: int = 2**28,
                       share: float = 0.95) -> None:
        r"""Storage reads of up to :obj:`batches` sampled batches merged
        (0: off); the loader samples and announces that far ahead. Direct
        reads get GIDS's accumulator
        (:class:`~pyg_fastload.storage.accumulator.StorageAccumulator`:
        a batch with too few reads for :obj:`share` of the measured peak
        reads the next batches' rows too, staged within
        :obj:`max_pending_bytes`). Memory-mapped storage gets one sorted,
        de-duplicated ``posix_fadvise(WILLNEED)`` of the rows the batches
        will miss once :obj:`min_reads` rows or :obj:`max_pending_bytes`
        bytes are pending, or the oldest pending batch is within
        :attr:`read_ahead_depth` batches (which follows the measured
        storage time, :class:`AdaptiveReadAhead`) of being gathered."""
        if not 0 <= batches <= MAX_LOOKAHEAD or min_reads < 1 or \
                max_pending_bytes < 1:
            raise ValueError(f"'batches={batches}' must lie in [0, "
                             f"{MAX_LOOKAHEAD}], "
                             f"'min_reads={min_reads}' >= 1 and "
                             f"'max_pending_bytes={max_pending_bytes}' >= 1")
        self.read_ahead = batches
        self.min_reads = min_reads
        self.max_pending_bytes = max_pending_bytes
        self._read_depth = (AdaptiveReadAhead(batches, max_pending_bytes)
                            if batches else None)
        self._batch_started = None
        for entry in self._entries.values():
            if isinstance(entry.storage, DirectStorage):
                entry.storage.accumulator = StorageAccumulator(
                    batches, max_pending_bytes, share) if batches else None

    @property
    def read_ahead_depth(self) -> int:
        r"""Batches ahead of being gathered at which a batch's storage
        reads are issued at the latest (0: read-ahead off)."""
        return self._read_depth.depth if self._read_depth else 0

    @property
    def lookahead_depth(self) -> int:
        r"""Batches the loader should sample ahead for this store."""
        return max(self.window_size, self.read_ahead)

    # Look-ahead protocol (called by the loader) ##############################

    def announce(self, batch: BatchIds) -> None:
        r"""A sampled batch needing the unique node ids :obj:`batch` (per
        node type for a heterogeneous batch) entered the loader's look-ahead
        window (batches are announced and retired in the same order)."""
        with self._window_lock:
            self._announced += 1
        for key, entry in self._entries.items():
            ids = of_group(batch, key[0])
            if isinstance(entry.device, WindowBufferedCache):
                entry.device.announce(ids)
            accumulator = getattr(entry.storage, 'accumulator', None)
            if accumulator is not None:
                rows = static_misses(entry, ids).sort()[0]
                accumulator.announce(ids, rows,
                                     entry.storage.count_reads(rows),
                                     ids.numel() - rows.numel())
            elif self.read_ahead and isinstance(entry.storage, MmapStorage):
                self._accumulate(key, entry, ids)

    def _accumulate(self, key: Key, entry: TierEntry, ids: Tensor) -> None:
        ids = static_misses(entry, ids)
        with self._window_lock:
            self._pending_reads.setdefault(key, []).append(ids)
            self._flush_due_reads(key, entry)

    def _flush_due_reads(self, key: Key, entry: TierEntry) -> None:
        r"""Issues the pending reads of :obj:`key` if enough rows or bytes
        are pending or the oldest pending batch is due (lock held)."""
        pending = self._pending_reads.get(key)
        if not pending:
            return
        rows = sum(p.numel() for p in pending)
        # Batches to be gathered before the oldest pending one:
        before = self._announced - self._retired - len(pending)
        if (rows >= self.min_reads
                or rows * entry.storage.row_bytes >= self.max_pending_bytes
                or before < self.read_ahead_depth):
            entry.storage.prefetch(torch.cat(pending))
            pending.clear()

    def retire(self, batch: BatchIds) -> None:
        r"""The batch announced with the same ids is being fetched."""
        for (group, _), entry in self._entries.items():
            ids = of_group(batch, group)
            if isinstance(entry.device, WindowBufferedCache):
                entry.device.retire(ids)
            accumulator = getattr(entry.storage, 'accumulator', None)
            if accumulator is not None:
                accumulator.retire(ids)
        with self._window_lock:
            self._retired += 1
            if self._read_depth is None:
                return
            now = time.perf_counter()
            if self._batch_started is not None:
                self._read_depth.observe(self._batch_reads[0],
                                         now - self._batch_started,
                                         self._batch_reads[1])
            self._batch_started, self._batch_reads = now, [0.0, 0]
            for key, entry in self._entries.items():
                self._flush_due_reads(key, entry)

    # Counters ################################################################

    def accumulator_stats(self) -> Dict[str, Dict[str, float]]:
        r"""Per direct-read attribute with an accumulator, its
        :meth:`~pyg_fastload.storage.accumulator.StorageAccumulator.stats`.
        """
        out: Dict[str, Dict[str, float]] = {}
        for (group, name), entry in self._entries.items():
            accumulator = getattr(entry.storage, 'accumulator', None)
            if accumulator is not None:
                label = name if group is None else f'{group}.{name}'
                out[label] = accumulator.stats()
        return out

    def stats(self, attr_name: Optional[str] = None
              ) -> Dict[str, Dict[str, Dict[str, float]]]:
        r"""Per attribute and tier: requests, hits, bytes, pages, hit ratio
        (of :obj:`attr_name` only, if given)."""
        out: Dict[str, Dict[str, Dict[str, float]]] = {}
        for (group, name), entry in self._entries.items():
            if attr_name is not None and name != attr_name:
                continue
            label = name if group is None else f'{group}.{name}'
            tiers: Dict[str, TierCounters] = {}
            if entry.device is not None:
                tiers['device'] = entry.device.counters
            if entry.host is not None:
                tiers['host'] = entry.host.counters
            tiers['storage'] = entry.storage.counters
            out[label] = {tier: c.as_dict() for tier, c in tiers.items()}
        return out

    def places(self) -> Dict[str, Dict[str, str]]:
        r"""Per attribute and tier (the keys of :meth:`stats`): where the
        tier's rows live or come from, in words (``'CPU memory'``,
        ``'GPU memory, cuda:0'``, ``'in memory'``, ``'file,
        memory-mapped'``, ``'file, direct reads'``)."""
        out: Dict[str, Dict[str, str]] = {}
        for (group, name), entry in self._entries.items():
            label = name if group is None else f'{group}.{name}'
            tiers = (('device', entry.device), ('host', entry.host),
                     ('storage', entry.storage))
            out[label] = {tier: held.place for tier, held in tiers
                          if held is not None}
        return out

    def evict_page_cache(self) -> None:
        r"""Drops the page cache of every memory-mapped tensor (cold-start
        measurements)."""
        for entry in self._entries.values():
            if isinstance(entry.storage, MmapStorage):
                entry.storage.evict_page_cache()

    def reset_counters(self) -> None:
        for entry in self._entries.values():
            for tier in (*entry.caches(), entry.storage):
                tier.counters.reset()
            if getattr(entry.storage, 'accumulator', None) is not None:
                entry.storage.accumulator.reset_counts()

    def __repr__(self) -> str:
        parts = []
        for (group, name), entry in self._entries.items():
            kind = type(entry.storage).__name__
            tiers = [f'{t}={c.capacity}' for t, c in (('device', entry.device),
                                                     ('host', entry.host))
                     if c is not None]
            parts.append(f"{name}{list(entry.storage.shape)}:{kind}"
                         + (f"({', '.join(tiers)})" if tiers else ''))
        return f"{self.__class__.__name__}({', '.join(parts)})"
