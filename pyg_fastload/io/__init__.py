r"""The dataset directory format in one place: its names and errors, the
streaming writer and the validating reader (one each, for both kinds of
graph), the out-of-core CSC sort, and safe loading of ``.pt`` files."""
from typing import NoReturn

from .csc_sort import csc_from_edge_chunks
from .format import (FORMAT_VERSION, HETERO_FORMAT_VERSION, DatasetFormatError,
                     dataset_dir_kind)
from .identity import data_identity, dataset_dir_identity
from .reader import (OnDiskDataset, OnDiskHeteroDataset, open_dataset_dir,
                     open_node_arrays)
from .safe_load import UnsafeFileError, safe_torch_load
from .writer import write_dataset_dir

__all__ = [
    'open_node_arrays',
    'FORMAT_VERSION',
    'HETERO_FORMAT_VERSION',
    'dataset_dir_kind',
    'OnDiskHeteroDataset',
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

#: Names that were folded into one function for both kinds of graph.
_RENAMED = {'open_hetero_dataset_dir': 'open_dataset_dir',
            'write_hetero_dataset_dir': 'write_dataset_dir'}


def __getattr__(name: str) -> NoReturn:
    # ImportError, which `from pyg_fastload.io import ...` passes on as it is
    if name in _RENAMED:
        raise ImportError(
            f'pyg_fastload.io.{name} is gone: pyg_fastload.io.'
            f'{_RENAMED[name]} serves both kinds of dataset directory (a '
            f'dict of node type -> count as num_nodes makes a heterogeneous '
            f'one); see CHANGELOG.md')
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
