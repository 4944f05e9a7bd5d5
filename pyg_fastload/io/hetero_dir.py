r"""Heterogeneous dataset directories: several node types and edge types.

``meta.json`` has ``"format_version": 2`` and ``"kind": "hetero"`` (readers
of version 1 refuse it as written by a newer pyg-fastload) and declares

.. code-block:: json

    {"node_types": [{"name": "paper", "num_nodes": 736389,
                     "arrays": ["x", "y", "train_mask"]},
                    {"name": "author", "num_nodes": 1134649, "arrays": []}],
     "edge_types": [{"type": ["author", "writes", "paper"],
                     "num_edges": 7145660}, ...],
     "target": "paper", "num_classes": 349, ...}

A node type without features is declared by its node count alone (its
``arrays`` list is empty), never given made-up features. Node array ``a`` of
type ``t`` is the file ``t.a.bin`` (one row per node of ``t``). The edge
types' CSCs lie back to back in ``indptr``, ``indices`` and ``edge_id``, in
the order of ``edge_types`` (the layout of
:class:`~pyg_fastload.graph.HeteroTopology`, so the topology is
memory-mapped as it is): node ``i`` of type ``t`` has the global id
``node_offset[t] + i`` (types in ``node_types`` order); relation ``r =
(s, rel, d)`` owns one CSC segment per ``d`` node, its in-neighbours
(global ids of ``s`` nodes) at ``indices[indptr[seg]:indptr[seg + 1]]``;
``edge_id`` gives every CSC edge's position in the relation's own edge
list.

Edge arrays (e.g. a ``time`` per edge) belong to one relation: edge array
``a`` of relation ``(s, rel, d)`` is the file ``s__rel__d.a.bin``
(:func:`edge_array_key`), one row per edge of the relation **in the
relation's CSC order** (row ``k`` for the relation's ``k``-th CSC edge,
originally its ``edge_id[edge_offset[r] + k]``-th), its ``meta.json`` entry
marked ``"level": "edge"`` as in a homogeneous directory
(:mod:`~pyg_fastload.io.format`), and the relation's ``edge_types`` entry
lists it in its ``"arrays"`` (an entry without ``"arrays"`` has none, so
older directories read as before).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import HeteroData

from ..graph.hetero_topology import EdgeType, HeteroTopology, offsets_of
from ..graph.kind import is_topology
from ..graph.topology import CSCTopology
from . import format as fmt
from .arrays import Source
from .csc_sort import (
    EdgeChunks,
    check_node_count,
    count_in_degrees,
    index_numpy,
    mapped_region,
    scatter_edges,
)
from .format import (
    HETERO_FORMAT_VERSION,
    META_KEYS,
    TOPOLOGY_ARRAYS,
    array_level,
    build_meta,
    check_name,
    classes_arg,
    int_arg,
    is_hetero_dataset_dir,
)
from .reader import (
    check_specs,
    check_topology,
    check_verify,
    count_field,
    fail,
    map_array,
    open_dataset_dir,
    read_meta,
    verify_files,
)
from .staging import Staging
from .writer import cast_labels, write_edge_array

__all__ = ['OnDiskHeteroDataset', 'Relation', 'edge_array_key',
           'open_hetero_dataset_dir', 'write_hetero_dataset_dir',
           'open_node_arrays']

PathLike = Union[str, 'os.PathLike[str]']


@dataclass(repr=False, eq=False)
class OnDiskHeteroDataset:
    r"""An opened heterogeneous dataset directory (every array
    memory-mapped, copy-on-write).

    Args:
        path (pathlib.Path): the directory.
        meta (dict): the parsed ``meta.json``.
        topology (HeteroTopology): every relation, memory-mapped.
        arrays (dict): per node type, its node arrays by name (empty for a
            type without features).
        edge_arrays (dict): per edge type, its edge arrays by name (e.g.
            ``time``; empty for a relation without any), one row per edge
            of the relation in its CSC order.
    """
    path: Path
    meta: Dict[str, Any]
    topology: HeteroTopology
    arrays: Dict[str, Dict[str, Tensor]]
    edge_arrays: Dict[EdgeType, Dict[str, Tensor]] = field(
        default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.meta.get('name', self.path.name))

    @property
    def node_types(self) -> List[str]:
        return list(self.topology.node_types)

    @property
    def edge_types(self) -> List[EdgeType]:
        return list(self.topology.edge_types)

    @property
    def num_nodes(self) -> Dict[str, int]:
        r"""Node count per type (the rows of its node arrays)."""
        if isinstance(self.meta.get('index_space'), dict):  # a part
            return {e['name']: e['num_nodes']
                    for e in self.meta['node_types']}
        return {t: self.topology.num_nodes_of(t) for t in self.node_types}

    @property
    def index_space(self) -> Dict[str, int]:
        r"""Per node type, the ids its nodes have in ``indices``: the node
        count, or for a part of a partition (``pyg-fastload partition``)
        the whole graph's count of the type, so that neighbours the part
        does not hold keep their (new) ids."""
        return {t: self.topology.num_nodes_of(t) for t in self.node_types}

    @property
    def target(self) -> Optional[str]:
        r"""The node type whose labels ``y`` a model learns (``meta.json``'s
        ``target``, else the one type with ``y``, else :obj:`None`)."""
        if self.meta.get('target') is not None:
            return self.meta['target']
        labelled = [t for t, a in self.arrays.items() if 'y' in a]
        return labelled[0] if len(labelled) == 1 else None

    @property
    def num_classes(self) -> Optional[int]:
        value = self.meta.get('num_classes')
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or \
                value < 1:
            raise fail(self.path / 'meta.json', f"'num_classes' is "
                       f"{value!r}, expected a positive int (or none)",
                       're-create the dataset')
        return value

    def array_path(self, node_type: str, name: str) -> Path:
        r"""The raw file of node array :obj:`name` of :obj:`node_type`."""
        return self.path / self.meta['arrays'][f'{node_type}.{name}']['file']

    def to_hetero_data(self) -> Any:
        r"""The dataset as an in-memory
        :class:`~torch_geometric.data.HeteroData` (edges in each relation's
        original order, and so the rows of its edge arrays)."""
        data = HeteroData()
        for node_type in self.node_types:
            data[node_type].num_nodes = self.num_nodes[node_type]
            for key, value in self.arrays[node_type].items():
                data[node_type][key] = value.clone()
        for edge_type in self.edge_types:
            rel = self.topology.relation_topology(edge_type)
            dst = torch.repeat_interleave(
                torch.arange(rel.num_nodes), rel.indptr.diff())
            edge_index = torch.empty((2, rel.num_edges), dtype=torch.long)
            edge_index[0, rel.edge_id] = rel.indices.long()
            edge_index[1, rel.edge_id] = dst
            data[edge_type].edge_index = edge_index
            for key, value in self.edge_arrays.get(edge_type, {}).items():
                rows = torch.empty_like(value)
                rows[rel.edge_id] = value
                data[edge_type][key] = rows
        return data

    def __repr__(self) -> str:
        nodes = ', '.join(f'{t}: {n:,}' for t, n in self.num_nodes.items())
        return (f"{self.__class__.__name__}('{self.name}', nodes={{{nodes}}}"
                f', edge_types={len(self.edge_types)}, '
                f'num_edges={self.topology.num_edges:,}, path='
                f"'{self.path}')")


# ---------------------------------------------------------------- writing --
#: A relation given to :func:`write_hetero_dataset_dir`: its CSC in memory,
#: or its edge list as chunks (:data:`~pyg_fastload.io.csc_sort.EdgeChunks`).
Relation = Union[CSCTopology, EdgeChunks]


def edge_array_key(edge_type: EdgeType, name: str) -> str:
    r"""The ``meta.json`` key of edge array :obj:`name` of relation
    :obj:`edge_type`, and its file's name less ``.bin``:
    ``src__rel__dst.name``."""
    return f"{'__'.join(edge_type)}.{name}"


def _check_types(num_nodes: Dict[str, int],
                 relations: Dict[EdgeType, Relation],
                 node_arrays: Dict[str, Dict[str, Source]],
                 edge_arrays: Dict[EdgeType, Dict[str, Source]]) -> None:
    if not isinstance(num_nodes, dict) or not num_nodes:
        raise ValueError("'num_nodes' must be a non-empty dict of node type "
                         "-> node count")
    for node_type, count in num_nodes.items():
        check_name(node_type, 'node type', "'num_nodes'")
        int_arg(count, f'num_nodes[{node_type!r}]')
    for edge_type, rel in relations.items():
        if not (isinstance(edge_type, tuple) and len(edge_type) == 3 and
                all(isinstance(p, str) and p for p in edge_type)):
            raise ValueError(f"edge type {edge_type!r}: pass a (source, "
                             f"relation, destination) triple of names")
        for end, role in ((edge_type[0], 'source'),
                          (edge_type[2], 'destination')):
            if end not in num_nodes:
                raise ValueError(
                    f"edge type {edge_type}: its {role} node type {end!r} "
                    f"is not in 'num_nodes' ({', '.join(num_nodes)}); "
                    f"declare it with its node count")
        if not is_topology(rel, hetero=False):
            if not callable(rel):
                raise TypeError(
                    f"relations[{edge_type!r}] is a {type(rel).__name__}; "
                    f"pass a CSCTopology or a callable returning an "
                    f"iterable of (src, dst) chunks")
            continue
        segments = num_nodes[edge_type[2]]
        if rel.num_nodes != segments or rel.indptr.numel() != segments + 1:
            raise ValueError(
                f"edge type {edge_type}: its CSC has {rel.num_nodes} "
                f"destination segments, node type {edge_type[2]!r} "
                f"{segments} nodes")
        if int(rel.indptr[-1]) != rel.num_edges or (
                rel.edge_id is not None and
                rel.edge_id.numel() != rel.num_edges):
            raise ValueError(
                f"edge type {edge_type}: its CSC's indptr ends at "
                f"{int(rel.indptr[-1])} for {rel.num_edges} indices (and "
                f"edge ids); pass a consistent CSCTopology")
    stored_as: Dict[str, Tuple[str, str]] = {}  # stored name -> (type, key)
    for node_type, arrays in node_arrays.items():
        if node_type not in num_nodes:
            raise ValueError(f"'node_arrays' has arrays of {node_type!r}, "
                             f"which is not in 'num_nodes'")
        for key in arrays:
            check_name(key, 'node array name', f"'node_arrays[{node_type!r}]'")
            other = stored_as.setdefault(f'{node_type}.{key}',
                                         (node_type, key))
            if other != (node_type, key):  # a '.' in a type's name
                raise ValueError(
                    f"'node_arrays': array {key!r} of {node_type!r} and "
                    f"array {other[1]!r} of {other[0]!r} would both be "
                    f"stored as '{node_type}.{key}'; rename one of them")
    keys = set(stored_as)
    for edge_type, arrays in edge_arrays.items():
        where = f"'edge_arrays[{edge_type!r}]'"
        if edge_type not in relations:
            raise ValueError(f"{where}: {edge_type!r} is not an edge type "
                             f"of 'relations'; give every edge array to "
                             f"its (source, relation, destination) triple")
        if not isinstance(arrays, dict):
            raise TypeError(f"{where} must be a dict of name -> array, got "
                            f"{type(arrays).__name__}")
        for key in arrays:
            check_name(key, 'edge array name', where)
            # the file's name: the relation's names must fit one too
            stored = check_name(edge_array_key(edge_type, key),
                                'edge array file name', where)
            if stored in keys:
                raise ValueError(f"{where}: edge array {key!r} would be "
                                 f"stored as {stored!r}, a node array's "
                                 f"name too; rename the array")
            keys.add(stored)


def _copy_csc(rel: CSCTopology, indices: np.ndarray, edge_id: np.ndarray,
              shift: int) -> None:
    r"""A CSC in memory into its place, in chunks: its sources plus
    :obj:`shift`, and its edge ids (the identity where it has none)."""
    step = fmt.EDGE_CHUNK
    for start in range(0, rel.num_edges, step):
        stop = min(start + step, rel.num_edges)
        indices[start:stop] = rel.indices[start:stop].numpy().astype(
            np.int64) + shift
        edge_id[start:stop] = np.arange(start, stop) if rel.edge_id is None \
            else rel.edge_id[start:stop].numpy()


def _write_relations(out: Path, relations: Dict[EdgeType, Relation],
                     num_nodes: Dict[str, int], space: Dict[str, int],
                     node_offset: Dict[str, int], index_np: Any,
                     progress: bool) -> List[int]:
    r"""Writes ``indptr.bin``, ``indices.bin`` and ``edge_id.bin`` of
    :obj:`relations` into :obj:`out`, back to back, a relation given as
    edge chunks counted and sorted into place
    (:func:`~pyg_fastload.io.csc_sort.count_in_degrees`,
    :func:`~pyg_fastload.io.csc_sort.scatter_edges`; memory: three
    ``int64`` per node of its destination type, and one chunk); returns
    every relation's edge count."""
    files = [out / f'{key}.bin' for key in ('indptr', 'indices', 'edge_id')]
    for file in files[1:]:
        file.touch()
    counts: List[int] = []
    total = 0
    with open(files[0], 'wb') as f:
        f.write(np.zeros(1, dtype=np.int64).data)
        for edge_type, rel in relations.items():
            src, _, dst = edge_type
            try:
                csc = is_topology(rel, hetero=False)
                indptr = rel.indptr.numpy().astype(np.int64) if csc else \
                    count_in_degrees(
                        rel, num_nodes[dst], space[src], progress)
                edges = int(indptr[-1])
                indices = mapped_region(files[1], index_np, total, edges)
                edge_id = mapped_region(files[2], np.int64, total, edges)
                if csc:
                    _copy_csc(rel, indices, edge_id, node_offset[src])
                else:
                    scatter_edges(rel, indptr, space[src], indices, edge_id,
                                  node_offset[src], progress)
            except (TypeError, ValueError) as error:
                raise type(error)(
                    f'relations[{edge_type!r}]: {error} (sources: '
                    f'num_nodes[{src!r}], destinations: num_nodes[{dst!r}])'
                ) from None
            for array in (indices, edge_id):
                if isinstance(array, np.memmap):
                    array.flush()
            del indices, edge_id
            indptr += total
            f.write(indptr[1:].data)
            counts.append(edges)
            total += edges
        f.flush()
        os.fsync(f.fileno())
    for file in files[1:]:
        with open(file, 'rb+') as written:
            os.fsync(written.fileno())
    return counts


