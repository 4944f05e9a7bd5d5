r"""Writing a dataset directory: arrays streamed chunk by chunk into a
staging directory, hashed, and renamed into place once complete."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple, Union

import numpy as np
import torch

from ..graph.topology import index_dtype_for
from .arrays import Source
from .format import (
    META_KEYS,
    TOPOLOGY_ARRAYS,
    DatasetFormatError,
    build_meta,
    check_name,
    classes_arg,
    int_arg,
)
from .reader import OnDiskDataset, open_dataset_dir
from .staging import Staging

__all__ = ['label_classes', 'write_dataset_dir', 'write_edge_array']

PathLike = Union[str, 'os.PathLike[str]']


def _cast_to(dtype: np.dtype, what: str) -> Callable[[np.ndarray, str],
                                                    Tuple[np.ndarray, str]]:
    def cast(chunk: np.ndarray, name: str) -> Tuple[np.ndarray, str]:
        if chunk.dtype.kind not in 'iu':
            raise TypeError(f'{what} must hold integers, got dtype {name}')
        return np.ascontiguousarray(chunk, dtype=dtype), dtype.name
    return cast


def cast_labels(chunk: np.ndarray, name: str) -> Tuple[np.ndarray, str]:
    r"""Integer labels stored as ``int64`` (others as they are)."""
    if chunk.dtype.kind in 'iu' and chunk.dtype != np.int64:
        return chunk.astype(np.int64), 'int64'
    return chunk, name


def label_classes(low: int, high: int, num_nodes: int,
                  where: str) -> Optional[int]:
    r"""The class count of integer node labels spanning ``[low, high]`` over
    :obj:`num_nodes` nodes (:obj:`None` when every node is unlabelled,
    ``-1``), refusing labels that are not class indices: one below ``-1``,
    or one implying more classes than nodes."""
    if low < -1:
        raise DatasetFormatError(
            f'{where}: label {low:,} is negative; labels are class indices '
            f'0..C-1 (-1 marks an unlabelled node): relabel them')
    if high >= max(num_nodes, 1):
        raise DatasetFormatError(
            f'{where}: label {high:,} means {high + 1:,} classes for '
            f'{num_nodes:,} nodes; labels are class indices 0..C-1: relabel '
            f'them (torch.unique(y, return_inverse=True))')
    return high + 1 if high >= 0 else None


def write_edge_array(st: Staging, key: str, value: Source, num_edges: int,
                     what: str, holder: str = 'the graph') -> None:
    r"""Writes edge array :obj:`key` (one row per edge, in CSC order) into
    :obj:`st`, marked ``"level": "edge"``, refusing it (the directory is
    not written) where it has not :obj:`num_edges` rows: the edges of
    :obj:`holder` (the graph, or one relation of a heterogeneous one)."""
    spec = st.write_array(key, value, what=what)
    if spec['shape'][0] != num_edges:
        raise ValueError(
            f"{what} ({spec['file']}) has {spec['shape'][0]} rows but "
            f"{holder} has {num_edges} edges; pass one row per edge, in CSC "
            f"order")
    spec['level'] = 'edge'


def write_dataset_dir(
    path: PathLike,
    *,
    num_nodes: int,
    indptr: Source,
    indices: Source,
    node_arrays: Dict[str, Source],
    edge_id: Optional[Source] = None,
    edge_arrays: Optional[Dict[str, Source]] = None,
    name: str,
    source: str,
    num_classes: Optional[int] = None,
    overwrite: bool = False,
    progress: bool = True,
    extra_meta: Optional[Dict[str, Any]] = None,
    verify: str = 'checksum',
    index_space: Optional[int] = None,
) -> 'OnDiskDataset':
    r"""Writes a dataset directory and opens it (re-reading every file
    against its checksum, so a bad write is caught at once).

    Every array is streamed to disk in row chunks of about 64 MiB, so
    memory-mapped inputs or chunk iterators larger than memory are fine.
    ``indptr`` is stored as ``int64``, ``indices`` as ``int32`` (``int64``
    from :math:`2^{31}` nodes on), ``edge_id`` as ``int64`` and an integer
    ``y`` as ``int64``; other node and edge arrays keep their dtype.

    Args:
        path (str or os.PathLike): the dataset directory to create.
        num_nodes (int): number of nodes :math:`N`.
        indptr (torch.Tensor or np.ndarray or callable): CSC offsets
            ``[N + 1]``.
        indices (torch.Tensor or np.ndarray or callable): the source node of
            every CSC edge ``[E]``.
        node_arrays (dict): node-level arrays by name (``x``, ``y``,
            ``train_mask``, ...), each with :math:`N` rows; a value may be a
            tensor, a (memory-mapped) numpy array or a callable returning an
            iterable of row chunks.
        edge_id (torch.Tensor or np.ndarray or callable, optional): the
            original position of every CSC edge; :obj:`None` means the CSC
            order is the original order. (default: :obj:`None`)
        edge_arrays (dict, optional): edge-level arrays by name (e.g.
            ``time``, ``edge_attr``), each with one row per edge **in CSC
            order** (row ``k``: the edge at CSC position ``k``; permute a
            ``Data``'s with :meth:`CSCTopology.csc_order`); marked
            ``"level": "edge"`` in ``meta.json``. A name may not be a node
            array's too. (default: :obj:`None`)
        name (str): the dataset's name.
        source (str): where the data came from (free-form).
        num_classes (int, optional): number of classes. (default:
            :obj:`None`)
        overwrite (bool, optional): replace an existing dataset directory.
            (default: :obj:`False`)
        progress (bool, optional): show progress bars. (default: :obj:`True`)
        extra_meta (dict, optional): more JSON-serialisable keys for
            ``meta.json``. (default: :obj:`None`)
        verify (str, optional): how the written directory is checked when
            it is opened (see :func:`open_dataset_dir`).
            (default: :obj:`'checksum'`)
        index_space (int, optional): ``indices`` hold ids in
            ``[0, index_space)`` rather than ``[0, N)``: the rows are some
            nodes of a larger graph (a partition's part), their neighbours
            named by their ids in that graph. (default: :obj:`None`)
    """
    num_nodes = int_arg(num_nodes, 'num_nodes')
    if not isinstance(name, str) or not name:
        raise ValueError(f"invalid 'name' = {name!r}: pass a non-empty str")
    if not isinstance(source, str):
        raise TypeError(f"'source' must be a str, got "
                        f'{type(source).__name__}')
    num_classes = classes_arg(num_classes)
    for arrays, key in ((node_arrays, 'node_arrays'),
                        (edge_arrays, 'edge_arrays')):
        if not isinstance(arrays, dict) and (
                key == 'node_arrays' or arrays is not None):
            raise TypeError(f"'{key}' must be a dict of name -> array "
                            f"(e.g. {{'time': times}}), got "
                            f'{type(arrays).__name__}')
    edge_arrays = dict(edge_arrays or {})
    for arrays, level in ((node_arrays, 'node'), (edge_arrays, 'edge')):
        for key in arrays:
            check_name(key, f'{level} array name', f"'{level}_arrays'")
            if key in TOPOLOGY_ARRAYS:
                raise ValueError(
                    f"invalid {level} array name {key!r} in "
                    f"'{level}_arrays': {', '.join(TOPOLOGY_ARRAYS)} are the "
                    f"topology's; pass them as arguments or rename the "
                    f"array")
    both = sorted(set(node_arrays) & set(edge_arrays))
    if both:
        raise ValueError(f"{both[0]!r} is in both 'node_arrays' and "
                         f"'edge_arrays'; an array name names one array: "
                         f"rename one of them")
    for key in extra_meta or {}:
        if key in META_KEYS:
            raise ValueError(f"'extra_meta' may not set the reserved "
                             f"meta.json key {key!r}")
    id_space = num_nodes if index_space is None else int_arg(
        index_space, 'index_space', minimum=num_nodes)
    index_np = np.dtype(np.int32) if index_dtype_for(
        max(id_space - 1, 0)) == torch.int32 else np.dtype(np.int64)

    state = {'last': 0}

    def check_indptr(chunk: np.ndarray, offset: int) -> None:
        if chunk.ndim != 1:
            raise ValueError(f"'indptr' must be 1-D, got row shape "
                             f'{list(chunk.shape[1:])}')
        if chunk.size == 0:
            return
        if offset == 0 and int(chunk[0]) != 0:
            raise ValueError(f"'indptr' must start at 0, got {chunk[0]}; "
                             f'pass CSC offsets (0, then cumulative '
                             f'in-degrees)')
        bad = np.flatnonzero(np.diff(chunk) < 0)
        if chunk[0] < state['last'] or bad.size:
            pos = offset + (int(bad[0]) + 1 if bad.size else 0)
            raise ValueError(f"'indptr' decreases at position {pos}; pass "
                             f'CSC offsets (cumulative in-degrees)')
        state['last'] = int(chunk[-1])

    def check_range(what: str, high: int) -> Callable[[np.ndarray, int],
                                                      None]:
        kind = 'node id' if what == 'indices' else 'edge position'

        def check(chunk: np.ndarray, offset: int) -> None:
            if chunk.ndim != 1:
                raise ValueError(f"'{what}' must be 1-D, got row shape "
                                 f'{list(chunk.shape[1:])}')
            if chunk.size and (int(chunk.min()) < 0 or
                               int(chunk.max()) >= high):
                bad = int(chunk.min()) if int(chunk.min()) < 0 else \
                    int(chunk.max())
                raise ValueError(f"'{what}' holds {bad}, outside [0, {high})"
                                 f'; every entry must be a valid {kind}')
        return check

    path = Path(path).expanduser()
    with Staging(path, overwrite, progress) as st:
        st.write_array('indptr', indptr, expect_rows=num_nodes + 1,
                       what="'indptr'", check=check_indptr,
                       cast=_cast_to(np.dtype(np.int64), "'indptr'"),
                       default_dtype='int64')
        num_edges = state['last']
        st.write_array('indices', indices, expect_rows=num_edges,
                       what="'indices'", check=check_range('indices',
                                                           id_space),
                       cast=_cast_to(index_np, "'indices'"),
                       default_dtype=index_np.name)
        if edge_id is not None:
            st.write_array('edge_id', edge_id, expect_rows=num_edges,
                           what="'edge_id'", check=check_range('edge_id',
                                                               num_edges),
                           cast=_cast_to(np.dtype(np.int64), "'edge_id'"),
                           default_dtype='int64')
        for key, value in node_arrays.items():
            st.write_array(key, value, expect_rows=num_nodes,
                           what=f"node array '{key}'",
                           cast=cast_labels if key == 'y' else None)
        for key, value in edge_arrays.items():
            write_edge_array(st, key, value, num_edges, f"edge array '{key}'")
        extra = dict(extra_meta or {})
        if index_space is not None:
            extra['index_space'] = id_space
        meta = build_meta(name, num_nodes, num_edges, num_classes, source,
                          extra)
        st.commit(meta)
    return open_dataset_dir(path, verify=verify)
