r"""Writing a dataset directory of either kind: arrays streamed chunk by
chunk into a staging directory, hashed, and renamed into place once
complete."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple, Union

import numpy as np
import torch

from ..graph.hetero_topology import EdgeType, offsets_of
from ..graph.topology import index_dtype_for
from .arrays import Source
from .csc_sort import check_node_count, index_numpy
from .format import (
    HETERO_FORMAT_VERSION,
    META_KEYS,
    TOPOLOGY_ARRAYS,
    DatasetFormatError,
    build_meta,
    check_name,
    classes_arg,
    int_arg,
)
from .reader import OnDiskDataset, OnDiskHeteroDataset, open_dataset_dir
from .staging import Staging
from .typed_layout import (
    Relation,
    check_index_space,
    check_types,
    edge_array_key,
    write_relations,
)

__all__ = ['label_classes', 'write_dataset_dir']

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


def _check_kind(typed: bool, indptr: Optional[Source], indices: Optional[
        Source], edge_id: Optional[Source], relations: Any,
        target: Optional[str]) -> None:
    r"""Refuses the arguments of the other kind: a homogeneous graph
    (:obj:`num_nodes` an int) is given by ``indptr``/``indices``, a typed
    one (:obj:`num_nodes` a dict of node type -> count) by
    ``relations``."""
    given = {'indptr': indptr, 'indices': indices, 'edge_id': edge_id,
             'relations': relations, 'target': target}
    if typed:
        wrong = [k for k in ('indptr', 'indices', 'edge_id')
                 if given[k] is not None]
        if wrong or relations is None:
            raise ValueError(
                "'num_nodes' is a dict of node type -> count, so the graph "
                "is heterogeneous: pass its edges as 'relations' (edge type "
                "-> CSCTopology or edge chunks)"
                + (f", not {', '.join(map(repr, wrong))}" if wrong else ''))
        return
    wrong = [k for k in ('relations', 'target') if given[k] is not None]
    if wrong or indptr is None or indices is None:
        raise ValueError(
            "'num_nodes' is a count, so the graph is homogeneous: pass its "
            "CSC as 'indptr' and 'indices'"
            + (f", not {', '.join(map(repr, wrong))} (give 'num_nodes' as "
               f"a dict of node type -> count for a heterogeneous graph)"
               if wrong else ''))


def _check_array_names(node_arrays: Dict[Any, Any],
                       edge_arrays: Dict[Any, Any]) -> None:
    r"""Every array's name, and the name it is stored under (its file's,
    less ``.bin``), of node and edge arrays by owner (a node or edge type,
    :obj:`None` for a homogeneous graph): valid, none a topology array's
    and no two alike."""
    stored_as: Dict[str, str] = {}  # stored name -> which array
    for level, groups in (('node', node_arrays), ('edge', edge_arrays)):
        for owner, arrays in groups.items():
            where = f"'{level}_arrays'" if owner is None else \
                f"'{level}_arrays[{owner!r}]'"
            if not isinstance(arrays, dict):
                raise TypeError(f"{where} must be a dict of name -> array "
                                f"(e.g. {{'time': times}}), got "
                                f'{type(arrays).__name__}')
            for key in arrays:
                check_name(key, f'{level} array name', where)
                stored = key if owner is None else f'{owner}.{key}' \
                    if level == 'node' else edge_array_key(owner, key)
                # the relation's names must fit a file's name too
                check_name(stored, f'{level} array file name', where)
                if stored in TOPOLOGY_ARRAYS:
                    raise ValueError(
                        f"invalid {level} array name {key!r} in {where}: "
                        f"{', '.join(TOPOLOGY_ARRAYS)} are the topology's; "
                        f"pass them as arguments or rename the array")
                what = f'{level} array {key!r}' + (
                    '' if owner is None else f' of {owner!r}')
                if stored in stored_as:
                    raise ValueError(
                        f'{where}: {what} and {stored_as[stored]} would '
                        f'both be stored as {stored!r}; rename one of them')
                stored_as[stored] = what


def _write_csc(st: Staging, num_nodes: int, id_space: int, indptr: Source,
               indices: Source, edge_id: Optional[Source]) -> int:
    r"""Writes a homogeneous graph's CSC into :obj:`st`, checking it chunk
    by chunk; returns its edge count."""
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

    st.write_array('indptr', indptr, expect_rows=num_nodes + 1,
                   what="'indptr'", check=check_indptr,
                   cast=_cast_to(np.dtype(np.int64), "'indptr'"),
                   default_dtype='int64')
    num_edges = state['last']
    st.write_array('indices', indices, expect_rows=num_edges,
                   what="'indices'", check=check_range('indices', id_space),
                   cast=_cast_to(index_np, "'indices'"),
                   default_dtype=index_np.name)
    if edge_id is not None:
        st.write_array('edge_id', edge_id, expect_rows=num_edges,
                       what="'edge_id'", check=check_range('edge_id',
                                                           num_edges),
                       cast=_cast_to(np.dtype(np.int64), "'edge_id'"),
                       default_dtype='int64')
    return num_edges


def write_dataset_dir(
    path: PathLike,
    *,
    num_nodes: Union[int, Dict[str, int]],
    node_arrays: Dict[str, Any],
    indptr: Optional[Source] = None,
    indices: Optional[Source] = None,
    edge_id: Optional[Source] = None,
    relations: Optional[Dict[EdgeType, Relation]] = None,
    edge_arrays: Optional[Dict[Any, Any]] = None,
    name: str,
    source: str,
    num_classes: Optional[int] = None,
    target: Optional[str] = None,
    overwrite: bool = False,
    progress: bool = True,
    extra_meta: Optional[Dict[str, Any]] = None,
    verify: str = 'checksum',
    index_space: Union[None, int, Dict[str, int]] = None,
) -> Union[OnDiskDataset, OnDiskHeteroDataset]:
    r"""Writes a dataset directory of either kind (staged, and put in
    place atomically once complete) and opens it with
    :func:`open_dataset_dir`, re-reading every file against its checksum
    so a bad write is caught at once.

    The kind follows :obj:`num_nodes`: a count gives a homogeneous graph
    (its CSC in ``indptr``/``indices``/``edge_id``), a dict of node type ->
    count a heterogeneous one (format version 2, its edges in
    ``relations``; :mod:`~pyg_fastload.io.typed_layout`). Every array is
    streamed to disk in row chunks of about 64 MiB, so memory-mapped inputs
    or chunk iterators larger than memory are fine. ``indptr`` is stored
    as ``int64``, ``indices`` as ``int32`` (``int64`` from :math:`2^{31}`
    ids on), ``edge_id`` as ``int64`` and an integer ``y`` as ``int64``;
    other node and edge arrays keep their dtype.

    A relation is given in memory, as a CSC, or as its edge list in chunks,
    sorted into place out of core (the two passes of
    :func:`~pyg_fastload.io.csc_from_edge_chunks`, memory: one chunk and
    three ``int64`` per node of its destination type): within a
    destination its edges keep their order in the list, and ``edge_id`` is
    their position in it. Either way gives the same files.

    Args:
        path (str or os.PathLike): the dataset directory to create.
        num_nodes (int or Dict[str, int]): the node count :math:`N`, or the
            node count per type (in this order).
        node_arrays (dict): node arrays by name (``x``, ``y``,
            ``train_mask``, ...), one row per node; of a heterogeneous
            graph, per node type its arrays by name (types without features
            left out or given ``{}``). A value may be a tensor, a
            (memory-mapped) numpy array or a callable returning an iterable
            of row chunks.
        indptr, indices (Source, optional): a homogeneous graph's CSC
            offsets ``[N + 1]`` and the source node of every CSC edge
            ``[E]``.
        edge_id (Source, optional): the original position of every CSC
            edge of a homogeneous graph; :obj:`None` means the CSC order is
            the original order. (default: :obj:`None`)
        relations (Dict[EdgeType, CSCTopology or callable], optional): a
            heterogeneous graph's edges by type: its CSC over its
            destination type's nodes with source ids of its source type
            (``CSCTopology.from_edge_index(edge_index, num_dst,
            num_sources=num_src)``), or a callable returning an iterable of
            ``(src, dst)`` chunks of type-local ids, called twice and
            yielding the same edges both times.
        edge_arrays (dict, optional): edge arrays by name (e.g. ``time``,
            ``edge_attr``; of a heterogeneous graph, per edge type), one
            row per edge **in CSC order** (permute rows in edge-list order
            with :meth:`CSCTopology.csc_order`); marked ``"level": "edge"``
            in ``meta.json``. A name may not be a node array's too.
            (default: :obj:`None`)
        name (str): the dataset's name.
        source (str): where the data came from (free-form).
        num_classes (int, optional): number of classes. (default:
            :obj:`None`)
        target (str, optional): of a heterogeneous graph, the node type a
            model classifies. (default: :obj:`None`)
        overwrite (bool, optional): replace an existing dataset directory.
            (default: :obj:`False`)
        progress (bool, optional): show progress bars. (default: :obj:`True`)
        extra_meta (dict, optional): more JSON-serialisable keys for
            ``meta.json``. (default: :obj:`None`)
        verify (str, optional): how the written directory is checked when
            it is opened (see :func:`open_dataset_dir`).
            (default: :obj:`'checksum'`)
        index_space (int or Dict[str, int], optional): the ids that
            ``indices`` range over when larger than the node count (per
            node type for a heterogeneous graph): the rows are some nodes
            of a larger graph (a partition's part), their neighbours named
            by their ids in that graph. (default: :obj:`None`)

    Example:
        >>> import torch
        >>> from pyg_fastload.io import write_dataset_dir
        >>> ds = write_dataset_dir(
        ...     'tiny-dir', num_nodes=3, indptr=torch.tensor([0, 1, 2, 2]),
        ...     indices=torch.tensor([1, 2]),
        ...     node_arrays={'x': torch.randn(3, 4)}, name='tiny',
        ...     source='example', progress=False)
        >>> ds.num_nodes, ds.num_edges
        (3, 2)
    """
    typed = isinstance(num_nodes, dict)
    _check_kind(typed, indptr, indices, edge_id, relations, target)
    if not isinstance(name, str) or not name:
        raise ValueError(f"invalid 'name' = {name!r}: pass a non-empty str")
    if not isinstance(source, str):
        raise TypeError(f"'source' must be a str, got "
                        f'{type(source).__name__}')
    num_classes = classes_arg(num_classes)
    edge_arrays = {} if edge_arrays is None else edge_arrays
    if typed:
        edge_arrays = dict(edge_arrays)
        check_types(num_nodes, relations, node_arrays, edge_arrays)
        _check_array_names(node_arrays, edge_arrays)
        if target is not None and target not in num_nodes:
            raise ValueError(f"'target' = {target!r} is not a node type "
                             f"({', '.join(num_nodes)})")
        space = check_index_space(index_space, num_nodes)
        id_space: Any = dict(num_nodes) if space is None else space
        # one group of node arrays per type (None: the homogeneous graph's)
        node_groups = {t: (node_arrays.get(t, {}), int(num_nodes[t]))
                       for t in num_nodes}
    else:
        num_nodes = int_arg(num_nodes, 'num_nodes')
        _check_array_names({None: node_arrays}, {None: edge_arrays})
        space = None if index_space is None else int_arg(
            index_space, 'index_space', minimum=num_nodes)
        id_space = num_nodes if space is None else space
        node_groups = {None: (node_arrays, num_nodes)}
    for key in extra_meta or {}:
        if key in META_KEYS:
            raise ValueError(f"'extra_meta' may not set the reserved "
                             f"meta.json key {key!r}")
    path = Path(path).expanduser()
    if typed:
        check_node_count(max([num_nodes[e[2]] for e in relations],
                             default=0), path.parent)
    with Staging(path, overwrite, progress) as st:
        if typed:
            node_types = list(num_nodes)
            offsets = offsets_of([id_space[t] for t in node_types]).tolist()
            index_np = index_numpy(offsets[-1])
            counts = write_relations(st.dir, relations, num_nodes, id_space,
                                     dict(zip(node_types, offsets)),
                                     index_np, progress)
            num_edges = sum(counts)
            st.adopt('indptr', 'int64',
                     [sum(num_nodes[e[2]] for e in relations) + 1])
            st.adopt('indices', np.dtype(index_np).name, [num_edges])
            st.adopt('edge_id', 'int64', [num_edges])
            edge_counts = dict(zip(relations, counts))
        else:
            num_edges = _write_csc(st, num_nodes, id_space, indptr, indices,
                                   edge_id)
            edge_counts = {None: num_edges}
            edge_arrays = {None: edge_arrays}
        for node_type, (arrays, rows) in node_groups.items():
            of = '' if node_type is None else f' of type {node_type!r}'
            for key, value in arrays.items():
                st.write_array(key if node_type is None else
                               f'{node_type}.{key}', value, expect_rows=rows,
                               what=f"node array '{key}'{of}",
                               cast=cast_labels if key == 'y' else None)
        for edge_type, arrays in edge_arrays.items():
            of = '' if edge_type is None else f' of edge type {edge_type}'
            for key, value in arrays.items():
                spec = st.write_array(
                    key if edge_type is None else
                    edge_array_key(edge_type, key), value,
                    what=f"edge array '{key}'{of}")
                if spec['shape'][0] != edge_counts[edge_type]:
                    raise ValueError(
                        f"edge array '{key}'{of} ({spec['file']}) has "
                        f"{spec['shape'][0]} rows but the "
                        f"{'graph' if edge_type is None else 'edge type'} "
                        f"has {edge_counts[edge_type]} edges; pass one row "
                        f"per edge, in CSC order")
                spec['level'] = 'edge'
        st.commit(_meta(typed, name, source, num_classes, target, space,
                        extra_meta, node_groups, edge_counts, edge_arrays,
                        num_edges))
    return open_dataset_dir(path, verify=verify)


def _meta(typed: bool, name: str, source: str, num_classes: Optional[int],
          target: Optional[str], space: Any,
          extra_meta: Optional[Dict[str, Any]],
          node_groups: Dict[Any, Tuple[Dict[str, Any], int]],
          edge_counts: Dict[Any, int], edge_arrays: Dict[Any, Any],
          num_edges: int) -> Dict[str, Any]:
    r"""The ``meta.json`` of a written directory (less its ``arrays``)."""
    extra = dict(extra_meta or {})
    if typed:
        extra['kind'] = 'hetero'
        extra['node_types'] = [{'name': t, 'num_nodes': n,
                                'arrays': list(arrays)}
                               for t, (arrays, n) in node_groups.items()]
        extra['edge_types'] = [{'type': list(e), 'num_edges': n,
                                'arrays': list(edge_arrays.get(e, {}))}
                               for e, n in edge_counts.items()]
        if target is not None:
            extra['target'] = target
    if space is not None:
        extra['index_space'] = space
    total = sum(n for _, n in node_groups.values())
    meta = build_meta(name, total, num_edges, num_classes, source, extra)
    if typed:
        meta['format_version'] = HETERO_FORMAT_VERSION
    return meta
