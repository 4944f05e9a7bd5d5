r"""pyg-fastload: fast sampling-based mini-batch loading for PyTorch
Geometric."""
from .loader import FastNeighborLoader
from .sampling import FastNeighborSampler
from .topology import CSCTopology

__version__ = '0.1.0'

__all__ = [
    'FastNeighborLoader',
    'FastNeighborSampler',
    'CSCTopology',
    '__version__',
]
