r"""Storage tiers: a PyG ``FeatureStore`` whose rows come through one chain
of tiers per attribute (a device cache around a host buffer around the
storage: in memory, memory-mapped, read directly, or read by kvikio into GPU
memory), a CSC ``GraphStore``, and the :class:`FeatureSource` protocol the
loader reads features through."""
from .cache_tier import CacheTier, StaticCache
from .direct import DirectStorage
from .feature_store import (CacheLayer, DeviceCache, HostBuffer,
                            TieredFeatureStore, WindowCache)
from .gpu_direct import GpuDirectStorage
from .graph_store import CSCGraphStore
from .kinds import STORAGE_KINDS, StorageKind, storage_kind
from .mapped_rows import MappedRows
from .io_stats import (MemoryWatch, device_read_bytes, process_memory,
                       process_read_bytes)
from .memory_storage import MemoryStorage
from .mmap_storage import MmapStorage
from .protocol import FeatureSource
from .read_ahead import AdaptiveReadAhead
from .tier import Read, StorageTier, Tier
from .tier_counters import TierCounters, cached_and_stored
from .window_cache import WindowBufferedCache

__all__ = [
    'FeatureSource',
    'TieredFeatureStore',
    'CacheLayer',
    'HostBuffer',
    'DeviceCache',
    'WindowCache',
    'CSCGraphStore',
    'Tier',
    'StorageTier',
    'CacheTier',
    'Read',
    'TierCounters',
    'cached_and_stored',
    'AdaptiveReadAhead',
    'MemoryStorage',
    'MmapStorage',
    'DirectStorage',
    'GpuDirectStorage',
    'STORAGE_KINDS',
    'StorageKind',
    'storage_kind',
    'MappedRows',
    'process_read_bytes',
    'device_read_bytes',
    'process_memory',
    'MemoryWatch',
    'StaticCache',
    'WindowBufferedCache',
]
