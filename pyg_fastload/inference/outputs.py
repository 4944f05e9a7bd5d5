r"""Where each layer's outputs go, chosen by size: a tensor in memory when
they fit the memory budget, else a raw row-major file in the work directory
(written through a numpy memmap, read back memory-mapped through
:meth:`TieredFeatureStore.put_mmap_tensor`). Either way the next layer reads
them through one :class:`~pyg_fastload.TieredFeatureStore`'s
:meth:`~pyg_fastload.TieredFeatureStore.gather`."""
from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from ..config import format_bytes
from ..storage import TieredFeatureStore

__all__ = ['LayerOutput', 'output_file', 'numpy_dtype']


def output_file(kind: str = 'output', index: Optional[int] = None) -> str:
    r"""The name of the returned rows' file in the run's directory, when
    they do not fit the memory budget.

    Args:
        kind (str): ``'output'``, the model's outputs, or ``'hidden'``, its
            last hidden layer's rows (``with_hidden``).
        index (int, optional): the node type's index in the graph's node
            types (a heterogeneous graph's types are numbered, as their
            names may not be file names); :obj:`None`: a homogeneous
            graph's one type.

    Example:
        >>> from pyg_fastload.inference.outputs import output_file
        >>> output_file(), output_file('hidden', 2)
        ('output.bin', 'hidden-2.bin')
    """
    return f'{kind}.bin' if index is None else f'{kind}-{index}.bin'


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    r"""The numpy element type of :obj:`dtype`, which a file of rows is
    written and memory-mapped with."""
    try:
        return torch.empty((), dtype=dtype).numpy().dtype
    except TypeError:
        raise TypeError(f"outputs of dtype {dtype} cannot go to a file "
                        f"(numpy has no such type): raise the memory budget "
                        f"or run the model in float32") from None


class LayerOutput:
    r"""One layer's outputs for every node, written chunk by chunk and then
    read by rows.

    Args:
        store (TieredFeatureStore): the store the rows are read through.
        name (str): the attribute name in :obj:`store`.
        shape (Sequence[int]): ``[num_nodes, ...]``.
        dtype (torch.dtype): element type.
        directory (pathlib.Path, optional): where the file goes;
            :obj:`None`: in memory.
    """
    def __init__(self, store: TieredFeatureStore, name: str,
                 shape: Sequence[int], dtype: torch.dtype,
                 directory: Optional[Path] = None):
        self.store, self.name = store, name
        self.shape, self.dtype = tuple(int(s) for s in shape), dtype
        self.path: Optional[Path] = None
        self._array: Optional[np.memmap] = None
        if directory is None:
            self.tensor = torch.empty(self.shape, dtype=dtype)
            return
        np_dtype = numpy_dtype(dtype)
        handle, path = tempfile.mkstemp(prefix=f'{name}-', suffix='.bin',
                                        dir=directory)
        os.close(handle)
        self.path = Path(path)
        self._array = np.memmap(path, dtype=np_dtype, mode='w+',
                                shape=self.shape)
        self.tensor = torch.from_numpy(self._array)

    @property
    def in_memory(self) -> bool:
        return self.path is None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * \
            torch.empty((), dtype=self.dtype).element_size()

    def write(self, start: int, rows: Tensor) -> None:
        r"""Puts :obj:`rows` at rows ``start..``."""
        self.tensor[start:start + rows.size(0)] = rows

    def seal(self) -> None:
        r"""Every row is written: from now on rows are read through the
        store (a file memory-mapped read-only)."""
        if self._array is not None:
            self._array.flush()
            self.tensor = self._array = None
            self.store.put_mmap_tensor(str(self.path), self.dtype,
                                       self.shape, attr_name=self.name)
        else:
            self.store.put_tensor(self.tensor, attr_name=self.name,
                                  group_name=None, index=None)

    def rows(self, ids: Tensor) -> Tensor:
        return self.store.gather(self.name, ids)

    def release(self) -> None:
        r"""Forgets the rows and removes the file, if any."""
        self.store.remove_tensor(attr_name=self.name, group_name=None,
                                 index=None)
        self.tensor = self._array = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)

    def keep_as(self, path: Path) -> Tensor:
        r"""The outputs as the caller's tensor: in memory, or (from a file)
        the file moved to :obj:`path` and memory-mapped copy-on-write
        (writing to the tensor leaves the file as it is)."""
        if self.path is None:
            tensor = self.tensor
            self.release()
            return tensor
        self.store.remove_tensor(attr_name=self.name, group_name=None,
                                 index=None)
        os.replace(self.path, path)
        self.path = None
        array = np.memmap(path, dtype=numpy_dtype(self.dtype), mode='c',
                          shape=self.shape)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', UserWarning)
            return torch.from_numpy(array)

    def __repr__(self) -> str:
        place = 'memory' if self.in_memory else str(self.path)
        return (f'LayerOutput({self.name}, {list(self.shape)}, '
                f'{format_bytes(self.nbytes)} in {place})')
