r"""The typed layout of a dataset directory (several node and edge types),
the part of the format that only a heterogeneous graph has: its relations
written back to back, and the node and edge types ``meta.json`` declares.
:func:`~pyg_fastload.io.write_dataset_dir` and
:func:`~pyg_fastload.io.open_dataset_dir` serve both kinds with it.

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
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np
import torch

from ..graph.hetero_topology import EdgeType, HeteroTopology
from ..graph.kind import is_topology
from ..graph.topology import CSCTopology
from . import format as fmt
from .arrays import Source
from .csc_sort import (
    EdgeChunks,
    count_in_degrees,
    mapped_region,
    scatter_edges,
)
from .format import (
    HETERO_FORMAT_VERSION,
    check_name,
    count_field,
    fail,
    int_arg,
)

__all__ = ['Relation', 'edge_array_key', 'check_types', 'check_index_space',
           'write_relations', 'declared_types', 'check_relations']

#: A relation given to :func:`~pyg_fastload.io.write_dataset_dir`: its CSC
#: in memory, or its edge list as chunks
#: (:data:`~pyg_fastload.io.csc_sort.EdgeChunks`).
Relation = Union[CSCTopology, EdgeChunks]


def edge_array_key(edge_type: EdgeType, name: str) -> str:
    r"""The ``meta.json`` key of edge array :obj:`name` of relation
    :obj:`edge_type`, and its file's name less ``.bin``:
    ``src__rel__dst.name``."""
    return f"{'__'.join(edge_type)}.{name}"


def check_types(num_nodes: Dict[str, int],
                 relations: Dict[EdgeType, Relation],
                 node_arrays: Dict[str, Dict[str, Source]],
                 edge_arrays: Dict[EdgeType, Dict[str, Source]]) -> None:
    r"""The node types, the relations, and that every node (edge) array
    belongs to one of them."""
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
    for node_type in node_arrays:
        if node_type not in num_nodes:
            raise ValueError(f"'node_arrays' has arrays of {node_type!r}, "
                             f"which is not in 'num_nodes'")
    for edge_type in edge_arrays:
        if edge_type not in relations:
            raise ValueError(f"'edge_arrays[{edge_type!r}]': {edge_type!r} "
                             f"is not an edge type of 'relations'; give "
                             f"every edge array to its (source, relation, "
                             f"destination) triple")


def copy_csc(rel: CSCTopology, indices: np.ndarray, edge_id: np.ndarray,
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


def write_relations(out: Path, relations: Dict[EdgeType, Relation],
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
                    copy_csc(rel, indices, edge_id, node_offset[src])
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


def check_index_space(index_space: Optional[Dict[str, int]],
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


def declared_types(meta: Dict[str, Any], meta_file: Path, fix: str
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


def check_relations(topo: HeteroTopology, indptr_file: Path,
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
