r"""pyg-fastload: fast sampling-based mini-batch loading for PyTorch
Geometric."""
from .graph import CSCTopology
from .loader import FastNeighborLoader
from .sampling import FastNeighborSampler
from .storage import CSCGraphStore, TieredFeatureStore, open_dataset

__version__ = '0.1.0'

__all__ = [
    'FastNeighborLoader',
    'FastNeighborSampler',
    'CSCTopology',
    'TieredFeatureStore',
    'CSCGraphStore',
    'open_dataset',
    '__version__',
]
