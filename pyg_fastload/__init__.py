r"""pyg-fastload: fast sampling-based mini-batch loading for PyTorch
Geometric."""
from .caching import loader_scores, open_dataset, stores_from_data
from .config import FeatureCache, PipelineSettings
from .errors import FastLoadError
from .graph import CSCTopology
from .loader import FastLinkNeighborLoader, FastNeighborLoader
from .sampling import FastNeighborSampler
from .storage import CSCGraphStore, FeatureSource, TieredFeatureStore

__version__ = '0.1.0'

__all__ = [
    'FastNeighborLoader',
    'FastLinkNeighborLoader',
    'FastNeighborSampler',
    'CSCTopology',
    'TieredFeatureStore',
    'CSCGraphStore',
    'open_dataset',
    'loader_scores',
    'stores_from_data',
    'FeatureCache',
    'PipelineSettings',
    'FeatureSource',
    'FastLoadError',
    '__version__',
]
