r"""Datasets for testing and benchmarking the loaders."""
from .ondisk import (
    FORMAT_VERSION,
    DatasetFormatError,
    OnDiskDataset,
    csc_from_edge_chunks,
    open_dataset_dir,
    prepare_ogb,
    prepare_pyg,
    prepare_synthetic,
    write_dataset_dir,
)
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
    'FORMAT_VERSION',
    'DatasetFormatError',
    'OnDiskDataset',
    'csc_from_edge_chunks',
    'open_dataset_dir',
    'prepare_ogb',
    'prepare_pyg',
    'prepare_synthetic',
    'write_dataset_dir',
    'PRESETS',
    'SyntheticGraph',
    'SyntheticGraphConfig',
    'default_cache_root',
    'degree_stats',
    'generate',
    'load_synthetic',
]
