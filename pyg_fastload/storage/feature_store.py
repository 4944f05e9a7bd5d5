r"""``TieredFeatureStore``: a PyG ``FeatureStore`` whose rows come from a
chain of tiers per attribute, fastest first: device cache, host buffer,
then storage (in memory, memory-mapped, or read directly)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import (ClassVar, Dict, List, Optional, Protocol, Sequence,
                    Tuple, Union)

import torch
from torch import Tensor
from torch_geometric.data import FeatureStore, TensorAttr

from ..config import available_memory, free_cuda_memory
from ..placement import Placement
from .buffer_pool import BufferPool
from .cache_tier import StaticCache
from .kinds import STORAGE_KINDS, storage_kind
from .mapped_rows import MappedRows
from .memory_storage import MemoryStorage
from .protocol import BatchIds, of_group
from .read_ahead import ReadAheadWindow, check_read_ahead
from .step_memory import DeviceCacheSizing, FirstStepSizing
from .tier import Tier
from .tier_chain import TierChain
from .window_cache import WindowBufferedCache

__all__ = ['TieredFeatureStore', 'attr_label', 'CacheLayer', 'StaticLayer',
           'HostBuffer', 'DeviceCache', 'WindowCache']

Key = Tuple[Optional[str], str]

#: Bytes of rows a cache is filled with at a time: all that filling it
#: takes beyond the cache itself.
FILL_CHUNK_BYTES = 64 * 2**20


def pinned_bytes(nbytes: int) -> int:
    r"""Host memory a pinned block of :obj:`nbytes` takes: torch's caching
    host allocator rounds every block up to a power of two
    (``CachingHostAllocator.h``), so a 5 GiB host buffer pins 8 GiB."""
    return 1 << (nbytes - 1).bit_length() if nbytes > 1 else nbytes


def empty_host(shape: Sequence[int], dtype: torch.dtype,
               pinned: bool) -> Tensor:
    r"""An uninitialised tensor in host memory, pinned (page-locked, from
    the caching host allocator) or not."""
    return torch.empty(shape, dtype=dtype, pin_memory=pinned)


def _key(attr: TensorAttr) -> Key:
    return (attr.group_name, attr.attr_name)


def attr_label(key: Key) -> str:
    r"""The name :meth:`TieredFeatureStore.stats` reports an attribute
    ``(group, name)`` under: ``name``, or ``group.name`` in a group."""
    group, name = key
    return name if group is None else f'{group}.{name}'


class CacheLayer(Protocol):
    r"""One cache put in front of an attribute's tiers by
    :meth:`TieredFeatureStore.fill_caches` (GraphBolt's wrapper style: each
    layer wraps the tiers below it). A new kind of cache is a class with
    :meth:`wrap` (and :attr:`lookahead`)."""
    #: Batches the loader must sample ahead for this layer (0: none).
    lookahead: int

    def wrap(self, below: Tier, base: Tier, device: torch.device,
             pinned: bool) -> Tier:
        r"""The tier in front of :obj:`below` (:obj:`below` itself where
        this layer holds nothing), filled from the chain's :obj:`base`; on
        the store's :obj:`device`, host memory :obj:`pinned` where batches
        go to a GPU."""


@dataclass(frozen=True, eq=False)
class StaticLayer(CacheLayer):
    r"""A cache layer holding rows :obj:`ids` as a :class:`StaticCache`,
    filled once; a subclass says where (:attr:`tier`, :attr:`on_host`).

    Args:
        ids (Tensor): the rows it holds (none: it adds no tier).
        lookahead (int): batches the loader samples ahead for it.
    """
    ids: Tensor
    lookahead: int = 0
    #: The tier's name in :meth:`TieredFeatureStore.stats`.
    tier: ClassVar[str]
    #: In host memory (pinned where batches go to a GPU), else on the
    #: store's device.
    on_host: ClassVar[bool]

    def wrap(self, below: Tier, base: Tier, device: torch.device,
             pinned: bool) -> Tier:
        if not self.ids.numel():
            return below
        where = torch.device('cpu') if self.on_host else device
        return fill_static(base, below, self.ids, where, self.tier,
                           pinned and self.on_host)


class HostBuffer(StaticLayer):
    r"""A host buffer holding rows :obj:`ids` (a :class:`StaticCache` in
    host memory, pinned where batches go to a GPU; the GIDS host buffer).

    Example:
        >>> import torch
        >>> from pyg_fastload.storage import TieredFeatureStore
        >>> from pyg_fastload.storage.feature_store import (DeviceCache,
        ...                                                 HostBuffer)
        >>> store = TieredFeatureStore()
        >>> store.put_tensor(torch.arange(20.).view(10, 2), group_name=None,
        ...                  attr_name='x', index=None)
        True
        >>> store.fill_caches([(None, 'x')], [HostBuffer(torch.arange(4)),
        ...                                   DeviceCache(torch.arange(2))])
        >>> list(store.tiers('x'))  # fastest first
        ['device', 'host', 'storage']
    """
    tier = 'host'
    on_host = True


class DeviceCache(StaticLayer):
    r"""A device cache holding rows :obj:`ids` on the store's device (a
    :class:`StaticCache`: the PaGraph/DSP GPU cache)."""
    tier = 'device'
    on_host = False


@dataclass(frozen=True)
class WindowCache:
    r"""A device cache of :obj:`rows` rows filled by GIDS's window
    buffering over a look-ahead of :obj:`lookahead` batches
    (:class:`WindowBufferedCache`; :obj:`seed` drives its own random
    choices).

    Attributes:
        rows (int): rows the cache holds (0: no cache).
        lookahead (int): batches of look-ahead the window covers.
        seed (int): seed of the cache's own random choices.
    """
    rows: int
    lookahead: int
    seed: int = 0

    def wrap(self, below: Tier, base: Tier, device: torch.device,
             pinned: bool) -> Tier:
        if not self.rows:
            return below
        return WindowBufferedCache(below, self.rows, device, self.seed)


def fill_static(base: Tier, fallback: Tier, ids: Tensor,
                device: torch.device, name: str,
                pinned: bool = False) -> StaticCache:
    r"""A static cache of rows :obj:`ids` in front of :obj:`fallback`,
    read from the chain's :obj:`base` (not counted), on :obj:`device`
    (host memory: :obj:`pinned` or not), filled in place
    :data:`FILL_CHUNK_BYTES` of rows at a time (to a GPU through a host
    chunk of that size)."""
    ids = torch.unique(ids)  # sorted: read in file order, no staging
    shape = (ids.numel(), *base.shape[1:])
    step = max(1, FILL_CHUNK_BYTES // max(base.row_bytes, 1))
    if device.type == 'cpu':
        values = empty_host(shape, base.dtype, pinned)
        chunk = None
    else:
        values = torch.empty(shape, dtype=base.dtype, device=device)
        chunk = empty_host((min(step, ids.numel()), *shape[1:]),
                           base.dtype, False)
    for start in range(0, ids.numel(), step):
        part = ids[start:start + step]
        into = values[start:start + part.numel()]
        if chunk is None:
            base.gather(part, into)
        else:
            base.gather(part, chunk[:part.numel()])
            into.copy_(chunk[:part.numel()])
    for link in base.links():
        link.reset_counters()
    return StaticCache(fallback, ids, values, name)


class TieredFeatureStore(FeatureStore):
    r"""Node attributes served through one chain of tiers per attribute
    (:class:`~pyg_fastload.storage.tier.Tier`): a device cache wrapping a
    host buffer wrapping the storage, each link serving the rows it holds
    and asking the next for the others, each counted on its own
    (:meth:`stats`).

    Tensors enter with :meth:`put_tensor` (kept in memory),
    :meth:`put_mmap_tensor` (a raw file, never read whole) or
    :meth:`put_tier` (any chain ending in a storage). Caches are put in
    front by :func:`pyg_fastload.caching.configure_caches` from a hotness
    policy (:meth:`fill_caches`). Works as the first element of a
    ``(FeatureStore, GraphStore)`` tuple for PyG's ``NeighborLoader`` and for
    :class:`~pyg_fastload.FastNeighborLoader`, which reads it through the
    :class:`~pyg_fastload.storage.FeatureSource` protocol (:meth:`gather`,
    :meth:`announce`, :meth:`retire`, :meth:`stats`,
    :meth:`first_step_done`).

    With ``device_budget='auto'`` the device caches are sized once the
    consumer's first training step is done
    (:class:`~pyg_fastload.storage.step_memory.FirstStepSizing` lists the
    steps): the planner hands the store its policy
    (:meth:`size_after_first_step`), the loader calls
    :meth:`first_step_done` when its consumer asks for the second batch,
    and the next :meth:`gather` hands the measured memory to the policy.

    Args:
        device (torch.device, optional): where the device cache lives and
            where gathered rows are returned (default: CPU; on CPU the device
            cache is a separate tensor, so hits and misses are still real).

    Example:
        >>> import torch
        >>> from pyg_fastload import TieredFeatureStore
        >>> store = TieredFeatureStore()
        >>> store.put_tensor(torch.arange(12.).view(6, 2), group_name=None,
        ...                  attr_name='x', index=None)  # PyG's API
        True
        >>> store.get_tensor(group_name=None, attr_name='x',
        ...                  index=torch.tensor([4, 1]))
        tensor([[8., 9.],
                [2., 3.]])
        >>> list(store.tiers('x'))
        ['storage']
    """
    def __init__(self, device: Optional[Union[str, torch.device]] = None):
        super().__init__()
        self.device = torch.device(device or 'cpu')
        self.window_size = 0
        self.read_ahead = 0
        self._read_ahead: Optional[ReadAheadWindow] = None
        self._entries: Dict[Key, TierChain] = {}
        self._sizing: Optional[FirstStepSizing] = None
        self._staging = BufferPool(max_buffers=1)

    # Tensors #################################################################

    def put_tier(self, tier: Tier, attr_name: str,
                 group_name: Optional[str] = None) -> None:
        r"""Registers :obj:`tier` (a storage, or links around one) as the
        tiers of an attribute; caches go in front of it."""
        chain = TierChain(tier)
        chain.storage.set_read_ahead(self._read_ahead)
        self._entries[(group_name, attr_name)] = chain

    def put_mmap_tensor(self, path: str, dtype: torch.dtype,
                        shape: Sequence[int], attr_name: str,
                        group_name: Optional[str] = None,
                        offset: int = 0, storage: str = 'mmap',
                        in_flight: Union[int, str] = 'auto',
                        rows: Optional[Tensor] = None) -> None:
        r"""Registers a raw row-major file as the storage of an attribute,
        read as :obj:`storage` says, a name of
        :data:`~pyg_fastload.storage.kinds.STORAGE_KINDS`: ``'mmap'``
        (memory-mapped), ``'direct'`` (direct I/O, :obj:`in_flight` reads
        at once; :class:`DirectStorage`) or ``'gds'`` (kvikio reads into
        the batch's device;
        :class:`~pyg_fastload.storage.gpu_direct.GpuDirectStorage`).
        With :obj:`rows` (``int64``), the attribute's row ``i`` is the
        file's row ``rows[i]`` (:class:`~pyg_fastload.storage.mapped_rows.
        MappedRows`).
        """
        kind = storage_kind(storage)
        if kind.needs_cuda and self.device.type != 'cuda':
            host = [name for name, other in STORAGE_KINDS.items()
                    if not other.needs_cuda]
            raise ValueError(f"storage={storage!r} reads rows into GPU "
                             f"memory, but the feature store's device is "
                             f"{self.device}: use storage="
                             f"{' or '.join(map(repr, host))} on CPU")
        tier = kind.open(path, dtype, shape, offset, in_flight)
        if rows is not None:
            tier = MappedRows(tier, rows)
        self.put_tier(tier, attr_name, group_name)

    def _put_tensor(self, tensor: Tensor, attr: TensorAttr) -> bool:
        if attr.index is None:
            self.put_tier(MemoryStorage(tensor), attr.attr_name,
                          attr.group_name)
            return True
        chain = self._entries.get(_key(attr))
        return chain is not None and chain.top.write(
            torch.as_tensor(attr.index).long(), tensor)

    def _get_tensor(self, attr: TensorAttr) -> Optional[Tensor]:
        chain = self._entries.get(_key(attr))
        if chain is None:
            return None
        if attr.index is None:
            return chain.storage.full()
        index = attr.index
        if isinstance(index, slice):
            index = torch.arange(chain.storage.shape[0])[index]
        return self.gather(attr.attr_name, torch.as_tensor(index),
                           group_name=attr.group_name)

    def _multi_get_tensor(self, attrs: List[TensorAttr]) -> List[Tensor]:
        return [self._get_tensor(attr) for attr in attrs]

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        return self._entries.pop(_key(attr), None) is not None

    def _get_tensor_size(self, attr: TensorAttr) -> Optional[Tuple[int,
                                                                   ...]]:
        chain = self._entries.get(_key(attr))
        return None if chain is None else chain.storage.shape

    def get_all_tensor_attrs(self) -> List[TensorAttr]:
        return [TensorAttr(group, name) for group, name in self._entries]

    def dtype_of(self, attr_name: str,
                 group_name: Optional[str] = None) -> torch.dtype:
        r"""The element type of an attribute."""
        return self._entries[(group_name, attr_name)].storage.dtype

    def tiers(self, attr_name: str,
              group_name: Optional[str] = None) -> Dict[str, Tier]:
        r"""The tiers of an attribute by their name in :meth:`stats`,
        fastest first."""
        return {link.name: link
                for link in self._entries[(group_name, attr_name)].links()}

    # The fast path ###########################################################

    def gather(self, attr_name: str, index: Tensor,
               group_name: Optional[str] = None,
               out: Optional[Tensor] = None,
               timings: Optional[Dict[str, float]] = None) -> Tensor:
        r"""Rows :obj:`index` of an attribute, each from the fastest tier
        holding it, written into :obj:`out` if given. Seconds spent per tier
        (``'device'``, ``'host'``, ``'storage'``; host-side time, as CUDA
        work is asynchronous) are added to :obj:`timings` if given."""
        chain = self._entries.get((group_name, attr_name))
        if chain is None:
            raise KeyError(f"no tensor '{attr_name}' (group {group_name!r}) "
                           f"in the feature store")
        if self._sizing is not None:
            self._sizing.batch_started()
        top = chain.top
        shape = chain.storage.shape
        ids = index.reshape(-1).to(torch.long).cpu()
        if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= shape[0]):
            raise IndexError(f"'{attr_name}' has {shape[0]} rows; asked for "
                             f"rows {int(ids.min())} to {int(ids.max())}")
        if out is None:
            out = torch.empty((ids.numel(), *shape[1:]),
                              dtype=chain.storage.dtype, device=top.out_device)
        spent: Dict[str, float] = {}
        top.gather(ids, out, spent, self._staging)
        if timings is not None:
            for tier, seconds in spent.items():
                timings[tier] = timings.get(tier, 0.0) + seconds
        self._size_if_due()
        return out

    def free_device_bytes(self) -> int:
        r"""Free memory where the device cache lives (CUDA: with the
        caching allocator's unused blocks, :func:`free_cuda_memory`)."""
        if self.device.type == 'cuda':
            return free_cuda_memory(self.device)
        return available_memory()

    @property
    def pinned(self) -> bool:
        r"""Whether host buffers are pinned: batches go to a GPU."""
        return Placement(batches=self.device).pinned

    def host_buffer_bytes(self, keys: Sequence[Key], rows: int) -> int:
        r"""Host memory a host buffer of :obj:`rows` rows of each attribute
        :obj:`keys` takes: one block per attribute, each rounded up as
        pinning rounds it (:func:`pinned_bytes`) where :attr:`pinned`."""
        sizes = [rows * self._entries[key].storage.row_bytes for key in keys]
        return sum(map(pinned_bytes, sizes)) if self.pinned else sum(sizes)

    # Caches (what they hold is decided by pyg_fastload.caching) ##########

    def cacheable(self, attrs: Optional[Sequence[str]] = None
                  ) -> Dict[Optional[str], Tuple[List[Key], int, int]]:
        r"""The attributes a cache would hold (default: every attribute with
        2 or more dimensions, i.e. feature matrices), per node type (group):
        their keys, the type's row count and its bytes per row added up."""
        if attrs is None:
            keys = [k for k, c in self._entries.items()
                    if len(c.storage.shape) >= 2]
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

    def fill_caches(self, keys: Sequence[Key],
                    layers: Sequence[CacheLayer]) -> None:
        r"""Composes the chains of :obj:`keys` anew: each of :obj:`layers`
        wraps the tiers below it, the first one the attribute's storage
        (``[HostBuffer(host_ids), DeviceCache(device_ids)]``: a device
        cache in front of a host buffer in front of the storage; a layer
        holding no rows adds no tier). The old caches go before the new
        ones fill; the loader samples as far ahead as the layers need
        (:attr:`lookahead_depth`)."""
        self.window_size = max((layer.lookahead for layer in layers),
                               default=0)
        for key in keys:
            chain = self._entries[key]
            chain.top = top = chain.base
            for layer in layers:
                top = layer.wrap(top, chain.base, self.device, self.pinned)
            chain.top = top

    def cached_ids(self, attr_name: str,
                   group_name: Optional[str] = None) -> Tensor:
        r"""The rows of an attribute its static caches (host buffer,
        static device cache) hold, sorted; a window-buffered cache's rows
        change with every batch and are not listed."""
        chain = self._entries.get((group_name, attr_name))
        held = [] if chain is None else [
            ids.long() for ids in (link.held_ids() for link in chain.links())
            if ids.numel()]
        if not held:
            return torch.empty(0, dtype=torch.long)
        return torch.unique(torch.cat(held))

    # device_budget='auto': sizing after the first step #######################

    def size_after_first_step(self,
                              policy: Optional[DeviceCacheSizing]) -> None:
        r"""Hands :obj:`policy` the memory the consumer's first training
        step takes beyond what stays allocated, once, at the end of the
        first :meth:`gather` after :meth:`first_step_done` (a device cache
        sized once the model's own memory use is known, PaGraph);
        :obj:`None` forgets a policy not yet applied."""
        self._sizing = None if policy is None else FirstStepSizing(
            policy, self.device)

    def first_step_done(self) -> None:
        r"""Tells the store its consumer finished a training step (a
        loader calls it when the second batch is asked for): measures the
        step's memory for the policy of :meth:`size_after_first_step`."""
        if self._sizing is not None:
            self._sizing.step_done()

    def _size_if_due(self) -> None:
        sizing = self._sizing
        if sizing is not None and sizing.step_bytes is not None:
            self._sizing = None
            sizing.policy.size_device_caches(self, sizing.step_bytes)

    # Read-ahead ##############################################################

    def set_read_ahead(self, batches: int, min_reads: int = 4096,
                       max_pending_bytes: int = 2**28,
                       share: float = 0.95) -> None:
        r"""Storage reads of up to :obj:`batches` sampled batches merged
        (0: off); the loader samples and announces that far ahead. Direct
        reads get GIDS's accumulator
        (:class:`~pyg_fastload.storage.read_accumulator.StorageAccumulator`:
        a batch with too few reads for :obj:`share` of the measured peak
        reads the next batches' rows too, staged within
        :obj:`max_pending_bytes`). Memory-mapped storage gets one sorted,
        de-duplicated ``posix_fadvise(WILLNEED)`` of the rows the batches
        will miss once :obj:`min_reads` rows or :obj:`max_pending_bytes`
        bytes are pending, or the oldest pending batch is within
        :attr:`read_ahead_depth` batches (which follows the measured
        storage time, :class:`AdaptiveReadAhead`) of being gathered."""
        check_read_ahead(batches, min_reads, max_pending_bytes)
        self.read_ahead = batches
        self._read_ahead = ReadAheadWindow(
            batches, min_reads, max_pending_bytes, share) if batches else None
        for chain in self._entries.values():
            chain.storage.set_read_ahead(self._read_ahead)

    @property
    def read_ahead_depth(self) -> int:
        r"""Batches ahead of being gathered at which a batch's storage
        reads are issued at the latest (0: read-ahead off)."""
        return self._read_ahead.depth if self._read_ahead else 0

    @property
    def lookahead_depth(self) -> int:
        r"""Batches the loader should sample ahead for this store."""
        return max(self.window_size, self.read_ahead)

    # Look-ahead protocol (called by the loader) ##############################

    def announce(self, batch: BatchIds) -> None:
        r"""A sampled batch needing the unique node ids :obj:`batch` (per
        node type for a heterogeneous batch) entered the loader's look-ahead
        window (batches are announced and retired in the same order)."""
        if self._read_ahead is not None:
            self._read_ahead.batch_announced()
        for (group, _), chain in self._entries.items():
            chain.top.announce(of_group(batch, group))

    def retire(self, batch: BatchIds) -> None:
        r"""The batch announced with the same ids is being fetched."""
        if self._read_ahead is not None:
            self._read_ahead.batch_retired()
        for (group, _), chain in self._entries.items():
            chain.top.retire(of_group(batch, group))

    # Counters ################################################################

    def accumulator_stats(self) -> Dict[str, Dict[str, float]]:
        r"""Per direct-read attribute with an accumulator, the
        ``stats()`` of its
        :class:`~pyg_fastload.storage.read_accumulator.StorageAccumulator`.
        """
        out: Dict[str, Dict[str, float]] = {}
        for key, chain in self._entries.items():
            stats = chain.storage.read_ahead_stats()
            if stats is not None:
                out[attr_label(key)] = stats
        return out

    def stats(self, attr_name: Optional[str] = None
              ) -> Dict[str, Dict[str, Dict[str, float]]]:
        r"""Per attribute and tier: requests, hits, bytes, pages, hit ratio
        (of :obj:`attr_name` only, if given)."""
        return {attr_label(key): chain.stats()
                for key, chain in self._entries.items()
                if attr_name is None or key[1] == attr_name}

    def places(self) -> Dict[str, Dict[str, str]]:
        r"""Per attribute and tier (the keys of :meth:`stats`): where the
        tier's rows live or come from, in words (``'CPU memory'``,
        ``'GPU memory, cuda:0'``, ``'in memory'``, ``'file,
        memory-mapped'``, ``'file, direct reads'``)."""
        return {attr_label(key): chain.places()
                for key, chain in self._entries.items()}

    def evict_page_cache(self) -> None:
        r"""Drops the page cache of every file-backed tensor (cold-start
        measurements)."""
        for chain in self._entries.values():
            chain.storage.evict_page_cache()

    def reset_counters(self) -> None:
        for chain in self._entries.values():
            for link in chain.links():
                link.reset_counters()

    def __repr__(self) -> str:
        parts = []
        for (_, name), chain in self._entries.items():
            kind = type(chain.storage).__name__
            tiers = [f'{c.name}={c.capacity}' for c in chain.caches()]
            parts.append(f"{name}{list(chain.storage.shape)}:{kind}"
                         + (f"({', '.join(tiers)})" if tiers else ''))
        return f"{self.__class__.__name__}({', '.join(parts)})"
