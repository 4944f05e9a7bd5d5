r"""Reading a graph saved with ``torch.save(data, path)`` (or an
``InMemoryDataset``'s processed file holding one graph), safely, and
writing a ``Data`` or a ``HeteroData`` as a dataset directory."""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import Data, HeteroData

from ..graph.convert import check_edge_rows
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

__all__ = ['load_data_file', 'load_graph_file', 'prepare_pyg', 'write_graph',
           'attribute_level']

PathLike = Union[str, 'os.PathLike[str]']


def load_graph_file(path: Union[str, 'os.PathLike[str]']
                    ) -> Union[Data, HeteroData]:
    r"""Loads the single :class:`~torch_geometric.data.Data` or
    :class:`~torch_geometric.data.HeteroData` held by :obj:`path` with safe
    unpickling only (see :func:`~pyg_fastload.io.safe_torch_load`).

    Args:
        path (str or os.PathLike): the ``torch.save`` file.

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
    error).

    Args:
        path (str or os.PathLike): the ``torch.save`` file.
    """
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


def attribute_level(store: Any, key: str, value: Any,
                    num_nodes: Optional[int], num_edges: Optional[int],
                    where: str, attr: str) -> Optional[str]:
    r"""Whether attribute :obj:`key` of :obj:`store` (a ``Data``, or a
    ``HeteroData``'s node or edge store) is stored, and as what:
    ``'node'`` for a node-level tensor (:obj:`num_nodes` rows,
    ``is_node_attr``), ``'edge'`` for an edge-level one (:obj:`num_edges`
    rows, one per column of ``edge_index``, ``is_edge_attr``), else
    :obj:`None` (not stored). A sparse tensor of either length is refused
    naming :obj:`where` (the file) and :obj:`attr` (how to reach it, e.g.
    ``data.time``)."""
    if not isinstance(value, Tensor) or value.dim() == 0:
        return None
    rows = value.size(0)
    if value.layout != torch.strided and rows in (num_nodes, num_edges):
        raise DatasetFormatError(
            f"{where}: '{key}' is a sparse tensor ({value.layout}); store it "
            f"dense ({attr} = {attr}.to_dense()) and save the file again")
    if rows == num_nodes and store.is_node_attr(key):
        return 'node'
    if rows == num_edges and store.is_edge_attr(key):
        return 'edge'
    return None


def _node_counts(data: Union[Data, HeteroData], typed: bool,
                 where: str) -> Dict[Optional[str], int]:
    r"""The node count of every node type (of a ``Data``: of type
    :obj:`None`)."""
    counts: Dict[Optional[str], int] = {}
    for node_type in data.node_types if typed else [None]:
        count = (data[node_type] if typed else data).num_nodes
        whose = f'node type {node_type!r}' if typed else 'the Data object'
        if count is None:
            raise DatasetFormatError(
                f"{where}: node type {node_type!r} has no node count (no "
                f"'num_nodes' and no 'x'); set data[{node_type!r}].num_nodes"
                if typed else f'{where}: the Data object has no nodes (no '
                f'num_nodes, x or edge_index); set data.num_nodes')
        try:
            counts[node_type] = int_arg(int(count), 'num_nodes')
        except ValueError as error:
            raise DatasetFormatError(
                f'{where}: ' + (f'{whose}: ' if typed else '') + f'{error}'
            ) from None
    return counts


def _node_arrays(store: Any, node_type: Optional[str], count: int,
                 num_edges: Optional[int], where: str,
                 skipped: List[str]) -> Dict[str, Tensor]:
    r"""The node-level tensors of :obj:`store` (a ``HeteroData``'s node
    store, where every tensor must be one, or a ``Data``, where
    :func:`attribute_level` tells them from edge-level ones)."""
    arrays: Dict[str, Tensor] = {}
    for key, value in store.items():
        if key in ('num_nodes', 'edge_index', 'adj_t'):
            continue
        if node_type is not None:  # a node store holds node attributes
            level = 'node' if isinstance(value, Tensor) and \
                value.dim() >= 1 else None
            attr = f'data[{node_type!r}].{key}'
            strict = level == 'node'
        else:
            level = attribute_level(store, key, value, count, num_edges,
                                    where, f'data.{key}')
            attr = f"'{key}'"
            strict = (key in ('x', 'y') or key.endswith('_mask')) and \
                isinstance(value, Tensor) and value.dim() >= 1
        if strict and value.size(0) != count:
            raise DatasetFormatError(
                f"{where}: {attr} has {value.size(0)} rows but "
                + (f'node type {node_type!r} has {count} nodes; give every '
                   f'node one row (or fix data[{node_type!r}].num_nodes)'
                   if node_type is not None else
                   f'the graph has num_nodes = {count}; give every node '
                   f'one row of {attr} (or fix data.num_nodes)'))
        if level == 'node':
            arrays[key] = flat_labels(key, value)
        elif level is None:
            skipped.append(key if node_type is None else
                           f'{node_type}.{key}')
    return arrays