def write_hetero_dataset_dir(
    path: PathLike,
    *,
    num_nodes: Dict[str, int],
    relations: Dict[EdgeType, Relation],
    node_arrays: Dict[str, Dict[str, Source]],
    edge_arrays: Optional[Dict[EdgeType, Dict[str, Source]]] = None,
    name: str,
    source: str,
    num_classes: Optional[int] = None,
    target: Optional[str] = None,
    overwrite: bool = False,
    progress: bool = True,
    extra_meta: Optional[Dict[str, Any]] = None,
    verify: str = 'checksum',
    index_space: Optional[Dict[str, int]] = None,
) -> OnDiskHeteroDataset:
    r"""Writes a heterogeneous dataset directory (staged and put in place
    atomically, like :func:`~pyg_fastload.io.write_dataset_dir`) and opens
    it, checking every checksum.

    A relation is given in memory, as a CSC, or as its edge list in chunks,
    which is sorted into place out of core (the two passes of
    :func:`~pyg_fastload.io.csc_from_edge_chunks`, memory: one chunk and
    three ``int64`` per node of its destination type, whatever its edge
    count): within a destination its edges keep their order in the list,
    and ``edge_id`` is their position in it. Either way gives the same
    files (``CSCTopology.from_edge_index`` sorts stably too).

    Args:
        path: the directory to create.
        num_nodes (Dict[str, int]): node count per type (in this order).
        relations (Dict[EdgeType, CSCTopology or callable]): each edge
            type's edges: its CSC over its destination type's nodes, with
            source ids of its source type (``CSCTopology.from_edge_index(
            edge_index, num_dst, num_sources=num_src)``; its ``edge_id``
            maps back to the relation's edge list), or a callable returning
            an iterable of ``(src, dst)`` chunks of type-local ids (1-D
            integer arrays or tensors), called twice and yielding the same
            edges both times.
        node_arrays (Dict[str, Dict[str, Source]]): per node type its
            arrays (``x``, ``y``, masks, ...), one row per node of the type,
            each a tensor, an array or a callable returning row chunks;
            types without features are left out or given ``{}``.
        edge_arrays (Dict[EdgeType, Dict[str, Source]], optional): per
            edge type its edge arrays (e.g. ``time``, ``edge_attr``), each
            with one row per edge of the relation **in the relation's CSC
            order** (permute rows in its edge list's order with its
            :meth:`CSCTopology.csc_order`; a relation given as chunks is
            sorted stably by destination, so a list already sorted by
            destination is in CSC order), marked ``"level": "edge"`` and
            stored as ``src__rel__dst.name.bin``
            (:func:`edge_array_key`).
        name, source: the dataset's name and where it came from.
        num_classes (int, optional): classes of the target's labels.
        target (str, optional): the node type a model classifies.
        overwrite, progress, extra_meta, verify: as for
            :func:`~pyg_fastload.io.write_dataset_dir`.
        index_space (Dict[str, int], optional): per node type, the number
            of ids the relations' source ids of that type range over, at
            least its node count (a part of a partition: the whole graph's
            count; the ids become ``offset[t] + i`` over these counts, and
            ``meta.json`` records them as ``index_space``).
    """
    edge_arrays = dict(edge_arrays or {})
    num_classes = classes_arg(num_classes)
    _check_types(num_nodes, relations, node_arrays, edge_arrays)
    if target is not None and target not in num_nodes:
        raise ValueError(f"'target' = {target!r} is not a node type "
                         f"({', '.join(num_nodes)})")
    for key in extra_meta or {}:
        if key in META_KEYS:
            raise ValueError(f"'extra_meta' may not set the reserved "
                             f"meta.json key {key!r}")
    node_types = list(num_nodes)
    total = sum(int(num_nodes[t]) for t in node_types)
    space = _check_index_space(index_space, num_nodes)
    id_space = dict(num_nodes) if space is None else space
    offsets = offsets_of([id_space[t] for t in node_types]).tolist()
    index_np = index_numpy(offsets[-1])
    path = Path(path).expanduser()
    check_node_count(max([num_nodes[e[2]] for e in relations], default=0),
                     path.parent)
    with Staging(path, overwrite, progress) as st:
        counts = _write_relations(st.dir, relations, num_nodes, id_space,
                                  dict(zip(node_types, offsets)), index_np,
                                  progress)
        num_edges = sum(counts)
        num_segments = sum(num_nodes[e[2]] for e in relations)
        st.adopt('indptr', 'int64', [num_segments + 1])
        st.adopt('indices', np.dtype(index_np).name, [num_edges])
        st.adopt('edge_id', 'int64', [num_edges])
        declared = []
        for node_type in node_types:
            arrays = node_arrays.get(node_type, {})
            for key, value in arrays.items():
                st.write_array(
                    f'{node_type}.{key}', value,
                    expect_rows=num_nodes[node_type],
                    what=f"node array '{key}' of type {node_type!r}",
                    cast=cast_labels if key == 'y' else None)
            declared.append({'name': node_type,
                             'num_nodes': int(num_nodes[node_type]),
                             'arrays': list(arrays)})
        edge_counts = dict(zip(relations, counts))
        for edge_type, arrays in edge_arrays.items():
            for key, value in arrays.items():
                write_edge_array(
                    st, edge_array_key(edge_type, key), value,
                    edge_counts[edge_type],
                    f"edge array '{key}' of edge type {edge_type}",
                    holder='the edge type')
        extra = dict(extra_meta or {})
        extra['kind'] = 'hetero'
        extra['node_types'] = declared
        extra['edge_types'] = [{'type': list(e), 'num_edges': n,
                                'arrays': list(edge_arrays.get(e, {}))}
                               for e, n in zip(relations, counts)]
        if target is not None:
            extra['target'] = target
        if space is not None:
            extra['index_space'] = space
        meta = build_meta(name, total, num_edges, num_classes, source, extra)
        meta['format_version'] = HETERO_FORMAT_VERSION
        st.commit(meta)
    return open_hetero_dataset_dir(path, verify=verify)


