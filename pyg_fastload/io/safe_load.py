r"""Loading ``.pt`` files without running code stored in them.

:func:`torch.load` with ``weights_only=False`` unpickles arbitrary objects,
and unpickling can call any function (``os.system`` included), so a
``.pt`` file from elsewhere is code.  :func:`safe_torch_load` only ever
unpickles with ``weights_only=True``: tensors, plain containers, and the
classes PyTorch Geometric registers as safe (``Data``, ``HeteroData``,
``SparseTensor``), plus PyG's storages and attribute records (dictionaries
of values).  PyG's own ``fs.torch_load`` falls
back to ``weights_only=False`` when that fails; this loader never does.
"""
from __future__ import annotations

import os
import pickle
import re
from pathlib import Path
from typing import Any, List, Union

import torch
from torch_geometric.data.data import DataEdgeAttr, DataTensorAttr
from torch_geometric.data.storage import (BaseStorage, EdgeStorage,
                                          GlobalStorage, NodeStorage)

from .format import DatasetFormatError

__all__ = ['UnsafeFileError', 'safe_torch_load']

_GLOBAL_RE = re.compile(r'GLOBAL ([\w.]+)')


class UnsafeFileError(DatasetFormatError):
    r"""A ``.pt`` file needs more than safe unpickling to be loaded: it
    refers to a Python object (a function or a class) that is not a tensor,
    a plain container or a PyG data class, and loading it could run code."""


#: PyG's attribute records and storages, which a pickled ``Data`` refers
#: to beside the classes PyG itself registers as safe; each only holds a
#: dictionary of values.
_PYG_RECORDS: List[type] = [DataEdgeAttr, DataTensorAttr, BaseStorage,
                            GlobalStorage, NodeStorage, EdgeStorage]


def safe_torch_load(path: Union[str, 'os.PathLike[str]']) -> Any:
    r"""Loads a file written by :func:`torch.save` onto the CPU with safe
    unpickling only (``weights_only=True``), never running code from it.

    Args:
        path (str or os.PathLike): the file.

    Example:
        >>> import torch
        >>> from pyg_fastload.io import safe_torch_load
        >>> torch.save({'ids': torch.arange(3)}, 'ids.pt')
        >>> safe_torch_load('ids.pt')
        {'ids': tensor([0, 1, 2])}

    Raises:
        UnsafeFileError: the file refers to an object outside the allowed
            set; the message names it and how to convert the file.
        DatasetFormatError: the file is not one :func:`torch.save` wrote.
    """
    path = Path(path)
    try:
        with torch.serialization.safe_globals(_PYG_RECORDS):
            return torch.load(path, map_location='cpu', weights_only=True)
    except pickle.UnpicklingError as exc:
        match = _GLOBAL_RE.search(str(exc))
        if match is None:
            raise DatasetFormatError(
                f"'{path}' is not a file written by torch.save "
                f"({str(exc).splitlines()[-1][:200]}); pass one written "
                f"with torch.save(data, path)") from None
        raise UnsafeFileError(
            f"'{path}' was refused: it refers to '{match.group(1)}', which "
            f"is not a tensor or a PyG data class. Unpickling it could run "
            f"code from the file, so pyg-fastload loads .pt files with safe "
            f"unpickling only (torch.load(weights_only=True)). If you trust "
            f"the file, convert it once in your own session: data = "
            f"torch.load(path, weights_only=False), then save the graph as "
            f"tensors: torch.save(Data(x=data.x, y=data.y, "
            f"edge_index=data.edge_index, ...), new_path)") from None
    except (RuntimeError, EOFError, OSError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise DatasetFormatError(
            f"'{path}' could not be read by torch.load ({type(exc).__name__}:"
            f" {str(exc)[:200]}); pass a file written with "
            f"torch.save(data, path)") from None
