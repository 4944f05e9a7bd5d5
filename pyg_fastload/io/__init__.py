r"""The dataset directory format in one place: its names and errors, the
streaming writer, the validating reader, the out-of-core CSC sort, and safe
loading of ``.pt`` files."""
from .csc_sort import csc_from_edge_chunks
from .format import (FORMAT_VERSION, HETERO_FORMAT_VERSION, DatasetFormatError,
                     is_hetero_dataset_dir)
from .identity import data_identity, dataset_dir_identity
from .hetero_dir import (OnDiskHeteroDataset, open_hetero_dataset_dir,
                         open_node_arrays, write_hetero_dataset_dir)
from .reader import OnDiskDataset, open_dataset_dir
from .safe_load import UnsafeFileError, safe_torch_load
from .writer import write_dataset_dir

__all__ = [
    'open_node_arrays',
    'FORMAT_VERSION',
    'HETERO_FORMAT_VERSION',
    'is_hetero_dataset_dir',
    'OnDiskHeteroDataset',
    'open_hetero_dataset_dir',
    'write_hetero_dataset_dir',
    'DatasetFormatError',
    'OnDiskDataset',
    'open_dataset_dir',
    'write_dataset_dir',
    'csc_from_edge_chunks',
    'UnsafeFileError',
    'safe_torch_load',
    'data_identity',
    'dataset_dir_identity',
]
