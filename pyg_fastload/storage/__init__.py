r"""Storage tiers: a PyG ``FeatureStore`` with device cache, host buffer and
in-memory or on-disk storage, hotness policies, and a CSC ``GraphStore``."""

from .counters import TierCounters
from .feature_store import TieredFeatureStore
from .graph_store import CSCGraphStore
from .hotness import (
    POLICIES,
    hit_ratio,
    hot_order,
    hotness_scores,
    out_degree_scores,
    presample_scores,
    reverse_pagerank_scores,
)
from .open import open_dataset, stores_from_data
from .tiers import MemoryStorage, MmapStorage, StaticCache, WindowBufferedCache

__all__ = [
    'TieredFeatureStore',
    'CSCGraphStore',
    'open_dataset',
    'stores_from_data',
    'POLICIES',
    'hotness_scores',
    'hot_order',
    'hit_ratio',
    'out_degree_scores',
    'reverse_pagerank_scores',
    'presample_scores',
    'TierCounters',
    'MemoryStorage',
    'MmapStorage',
    'StaticCache',
    'WindowBufferedCache',
]
