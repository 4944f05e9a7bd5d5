r"""Reading a graph saved with ``torch.save(data, path)`` (or an
``InMemoryDataset``'s processed file holding one graph), safely."""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Dict, List, Union

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData

from ..graph.kind import is_data, is_hetero
from ..graph.topology import CSCTopology
from ..io.csc_sort import check_node_count
from ..io.format import (
    TOPOLOGY_ARRAYS,
    DatasetFormatError,
    check_name,
    flat_labels,
    int_arg,
)
from ..io.reader import OnDiskDataset, OnDiskHeteroDataset
from ..io.safe_load import safe_torch_load
from ..io.staging import check_target
from ..io.writer import label_classes, write_dataset_dir
from .hetero_prepare import attribute_level, write_hetero_data

__all__ = ['load_data_file', 'load_graph_file', 'prepare_pyg']

PathLike = Union[str, 'os.PathLike[str]']


def load_graph_file(path: Union[str, 'os.PathLike[str]']
                    ) -> Union[Data, HeteroData]:
    r"""Loads the single :class:`~torch_geometric.data.Data` or
    :class:`~torch_geometric.data.HeteroData` held by :obj:`path` with safe
    unpickling only (see :func:`~pyg_fastload.io.safe_torch_load`).

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
    return _as_graph(safe_torch_load(path), path)


def load_data_file(path: Union[str, 'os.PathLike[str]']) -> Data:
    r"""Loads the single homogeneous :class:`~torch_geometric.data.Data`
    held by :obj:`path` (:func:`load_graph_file`; a ``HeteroData`` is an
    error)."""
    data = load_graph_file(path)
    if is_hetero(data):
        raise DatasetFormatError(
            f'{path}: holds a HeteroData where a homogeneous Data is '
            f'needed: load it with load_graph_file')
    return data


def _num_graphs(slices: Any) -> int:
    r"""How many graphs an ``InMemoryDataset``'s ``slices`` describe (a
    dict of boundary tensors, nested per store for a ``HeteroData``)."""
    if isinstance(slices, Tensor):
        return max(slices.numel() - 1, 1)
    if isinstance(slices, dict):
        return max((_num_graphs(v) for v in slices.values()), default=1)
    return 1


def _collated(obj: Any, file: Path) -> Union[Data, HeteroData]:
    r"""The graph of an ``InMemoryDataset``'s processed file: ``(data,
    slices)`` or ``(data.to_dict(), slices, data class)``, refused when the
    slices say it holds several graphs."""
    data, slices = obj[0], obj[1]
    count = _num_graphs(slices)
    if count > 1:
        raise DatasetFormatError(
            f'{file}: holds an InMemoryDataset of {count} graphs; '
            f'pyg-fastload prepares a single graph: save one with '
            f'torch.save(dataset[i], path)')
    if isinstance(data, dict):
        data_cls = obj[2] if len(obj) > 2 else Data
        if not issubclass(data_cls, (Data, HeteroData)):
            raise DatasetFormatError(
                f'{file}: names {data_cls.__name__} as the dataset\'s data '
                f'class, not a Data or HeteroData; save one graph with '
                f'torch.save(data, path)')
        data = data_cls.from_dict(data)
    return data


def _as_graph(obj: Any, file: Path) -> Union[Data, HeteroData]:
    if isinstance(obj, (tuple, list)):
        if 2 <= len(obj) <= 3 and (is_data(obj[0]) or
                                   isinstance(obj[0], dict)) and \
                (obj[1] is None or isinstance(obj[1], dict)) and \
                (len(obj) == 2 or isinstance(obj[2], type)):
            obj = _collated(obj, file)
        elif len(obj) > 1 and all(is_data(o) for o in obj):
            raise DatasetFormatError(
                f'{file}: holds a {type(obj).__name__} of {len(obj)} graphs; '
                f'pyg-fastload prepares a single graph: save one with '
                f'torch.save(graphs[i], path)')
        elif len(obj) == 1:
            obj = obj[0]
    if not is_data(obj):
        raise DatasetFormatError(
            f'{file}: holds a {type(obj).__name__}, not a '
            f'torch_geometric.data.Data; save one with torch.save(data, '
            f'path)')
    return obj


def prepare_pyg(
    data_path: PathLike,
    out_dir: PathLike,
    progress: bool = True,
    overwrite: bool = False,
) -> Union[OnDiskDataset, OnDiskHeteroDataset]:
    r"""Converts a :class:`torch_geometric.data.Data` saved with
    :func:`torch.save` into a dataset directory (a ``HeteroData`` into a
    heterogeneous one: :func:`write_hetero_data`).

    The ``edge_index`` becomes the CSC topology and ``edge_id`` records the
    original position of every CSC edge (omitted when the edges were
    already sorted by destination); every node-level tensor
    (:meth:`Data.is_node_attr`) becomes an array; an integer ``y`` gives
    ``num_classes``; every edge-level tensor (:meth:`Data.is_edge_attr`
    with one row per edge of ``edge_index``: ``time``, ``edge_attr``,
    ``edge_weight``, ...) becomes an edge array, its rows permuted into CSC
    order (:meth:`CSCTopology.csc_order`). Anything else (and edge-level
    tensors of a graph given as ``adj_t``) is not stored (warned about).

    Args:
        data_path (str or os.PathLike): the file written by
            ``torch.save(data, data_path)`` (or an ``InMemoryDataset``'s
            processed file holding one graph).
        out_dir (str or os.PathLike): the dataset directory to create.
        progress (bool, optional): show progress bars. (default: :obj:`True`)
        overwrite (bool, optional): replace an existing :obj:`out_dir`.
            (default: :obj:`False`)
    """
    data_path = Path(data_path).expanduser()
    out_dir = Path(out_dir).expanduser()
    if not data_path.is_file():
        raise FileNotFoundError(
            f"'data_path' = '{data_path}' does not exist; pass a file "
            f'written with torch.save(data, path)')
    check_target(out_dir, overwrite)
    data = load_graph_file(data_path)
    if is_hetero(data):
        return write_hetero_data(
            data, out_dir, name=data_path.stem,
            source=f"torch_geometric HeteroData from "
                   f"'{data_path.resolve()}' (each edge type's edge_index "
                   f"-> CSC, edge_id = original edge positions)",
            overwrite=overwrite, progress=progress, where=str(data_path),
            extra_meta={'command': f'pyg-fastload prepare --pyg-data '
                                   f'{data_path} --overwrite {out_dir}'})
    num_nodes = data.num_nodes
    if num_nodes is None:
        raise DatasetFormatError(
            f'{data_path}: the Data object has no nodes (no num_nodes, x or '
            f'edge_index); set data.num_nodes')
    try:
        num_nodes = int_arg(int(num_nodes), 'num_nodes')
    except ValueError as exc:
        raise DatasetFormatError(f'{data_path}: {exc}') from None
    edge_index = data.get('edge_index') if 'edge_index' in data else None
    adj_t = data.get('adj_t') if edge_index is None else None  # SparseTensor
    if edge_index is None and adj_t is None:
        raise DatasetFormatError(
            f"{data_path}: the Data object has no 'edge_index' (nor "
            f"'adj_t'); it needs edges to be sampled from")
    skip = {'edge_index', 'num_nodes'} | ({'adj_t'} if adj_t is not None
                                         else set())
    # edge-level tensors follow edge_index's columns (adj_t's order is its
    # own: they are not stored)
    num_edges = edge_index.size(1) if isinstance(edge_index, Tensor) and \
        edge_index.dim() == 2 else None
    arrays: Dict[str, Dict[str, Tensor]] = {'node': {}, 'edge': {}}
    skipped: List[str] = []
    for key, value in data.items():
        if key in skip:
            continue
        level = attribute_level(data, key, value, num_nodes, num_edges,
                                str(data_path), f'data.{key}')
        if (key in ('x', 'y') or key.endswith('_mask')) and \
                isinstance(value, Tensor) and value.dim() >= 1 and \
                value.size(0) != num_nodes:
            raise DatasetFormatError(
                f"{data_path}: '{key}' has {value.size(0)} rows but the "
                f"graph has num_nodes = {num_nodes}; give every node one "
                f"row of '{key}' (or fix data.num_nodes)")
        if level is None:
            skipped.append(key)
            continue
        check_name(key, 'attribute name', f"'{data_path}'")
        if key in TOPOLOGY_ARRAYS:
            raise DatasetFormatError(
                f"{data_path}: {level} attribute '{key}' clashes with the "
                f'topology array of that name; rename it')
        value = flat_labels(key, value)
        arrays[level][key] = value
    node_arrays = arrays['node']
    num_classes = None
    y = node_arrays.get('y')
    if y is not None and y.dim() == 1 and not y.is_floating_point() and \
            y.dtype != torch.bool and y.numel():
        num_classes = label_classes(int(y.min()), int(y.max()), num_nodes,
                                    f"{data_path}: 'y'")
    try:  # before anything is allocated for that many nodes
        check_node_count(num_nodes, out_dir)
    except ValueError as exc:
        raise DatasetFormatError(f'{data_path}: {exc}') from None
    if edge_index is not None:
        try:
            topology = CSCTopology.from_edge_index(edge_index, num_nodes)
        except (TypeError, ValueError) as exc:
            raise DatasetFormatError(f'{data_path}: {exc}') from None
        edge_id = topology.edge_id
    else:
        rowptr, col, _ = adj_t.csr()  # adj_t[dst, src]: CSR = CSC
        topology = CSCTopology(indptr=rowptr, indices=col,
                               num_nodes=num_nodes)
        edge_id = None
    if skipped:
        warnings.warn(
            f"{data_path}: attributes {', '.join(map(repr, skipped))} are "
            f'neither node-level tensors nor edge-level tensors of '
            f"'edge_index' and are not stored (the on-disk format holds "
            f'node and edge arrays only)', UserWarning, stacklevel=2)
    return write_dataset_dir(
        out_dir,
        num_nodes=num_nodes,
        indptr=topology.indptr,
        indices=topology.indices,
        edge_id=edge_id,
        node_arrays=node_arrays,
        edge_arrays={key: topology.csc_order(value)
                     for key, value in arrays['edge'].items()},
        name=data_path.stem,
        source=(f"torch_geometric Data from '{data_path.resolve()}' "
                f"({'edge_index' if edge_index is not None else 'adj_t'} -> "
                f'CSC' + (', edge_id = original edge positions'
                          if edge_id is not None else
                          ', edges were already sorted by destination')
                + ')'),
        num_classes=num_classes,
        overwrite=overwrite,
        progress=progress,
        extra_meta={'command': f'pyg-fastload prepare --pyg-data '
                               f'{data_path} --overwrite {out_dir}',
                    'skipped_attributes': skipped},
    )
