r"""Datasets for testing and benchmarking the loaders."""
from .synthetic import (
    PRESETS,
    SyntheticGraph,
    SyntheticGraphConfig,
    default_cache_root,
    degree_stats,
    generate,
    load_synthetic,
)

__all__ = [
    'PRESETS',
    'SyntheticGraph',
    'SyntheticGraphConfig',
    'default_cache_root',
    'degree_stats',
    'generate',
    'load_synthetic',
]
