r"""Datasets: seeded synthetic graphs shaped like the papers' benchmarks, and
converters from a PyG ``.pt`` file or a local OGB folder into a dataset
directory (``pyg-fastload prepare``)."""
from .disk_synthetic import DISK_PRESETS, DiskGraphConfig, prepare_disk_synthetic
from .hetero_synthetic import (
    HETERO_PRESETS,
    HeteroGraphConfig,
    generate_hetero,
)
from .ogb import prepare_ogb
from .prepare import prepare_hetero_preset, prepare_synthetic
from .pyg_file import load_data_file, load_graph_file, prepare_pyg, write_graph
from .synthetic import SyntheticGraph, degree_stats, generate
from .synthetic_cache import default_cache_root, load_synthetic
from .synthetic_config import PRESETS, SyntheticGraphConfig

__all__ = [
    'PRESETS',
    'DISK_PRESETS',
    'HETERO_PRESETS',
    'HeteroGraphConfig',
    'generate_hetero',
    'DiskGraphConfig',
    'prepare_disk_synthetic',
    'SyntheticGraph',
    'SyntheticGraphConfig',
    'default_cache_root',
    'degree_stats',
    'generate',
    'load_synthetic',
    'load_data_file',
    'load_graph_file',
    'prepare_hetero_preset',
    'write_graph',
    'prepare_synthetic',
    'prepare_pyg',
    'prepare_ogb',
]