def _check_index_space(index_space: Optional[Dict[str, int]],
                       num_nodes: Dict[str, int]) -> Optional[Dict[str, int]]:
    r""":obj:`index_space` of the writer, checked: one count per node
    type, each at least the type's node count."""
    if index_space is None:
        return None
    if not isinstance(index_space, dict) or \
            set(index_space) != set(num_nodes):
        raise ValueError(f"'index_space' must give every node type "
                         f"({', '.join(num_nodes)}) its id count, got "
                         f"{index_space!r}")
    return {t: int_arg(index_space[t], f'index_space[{t!r}]',
                       minimum=num_nodes[t]) for t in num_nodes}


# ---------------------------------------------------------------- reading --
def _declared(meta: Dict[str, Any], meta_file: Path, fix: str
              ) -> Tuple[Dict[str, int], Dict[str, List[str]],
                         List[EdgeType], List[int], List[List[str]]]:
    r"""The node types (counts, arrays) and edge types (edge counts, edge
    arrays) that ``meta.json`` declares, checked."""
    def bad(what: str) -> Exception:
        return fail(meta_file, what, fix)

    def names_of(names: Any, owner: str) -> List[str]:
        if not isinstance(names, list) or not all(
                isinstance(n, str) for n in names):
            raise bad(f"{owner}: 'arrays' is not a list of names")
        return names

    if meta.get('kind') != 'hetero':
        raise bad(f"'kind' is {meta.get('kind')!r}, expected 'hetero' for "
                  f"format_version {HETERO_FORMAT_VERSION}")
    entries = meta.get('node_types')
    if not isinstance(entries, list) or not entries:
        raise bad("'node_types' is missing or not a non-empty list")
    num_nodes: Dict[str, int] = {}
    arrays: Dict[str, List[str]] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise bad(f"'node_types' holds {entry!r}, not an object")
        node_type = entry.get('name')
        try:
            check_name(node_type, 'node type', 'meta.json')
        except ValueError as error:
            raise bad(str(error)) from None
        if node_type in num_nodes:
            raise bad(f'node type {node_type!r} is declared twice')
        num_nodes[node_type] = count_field(entry, 'num_nodes', meta_file,
                                           fix)
        arrays[node_type] = names_of(entry.get('arrays'),
                                     f'node type {node_type!r}')
    edge_types: List[EdgeType] = []
    counts: List[int] = []
    edge_arrays: List[List[str]] = []
    entries = meta.get('edge_types')
    if not isinstance(entries, list):
        raise bad("'edge_types' is missing or not a list")
    for entry in entries:
        triple = entry.get('type') if isinstance(entry, dict) else None
        if not (isinstance(triple, list) and len(triple) == 3 and
                all(isinstance(p, str) for p in triple)):
            raise bad(f"'edge_types' holds {entry!r}, not an object with "
                      f"a 'type' [source, relation, destination]")
        edge_type = tuple(triple)
        for end in (edge_type[0], edge_type[2]):
            if end not in num_nodes:
                raise bad(f'edge type {edge_type} names node type {end!r},'
                          f' which is not declared')
        if edge_type in edge_types:
            raise bad(f'edge type {edge_type} is declared twice')
        edge_types.append(edge_type)
        counts.append(count_field(entry, 'num_edges', meta_file, fix))
        # no 'arrays': written before relations had edge arrays
        edge_arrays.append(names_of(entry.get('arrays', []),
                                    f'edge type {edge_type}'))
    return num_nodes, arrays, edge_types, counts, edge_arrays


