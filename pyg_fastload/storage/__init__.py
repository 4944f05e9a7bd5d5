r"""Storage tiers: a PyG ``FeatureStore`` with device cache, host buffer and
in-memory or on-disk storage, hotness policies, and a CSC ``GraphStore``."""
from .budget import budget_rows
from .counters import TierCounters
from .feature_store import TieredFeatureStore
from .graph_store import CSCGraphStore
from .tiers import MemoryStorage, MmapStorage, StaticCache, WindowBufferedCache

__all__ = [
    'TieredFeatureStore',
    'CSCGraphStore',
    'TierCounters',
    'MemoryStorage',
    'MmapStorage',
    'StaticCache',
    'WindowBufferedCache',
    'budget_rows',
]
