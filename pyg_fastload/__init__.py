r"""pyg-fastload: fast sampling-based mini-batch loading for PyTorch
Geometric. The names below import on first use (PEP 562), so the
``pyg-fastload`` command starts without torch."""
from .lazy import lazy_exports

#: The package's version: the one place it is written (pyproject.toml reads
#: it, and CHANGELOG.md's latest release names it).
__version__ = '0.1.0'

#: Each exported name's module.
_EXPORTS = {
    'FastNeighborLoader': '.loader',
    'FastLinkNeighborLoader': '.loader',
    'FastNeighborSampler': '.sampling',
    'CSCTopology': '.graph',
    'TieredFeatureStore': '.storage',
    'CSCGraphStore': '.storage',
    'open_dataset': '.caching',
    'loader_scores': '.caching',
    'stores_from_data': '.caching',
    'FeatureCache': '.config',
    'PipelineSettings': '.config',
    'FeatureSource': '.storage',
    'FastLoadError': '.errors',
    'layerwise_inference': '.inference',
}

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
    'layerwise_inference',
    '__version__',
]


#: Subpackages, reachable as attributes after ``import pyg_fastload`` too.
_SUBPACKAGES = ('bench', 'caching', 'config', 'datasets', 'distributed',
                'errors', 'graph', 'inference', 'io', 'loader', 'modes',
                'partition', 'sampling', 'storage')


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, _SUBPACKAGES)