def open_hetero_dataset_dir(path: PathLike, verify: str = 'size',
                            progress: bool = False,
                            follow_symlinks: bool = False
                            ) -> OnDiskHeteroDataset:
    r"""Opens a heterogeneous dataset directory
    (:func:`write_hetero_dataset_dir`), memory-mapping every array, with
    the checks of :func:`~pyg_fastload.io.open_dataset_dir` (``verify``:
    ``'none'``, ``'size'``, ``'checksum'``) and, unless ``'none'``, every
    relation's source ids within its source type; every node array has one
    row per node of its type, every edge array one per edge of its
    relation (in ``edge_arrays``)."""
    check_verify(verify)
    path = Path(path).expanduser()
    meta_file = path / 'meta.json'
    meta, fix = read_meta(path, follow_symlinks, HETERO_FORMAT_VERSION)
    num_nodes, names, edge_types, counts, edge_names = _declared(
        meta, meta_file, fix)
    node_types = list(num_nodes)
    total = count_field(meta, 'num_nodes', meta_file, fix)
    num_edges = count_field(meta, 'num_edges', meta_file, fix)
    if total != sum(num_nodes.values()) or num_edges != sum(counts):
        raise fail(meta_file, f"'num_nodes' = {total} and 'num_edges' = "
                   f"{num_edges} are not the sums over the declared types "
                   f"({sum(num_nodes.values())}, {sum(counts)})", fix)
    target = meta.get('target')
    if target is not None and target not in num_nodes:
        raise fail(meta_file, f"'target' = {target!r} is not a declared "
                   f"node type", fix)
    space = meta.get('index_space')  # a part of a partition
    if space is not None:
        try:
            space = _check_index_space(space, num_nodes)
        except (TypeError, ValueError) as error:
            raise fail(meta_file, str(error), fix) from None
    id_space = num_nodes if space is None else space
    id_total = sum(id_space.values())
    specs = check_specs(path, meta, follow_symlinks, fix)
    segments = [num_nodes[e[2]] for e in edge_types]
    expected = {'indptr': ([sum(segments) + 1], ('int64', )),
                'indices': ([num_edges], ('int32', 'int64') if
                            id_total <= 2**31 else ('int64', )),
                'edge_id': ([num_edges], ('int64', ))}
    # every declared array: its key, level, what it is and its rows
    declared: Dict[str, Tuple[str, str, int, str]] = {}

    def declare(owner: str, name: str, key: str,
                entry: Tuple[str, str, int, str]) -> None:
        if key not in specs:
            raise fail(meta_file, f"{owner} declares array {name!r}, "
                       f"which 'arrays' lacks", fix)
        if key in declared:
            raise fail(meta_file, f"{owner} declares array {name!r} as "
                       f"{key!r}, the {declared[key][1]}'s key", fix)
        declared[key] = entry

    for node_type, keys in names.items():
        for key in keys:
            declare(f'node type {node_type!r}', key, f'{node_type}.{key}', (
                'node', f'node array {key!r} of type {node_type!r}',
                num_nodes[node_type],
                f'the type has {num_nodes[node_type]} nodes'))
    for edge_type, count, keys in zip(edge_types, counts, edge_names):
        for key in keys:
            declare(f'edge type {edge_type}', key,
                    edge_array_key(edge_type, key), (
                        'edge', f'edge array {key!r} of edge type '
                        f'{edge_type}', count,
                        f'the edge type has {count} edges'))
    for key, spec in specs.items():
        file = path / spec['file']
        if key in TOPOLOGY_ARRAYS:
            shape, dtypes = expected[key]
            if spec['shape'] != shape or spec['dtype'] not in dtypes:
                raise fail(file, f"meta.json gives {spec['dtype']} "
                           f"{spec['shape']}, expected {' or '.join(dtypes)}"
                           f' {shape}', fix)
            continue
        if key not in declared:
            raise fail(file, f"array {key!r} belongs to no declared node "
                       f"type's or edge type's 'arrays'", fix)
        level, what, rows, whose = declared[key]
        if array_level(spec) != level:
            raise fail(file, f"{what} has \"level\": "
                       f"{array_level(spec)!r} in meta.json, expected "
                       f"{level!r}", fix)
        if spec['shape'][0] != rows:
            raise fail(file, f"{what} has {spec['shape'][0]} rows but "
                       f"{whose}", fix)
    if 'edge_id' not in specs:
        raise fail(meta_file, "no 'edge_id' array", fix)
    verify_files(path, specs, verify, progress, fix)
    mapped = {key: map_array(path, spec, fix) for key, spec in specs.items()}
    check_topology(path, specs, mapped, num_edges, id_total, verify, fix)
    topology = HeteroTopology(
        node_types=node_types, edge_types=edge_types,
        node_offset=offsets_of([id_space[t] for t in node_types]),
        segment_offset=offsets_of(segments), edge_offset=offsets_of(counts),
        indptr=mapped['indptr'], indices=mapped['indices'],
        edge_id=mapped['edge_id'])
    _check_relations(topology, path / specs['indptr']['file'],
                     path / specs['indices']['file'], verify, fix)
    arrays = {t: {k: mapped[f'{t}.{k}'] for k in names[t]}
              for t in node_types}
    edge_arrays = {e: {k: mapped[edge_array_key(e, k)] for k in keys}
                   for e, keys in zip(edge_types, edge_names)}
    return OnDiskHeteroDataset(path=path, meta=meta, topology=topology,
                               arrays=arrays, edge_arrays=edge_arrays)


