r"""Storage tiers: a PyG ``FeatureStore`` with device cache, host buffer and
in-memory or on-disk storage (memory-mapped, read directly, or read by kvikio
into GPU memory), a CSC ``GraphStore``, and the :class:`FeatureSource`
protocol the loader reads features through."""
from .counters import TierCounters, cached_and_stored
from .direct import DirectStorage
from .gpu_direct import GpuDirectStorage
from .feature_store import TieredFeatureStore
from .graph_store import CSCGraphStore
from .io_stats import device_read_bytes, process_memory, process_read_bytes
from .protocol import FeatureSource
from .read_ahead import AdaptiveReadAhead
from .tiers import MemoryStorage, MmapStorage, StaticCache, WindowBufferedCache

__all__ = [
    'FeatureSource',
    'TieredFeatureStore',
    'CSCGraphStore',
    'TierCounters',
    'cached_and_stored',
    'AdaptiveReadAhead',
    'MemoryStorage',
    'MmapStorage',
    'DirectStorage',
    'GpuDirectStorage',
    'process_read_bytes',
    'device_read_bytes',
    'process_memory',
    'StaticCache',
    'WindowBufferedCache',
]