def _relation(store: Any, edge_type: Optional[Tuple[str, str, str]],
              num_nodes: Dict[Optional[str], int], where: str,
              skipped: List[str]
              ) -> Tuple[CSCTopology, Dict[str, Tensor]]:
    r"""The CSC of one edge type (of a ``Data``: type :obj:`None`, from
    ``edge_index`` or ``adj_t``) and its edge-level tensors (one row per
    column of its ``edge_index``, :func:`attribute_level`) permuted into
    its CSC order."""
    src, _, dst = edge_type or (None, None, None)
    whose = f'edge type {edge_type}' if edge_type else 'the Data object'
    edge_index = store.get('edge_index') if 'edge_index' in store else None
    adj_t = store.get('adj_t') if edge_type is None and \
        edge_index is None else None  # a SparseTensor
    if edge_index is None and adj_t is None:
        raise DatasetFormatError(
            f"{where}: edge type {edge_type} has no 'edge_index' (an adj_t "
            f"or other layout); give it an edge_index" if edge_type else
            f"{where}: the Data object has no 'edge_index' (nor 'adj_t'); "
            f"it needs edges to be sampled from")
    if edge_type is not None:
        try:
            check_edge_rows(store, edge_type)
        except ValueError as error:
            raise DatasetFormatError(f'{where}: {error}') from None
        for end in (src, dst):
            if end not in num_nodes:
                raise DatasetFormatError(
                    f"{where}: edge type {edge_type} names node type "
                    f"{end!r}, which has no nodes; set "
                    f"data[{end!r}].num_nodes or drop the edge type")
    if adj_t is not None:  # adj_t[dst, src]: CSR = CSC, rows in its order
        rowptr, col, _ = adj_t.csr()
        return CSCTopology(indptr=rowptr, indices=col,
                           num_nodes=num_nodes[None]), {}
    try:
        csc = CSCTopology.from_edge_index(edge_index, num_nodes[dst],
                                          num_sources=num_nodes[src])
    except (TypeError, ValueError) as error:
        raise DatasetFormatError(
            f'{where}: ' + (f'{whose}: ' if edge_type else '') + f'{error}'
        ) from None
    edge_arrays = {}
    for key, value in store.items():
        if key in ('edge_index', 'num_nodes'):
            continue
        level = attribute_level(store, key, value,
                                None if edge_type else num_nodes[None],
                                csc.num_edges, f'{where}: {whose}'
                                if edge_type else where,
                                f'data[{edge_type!r}].{key}' if edge_type
                                else f'data.{key}')
        if level == 'edge':
            edge_arrays[key] = csc.csc_order(value)
        elif edge_type is not None:
            skipped.append(f"{'__'.join(edge_type)}.{key}")
    return csc, edge_arrays