def _check_relations(topo: HeteroTopology, indptr_file: Path,
                     indices_file: Path, verify: str, fix: str) -> None:
    r"""Each relation's segments hold exactly its edges and, unless
    ``verify='none'``, only nodes of its source type."""
    starts = topo.indptr[topo.segment_offset]
    if not torch.equal(starts, topo.edge_offset):
        r = int((starts != topo.edge_offset).nonzero()[0])
        raise fail(indptr_file, f"edge type {topo.edge_types[r]} starts at "
                   f"edge {int(starts[r])}, but the edge counts of "
                   f"meta.json place it at {int(topo.edge_offset[r])}", fix)
    if verify == 'none':
        return
    for r, edge_type in enumerate(topo.edge_types):
        block = topo.indices[int(topo.edge_offset[r]):
                             int(topo.edge_offset[r + 1])]
        if not block.numel():
            continue
        src = int(topo.src_type[r])
        low, high = int(topo.node_offset[src]), int(topo.node_offset[src + 1])
        if int(block.min()) < low or int(block.max()) >= high:
            raise fail(indices_file, f"edge type {edge_type} has source ids "
                       f"outside its source type {edge_type[0]!r} (global "
                       f"ids [{low}, {high}))", fix)
        ids = topo.edge_id[int(topo.edge_offset[r]):
                           int(topo.edge_offset[r + 1])]
        if int(ids.min()) < 0 or int(ids.max()) >= block.numel():
            raise fail(indices_file.with_name('edge_id.bin'), f"edge type "
                       f"{edge_type} has edge ids outside [0, "
                       f"{block.numel()})", fix)


def open_node_arrays(path: PathLike, verify: str = 'size'
                     ) -> Dict[Tuple[Optional[str], str], Tensor]:
    r"""Every node array of a dataset directory of either kind
    (memory-mapped), by ``(node type, name)``: the node type is
    :obj:`None` in a homogeneous one (a feature store's group)."""
    if is_hetero_dataset_dir(Path(path).expanduser()):
        dataset = open_hetero_dataset_dir(path, verify=verify)
        return {(node_type, name): value
                for node_type, arrays in dataset.arrays.items()
                for name, value in arrays.items()}
    return {(None, name): value for name, value in
            open_dataset_dir(path, verify=verify).arrays.items()}
