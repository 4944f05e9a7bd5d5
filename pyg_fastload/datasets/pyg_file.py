r"""Reading a graph saved with ``torch.save(data, path)`` (or an
``InMemoryDataset``'s processed file holding one graph), safely."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Union

from torch import Tensor
from torch_geometric.data import Data, HeteroData

from ..io.format import DatasetFormatError
from ..io.safe_load import safe_torch_load

__all__ = ['load_data_file']


def load_data_file(path: Union[str, 'os.PathLike[str]']) -> Data:
    r"""Loads the single homogeneous :class:`~torch_geometric.data.Data`
    held by :obj:`path` with safe unpickling only (see
    :func:`~pyg_fastload.io.safe_torch_load`).

    Raises:
        FileNotFoundError: :obj:`path` is not a file.
        UnsafeFileError: the file needs unsafe unpickling.
        DatasetFormatError: the file holds something other than one graph.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(
            f"'{path}' does not exist; pass a file written with "
            f"torch.save(data, path)")
    return _as_data(safe_torch_load(path), path)


def _as_data(obj: Any, file: Path) -> Data:
    if isinstance(obj, (tuple, list)) and obj and isinstance(
            obj[0], (Data, dict)):  # an InMemoryDataset's processed file
        data, slices = obj[0], obj[1] if len(obj) > 1 else None
        if isinstance(data, dict):
            data_cls = obj[2] if len(obj) > 2 and isinstance(obj[2], type) \
                else Data
            if issubclass(data_cls, HeteroData):
                data = HeteroData.from_dict(data)
            else:
                data = data_cls.from_dict(data)
        if isinstance(slices, dict):
            for value in slices.values():
                if isinstance(value, Tensor) and value.numel() > 2:
                    raise DatasetFormatError(
                        f'{file}: holds a dataset of {value.numel() - 1} '
                        f'graphs; pyg-fastload prepares a single graph: save '
                        f'one Data object with torch.save(dataset[0], path)')
        obj = data
    if isinstance(obj, HeteroData):
        raise DatasetFormatError(
            f'{file}: holds a HeteroData; the on-disk format is '
            f'homogeneous: save data.to_homogeneous() instead')
    if not isinstance(obj, Data):
        raise DatasetFormatError(
            f'{file}: holds a {type(obj).__name__}, not a '
            f'torch_geometric.data.Data; save one with torch.save(data, '
            f'path)')
    return obj
