r"""Link prediction on a heterogeneous graph: the supervised relation
(``link.edge_type``, e.g. ``('author', 'writes', 'paper')``), its reverse
relation (``link.rev_edge_type``, found when not given: PyG's
``RandomLinkSplit(rev_edge_types=...)``), their edges, and the graph whose
two relations carry only a split's message-passing edges."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import HeteroData

from ..config import SettingError
from ..graph.hetero_topology import EdgeType, HeteroTopology
from ..graph.kind import node_count
from ..storage import CSCGraphStore

__all__ = ['Relation', 'relation_of', 'hetero_with']

Relation = Tuple[EdgeType, Optional[EdgeType]]


def _edge_types(data: Any) -> List[EdgeType]:
    if isinstance(data, HeteroData):
        return [tuple(e) for e in data.edge_types]
    return list(data[1].topology.edge_types)


def relation_edges(data: Any, edge_type: EdgeType) -> Tensor:
    r"""Relation :obj:`edge_type`'s ``[2, E]`` edges in its types' ids."""
    if isinstance(data, HeteroData):
        return data[edge_type].edge_index.long()
    return data[1].topology.relation_topology(edge_type).to_edge_index()


def _keys(edges: Tensor, num_dst: int) -> Tensor:
    return torch.unique(edges[0] * num_dst + edges[1])


def relation_of(data: Any, edge_type: Optional[List[str]],
                rev_edge_type: Optional[List[str]]
                ) -> Tuple[Relation, Tensor, int, int]:
    r"""``((edge_type, reverse), edges, num_dst, num_src)`` of the
    supervised relation of a heterogeneous :obj:`data`; the reverse is
    the relation given, or the one ``(dst, *, src)`` holding exactly the
    flipped edges (:obj:`None` if there is none)."""
    types = _edge_types(data)
    names = ', '.join(str(list(e)) for e in types)
    if edge_type is None:
        raise SettingError('link.edge_type', f"a heterogeneous graph needs "
                           f"the relation to predict, one of: {names}")
    chosen = tuple(edge_type)
    if chosen not in types:
        raise SettingError('link.edge_type', f"{list(chosen)} is not an "
                           f"edge type of the dataset; its edge types: "
                           f"{names}")
    src, _, dst = chosen
    edges = relation_edges(data, chosen)
    num_src, num_dst = node_count(data, src), node_count(data, dst)
    if rev_edge_type is not None:
        reverse: Optional[EdgeType] = tuple(rev_edge_type)
        if reverse not in types or reverse[0] != dst or reverse[2] != src:
            raise SettingError('link.rev_edge_type', f"{list(reverse)} is "
                               f"not an edge type from {dst!r} to {src!r}; "
                               f"the edge types: {names}")
        return (chosen, reverse), edges, num_dst, num_src
    keys = None
    reverse = None
    for other in types:
        if other == chosen or other[0] != dst or other[2] != src:
            continue
        flipped = relation_edges(data, other)
        if flipped.size(1) != edges.size(1):
            continue
        keys = _keys(edges, num_dst) if keys is None else keys
        if torch.equal(keys, _keys(flipped.flip(0), num_dst)):
            reverse = other
            break
    return (chosen, reverse), edges, num_dst, num_src


def hetero_with(data: Any, relation: Relation, edges: Tensor) -> Any:
    r""":obj:`data` (a ``HeteroData`` or heterogeneous stores) whose
    supervised relation holds :obj:`edges` (and its reverse their flips);
    every other relation and the features are shared, not copied."""
    edge_type, reverse = relation
    replaced: Dict[EdgeType, Tensor] = {edge_type: edges}
    if reverse is not None:
        replaced[reverse] = edges.flip(0)
    if isinstance(data, HeteroData):
        out = HeteroData()
        for node_type in data.node_types:
            for key, value in data[node_type].items():
                out[node_type][key] = value
            out[node_type].num_nodes = data[node_type].num_nodes
        for other in data.edge_types:
            out[other].edge_index = replaced.get(
                tuple(other), data[other].edge_index)
        return out
    topology: HeteroTopology = data[1].topology
    num_nodes = {t: topology.num_nodes_of(t) for t in topology.node_types}
    edge_index = {e: replaced.get(e, relation_edges(data, e))
                  for e in topology.edge_types}
    return data[0], CSCGraphStore(
        HeteroTopology.from_relations(num_nodes, edge_index))