def write_graph(
    data: Union[Data, HeteroData],
    out_dir: PathLike,
    *,
    name: str,
    source: str,
    overwrite: bool = False,
    progress: bool = True,
    extra_meta: Optional[Dict[str, Any]] = None,
    where: Optional[str] = None,
) -> Union[OnDiskDataset, OnDiskHeteroDataset]:
    r"""Writes a ``Data`` or a ``HeteroData`` as a dataset directory of its
    kind: every node type with its node-level tensors (``x``, ``y``,
    masks, ...; a type without any is declared by its node count), every
    edge type's ``edge_index`` as a CSC with ``edge_id`` mapping back to
    its columns (omitted for a ``Data`` whose edges were already sorted by
    destination; its ``adj_t`` is taken as the CSC), and its edge-level
    tensors (one row per column of its ``edge_index``: ``time``,
    ``edge_attr``, ...; :func:`attribute_level`) as its edge arrays, their
    rows permuted into its CSC order (:meth:`CSCTopology.csc_order`).
    Anything else is not stored (warned about). An integer ``y`` gives
    ``num_classes``; of a ``HeteroData``, the one node type with labels is
    the ``target``.

    Args:
        data (Data or HeteroData): the graph.
        out_dir (str or os.PathLike): the dataset directory to create.
        name (str): the dataset's name.
        source (str): where the graph came from (of a ``Data``, how its
            CSC was made is appended).
        overwrite, progress, extra_meta: as for
            :func:`~pyg_fastload.io.write_dataset_dir`.
        where (str, optional): what errors name (default: :obj:`name`).

    Example:
        >>> from pyg_fastload.datasets import generate_hetero, write_graph
        >>> ds = write_graph(generate_hetero('hetero-tiny'), 'tiny-dir',
        ...                  name='tiny', source='example',
        ...                  progress=False)  # doctest: +SKIP
    """
    if not is_data(data):
        raise TypeError(f"'data' must be a Data or a HeteroData, got "
                        f"{type(data).__name__}")
    where = name if where is None else where
    typed = is_hetero(data)
    num_nodes = _node_counts(data, typed, where)
    try:  # before anything is allocated for that many nodes
        check_node_count(sum(num_nodes.values()), Path(out_dir))
    except ValueError as error:
        raise DatasetFormatError(
            f'{where}: ' + (f'node counts {num_nodes}: ' if typed else '')
            + f'{error}') from None
    skipped: List[str] = []
    edge_index = None if typed else data.get('edge_index')
    num_edges = edge_index.size(1) if isinstance(edge_index, Tensor) and \
        edge_index.dim() == 2 else None
    arrays = {t: _node_arrays(data[t] if typed else data, t, count,
                              num_edges, where, skipped)
              for t, count in num_nodes.items()}
    labelled = [t for t, a in arrays.items() if 'y' in a]
    target = labelled[0] if len(labelled) == 1 else None
    num_classes = None
    if len(labelled) == 1:
        y = arrays[target]['y']
        if y.dim() == 1 and not y.is_floating_point() and \
                y.dtype != torch.bool and y.numel():
            num_classes = label_classes(
                int(y.min()), int(y.max()), num_nodes[target],
                f'{where}: data[{target!r}].y' if typed else
                f"{where}: 'y'")
    relations, edge_arrays = {}, {}
    for edge_type in data.edge_types if typed else [None]:
        relations[edge_type], edge_arrays[edge_type] = _relation(
            data[edge_type] if typed else data, edge_type, num_nodes, where,
            skipped)
    for level, found in (('node', arrays), ('edge', edge_arrays)):
        for key in found.get(None, {}):  # a Data's: named after the file
            check_name(key, 'attribute name', f"'{where}'")
            if key in TOPOLOGY_ARRAYS:
                raise DatasetFormatError(
                    f"{where}: {level} attribute '{key}' clashes with the "
                    f'topology array of that name; rename it')
    if skipped:
        of = "their edge type's edge_index" if typed else "'edge_index'"
        warnings.warn(f"{where}: {', '.join(map(repr, skipped))} are "
                      f"neither node-level tensors nor edge-level tensors "
                      f"of {of} and are not stored", UserWarning,
                      stacklevel=2)
    extra = dict(extra_meta or {})
    extra['skipped_attributes'] = skipped
    if typed:
        return write_dataset_dir(
            out_dir, num_nodes=num_nodes, relations=relations,
            node_arrays=arrays, edge_arrays=edge_arrays, name=name,
            source=source, num_classes=num_classes, target=target,
            overwrite=overwrite, progress=progress, extra_meta=extra)
    csc = relations[None]
    given = 'edge_index' if edge_index is not None else 'adj_t'
    sorted_note = ', edge_id = original edge positions' if \
        csc.edge_id is not None else \
        ', edges were already sorted by destination'
    return write_dataset_dir(
        out_dir, num_nodes=num_nodes[None], indptr=csc.indptr,
        indices=csc.indices, edge_id=csc.edge_id, node_arrays=arrays[None],
        edge_arrays=edge_arrays[None], name=name,
        source=f'{source} ({given} -> CSC{sorted_note})',
        num_classes=num_classes, overwrite=overwrite, progress=progress,
        extra_meta=extra)


def prepare_pyg(
    data_path: PathLike,
    out_dir: PathLike,
    progress: bool = True,
    overwrite: bool = False,
) -> Union[OnDiskDataset, OnDiskHeteroDataset]:
    r"""Converts a :class:`torch_geometric.data.Data` saved with
    :func:`torch.save` into a dataset directory (a ``HeteroData`` into a
    heterogeneous one; :func:`write_graph`).

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
    typed = is_hetero(data)
    return write_graph(
        data, out_dir, name=data_path.stem,
        source=f"torch_geometric HeteroData from '{data_path.resolve()}' "
               f"(each edge type's edge_index -> CSC, edge_id = original "
               f"edge positions)" if typed else
               f"torch_geometric Data from '{data_path.resolve()}'",
        overwrite=overwrite, progress=progress, where=str(data_path),
        extra_meta={'command': f'pyg-fastload prepare --pyg-data '
                               f'{data_path} --overwrite {out_dir}'})
