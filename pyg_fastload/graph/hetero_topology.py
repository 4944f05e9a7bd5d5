r"""A heterogeneous graph's topology as one CSC over all relations, so a
sampler draws every relation of a hop in one vectorized call.

Node ids are *global*: node ``i`` of type ``t`` is ``node_offset[t] + i``.
Relation ``r = (src, rel, dst)`` owns the segments ``segment_offset[r] +
j``, one per ``dst`` node ``j``: the in-neighbours of node ``j`` along
``r`` are ``indices[indptr[s]:indptr[s + 1]]`` (global ids of ``src``
nodes) with ``s = segment_offset[r] + j``. Edge positions of ``r`` run
from ``edge_offset[r]``; ``edge_id`` maps them back to the relation's own
``edge_index`` columns.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor

from .ranges import expand_ranges
from .topology import (CSCTopology, device_copy, index_dtype_for,
                       moved_arrays)

__all__ = ['HeteroTopology', 'EdgeType', 'end_types', 'offsets_of']

EdgeType = Tuple[str, str, str]


def end_types(edge_type: Optional[EdgeType]
              ) -> Tuple[Optional[str], Optional[str]]:
    r"""The source and destination node types of :obj:`edge_type`
    (:obj:`None` for both: a homogeneous graph's edges)."""
    if edge_type is None:
        return None, None
    return edge_type[0], edge_type[-1]


def offsets_of(sizes: List[int]) -> Tensor:
    r"""``[0, s0, s0 + s1, ...]``: where each of :obj:`sizes` starts."""
    out = torch.zeros(len(sizes) + 1, dtype=torch.long, device='cpu')
    if sizes:
        torch.cumsum(torch.tensor(sizes, dtype=torch.long, device='cpu'), 0,
                     out=out[1:])
    return out


@dataclass
class HeteroTopology:
    r"""Every relation's in-edges, grouped by relation and destination node
    (see the module docstring for the id layout).

    Args:
        node_types (List[str]): the node types, in id order.
        edge_types (List[Tuple[str, str, str]]): the relations, in segment
            order.
        node_offset (torch.Tensor): where each node type's global ids
            start (one entry per type, then the total).
        segment_offset (torch.Tensor): where each relation's segments
            (one per destination node) start.
        edge_offset (torch.Tensor): where each relation's edges start.
        indptr (torch.Tensor): ``int64`` offsets of every segment's edges.
        indices (torch.Tensor): global source id of every edge.
        edge_id (torch.Tensor): every edge's column in its relation's own
            ``edge_index``.
        edge_weight (torch.Tensor, optional): a weight per edge, used by
            weighted sampling.
    """
    node_types: List[str]
    edge_types: List[EdgeType]
    node_offset: Tensor
    segment_offset: Tensor
    edge_offset: Tensor
    indptr: Tensor
    indices: Tensor
    edge_id: Tensor
    edge_weight: Optional[Tensor] = None
    #: Copies on other devices made by :meth:`to`, one per device.
    _copies: Dict[torch.device, 'HeteroTopology'] = field(
        default_factory=dict, repr=False, compare=False)

    #: The arrays :meth:`to` moves (the type tables follow them).
    ARRAYS = ('node_offset', 'segment_offset', 'edge_offset', 'indptr',
              'indices', 'edge_id', 'edge_weight')

    def __post_init__(self) -> None:
        index = {t: i for i, t in enumerate(self.node_types)}
        device = self.indptr.device
        src = [index[e[0]] for e in self.edge_types]
        dst = [index[e[2]] for e in self.edge_types]
        #: Source and destination node type (index) of every relation.
        self.src_type = torch.tensor(src, dtype=torch.long, device=device)
        self.dst_type = torch.tensor(dst, dtype=torch.long, device=device)
        # Relations by destination type: those of type t are
        # dst_rels[dst_rel_ptr[t]:dst_rel_ptr[t + 1]] (made here from the
        # types, so a copy on any device gets them without a kernel).
        self.dst_rels = torch.tensor(
            sorted(range(len(dst)), key=dst.__getitem__), dtype=torch.long,
            device=device)
        self.dst_rel_ptr = offsets_of(
            [dst.count(t) for t in range(len(self.node_types))]).to(device)

    @property
    def num_nodes(self) -> int:
        r"""Nodes of all types (the size of the global id space)."""
        return int(self.node_offset[-1])

    @property
    def num_edges(self) -> int:
        return int(self.indices.numel())

    @property
    def device(self) -> torch.device:
        r"""Where the arrays live (where a sampler of this topology
        runs)."""
        return self.indptr.device

    def nbytes(self) -> int:
        r"""Bytes of the arrays (what a copy to another device takes)."""
        return sum(getattr(self, name).numel() *
                   getattr(self, name).element_size() for name in self.ARRAYS
                   if getattr(self, name) is not None)

    def to(self, device: Union[str, torch.device],
           reserve_bytes: int = 0) -> 'HeteroTopology':
        r"""This topology on :obj:`device`, as
        :meth:`CSCTopology.to <pyg_fastload.CSCTopology.to>` copies one
        (keeping :obj:`reserve_bytes` free): a sampler of the copy samples
        there."""
        return device_copy(self, device, lambda to: HeteroTopology(
            node_types=list(self.node_types),
            edge_types=list(self.edge_types),
            **moved_arrays(self, to, self.ARRAYS)), reserve_bytes)

    def num_nodes_of(self, node_type: str) -> int:
        t = self.node_types.index(node_type)
        return int(self.node_offset[t + 1] - self.node_offset[t])

    def num_edges_of(self, edge_type: EdgeType) -> int:
        r"""Edges of relation :obj:`edge_type`."""
        r = self.edge_types.index(tuple(edge_type))
        return int(self.edge_offset[r + 1] - self.edge_offset[r])

    def node_type_of(self, nodes: Tensor) -> Tensor:
        r"""The type index of every global node id."""
        return torch.bucketize(nodes, self.node_offset[1:], right=True)

    def relation_of(self, positions: Tensor) -> Tensor:
        r"""The relation index of every edge position."""
        return torch.bucketize(positions, self.edge_offset[1:], right=True)

    def segments(self, nodes: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        r"""``(segment, relation, owner)`` for every relation into every
        node of :obj:`nodes` (global ids): grouped by node in the order of
        :obj:`nodes`, ``owner`` the position of the node in :obj:`nodes`."""
        types = self.node_type_of(nodes)
        return self.typed_segments(types, nodes - self.node_offset[types])

    def typed_segments(self, types: Tensor, rows: Tensor
                       ) -> Tuple[Tensor, Tensor, Tensor]:
        r"""As :meth:`segments`, for nodes given by their type (index)
        and their row among the type's destination segments (a part of a
        partition holds some rows of each type, its sources keep the whole
        graph's ids)."""
        first = self.dst_rel_ptr[types]
        count = self.dst_rel_ptr[types + 1] - first
        owner = torch.repeat_interleave(
            torch.arange(types.numel(), device=types.device), count)
        relation = self.dst_rels[expand_ranges(first, count)]
        segment = self.segment_offset[relation] + rows[owner]
        return segment, relation, owner

    def relation_topology(self, edge_type: EdgeType) -> CSCTopology:
        r"""Relation :obj:`edge_type` alone, in its types' own ids."""
        r = self.edge_types.index(edge_type)
        seg = slice(int(self.segment_offset[r]),
                    int(self.segment_offset[r + 1]) + 1)
        edges = slice(int(self.edge_offset[r]), int(self.edge_offset[r + 1]))
        src = int(self.src_type[r])
        return CSCTopology(
            indptr=self.indptr[seg] - self.indptr[seg.start],
            indices=self.indices[edges] - self.node_offset[src],
            num_nodes=int(self.segment_offset[r + 1] - self.segment_offset[r]),
            edge_id=self.edge_id[edges],
            edge_weight=None if self.edge_weight is None
            else self.edge_weight[edges])

    def homogeneous_view(self) -> CSCTopology:
        r"""Every relation's in-edges merged per node: the CSC of the
        homogeneous graph over all global ids (node ``v``'s in-neighbours
        along each relation into its type, relation by relation), what
        partitioners run on (as PyG's and DistDGL's do)."""
        segment, _, owner = self.segments(torch.arange(self.num_nodes))
        begin = self.indptr[segment]
        degree = self.indptr[segment + 1] - begin
        indptr = torch.zeros(self.num_nodes + 1, dtype=torch.long)
        indptr[1:].index_add_(0, owner, degree)
        torch.cumsum(indptr, 0, out=indptr)
        del segment, owner
        indices = self.indices[expand_ranges(begin, degree)]
        return CSCTopology(indptr, indices, self.num_nodes)

    def share_memory_(self) -> 'HeteroTopology':
        r"""Moves every array to shared memory (for worker processes), the
        offsets too: pickling an array still private moves it, under any
        thread sampling from it."""
        for value in vars(self).values():
            if isinstance(value, Tensor):
                value.share_memory_()
        return self

    @classmethod
    def from_relations(
        cls,
        num_nodes: Dict[str, int],
        edge_index: Dict[EdgeType, Tensor],
        edge_weight: Optional[Dict[EdgeType, Tensor]] = None,
    ) -> 'HeteroTopology':
        r"""Builds the topology from each relation's ``[2, num_edges]``
        ``edge_index`` (sources in row 0, in the source type's ids)."""
        node_types = list(num_nodes)
        edge_types = [tuple(e) for e in edge_index]
        for edge_type in edge_types:
            if len(edge_type) != 3:
                raise ValueError(f"edge type {edge_type!r} must be a "
                                 f"(source, relation, destination) triple")
            for end, name in ((edge_type[0], 'source'),
                              (edge_type[2], 'destination')):
                if end not in num_nodes:
                    raise ValueError(
                        f"edge type {edge_type}: its {name} node type "
                        f"{end!r} is not a node type of the graph "
                        f"({', '.join(map(repr, node_types))}); add its "
                        f"nodes (data[{end!r}].num_nodes) or drop the edges")
        weighted = edge_weight is not None
        relations = {}
        for edge_type in edge_types:
            src, _, dst = edge_type
            weight = edge_weight[edge_type] if weighted else None
            try:
                relations[edge_type] = CSCTopology.from_edge_index(
                    edge_index[edge_type], num_nodes[dst], weight,
                    num_sources=num_nodes[src])
            except (TypeError, ValueError) as error:
                raise ValueError(f"edge type {edge_type} (from {src!r} to "
                                 f"{dst!r}): {error}") from None
        return cls.from_csc(num_nodes, relations)

    @classmethod
    def from_csc(cls, num_nodes: Dict[str, int],
                 relations: Dict[EdgeType, CSCTopology]) -> 'HeteroTopology':
        r"""Builds the topology from each relation's CSC (its columns
        some destination nodes, e.g. a part's rows, its sources in the ids
        of the source type's :obj:`num_nodes`); every relation weighted or
        none."""
        node_types = list(num_nodes)
        edge_types = list(relations)
        node_offset = offsets_of([num_nodes[t] for t in node_types])
        weighted = bool(relations) and all(
            csc.edge_weight is not None for csc in relations.values())
        parts = {'indptr': [torch.zeros(1, dtype=torch.long)], 'indices': [],
                 'edge_id': [], 'edge_weight': []}
        for edge_type, csc in relations.items():
            shift = parts['indptr'][-1][-1]
            parts['indptr'].append(csc.indptr[1:] + shift)
            parts['indices'].append(
                csc.indices.long() + node_offset[node_types.index(
                    edge_type[0])])
            parts['edge_id'].append(
                torch.arange(csc.num_edges) if csc.edge_id is None
                else csc.edge_id.long())
            if weighted:
                parts['edge_weight'].append(csc.edge_weight)
        cat = {k: torch.cat(v) if v else torch.empty(0, dtype=torch.long)
               for k, v in parts.items()}
        total_nodes = int(node_offset[-1])
        return cls(
            node_types=node_types, edge_types=edge_types,
            node_offset=node_offset,
            segment_offset=offsets_of([c.num_nodes
                                       for c in relations.values()]),
            edge_offset=offsets_of([c.num_edges
                                    for c in relations.values()]),
            indptr=cat['indptr'],
            indices=cat['indices'].to(index_dtype_for(max(total_nodes - 1,
                                                          0))),
            edge_id=cat['edge_id'],
            edge_weight=cat['edge_weight'].double() if weighted else None)
