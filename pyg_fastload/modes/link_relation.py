r"""Link prediction on a heterogeneous graph: the supervised relation
(``link.edge_type``, e.g. ``('author', 'writes', 'paper')``), its reverse
relation (``link.rev_edge_type``, found when not given: PyG's
``RandomLinkSplit(rev_edge_types=...)``), their edges, and the graph whose
two relations carry only a split's message-passing edges."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor

from ..config import SettingError
from ..graph.hetero_topology import EdgeType
from ..graph.view import GraphView

__all__ = ['Relation', 'relation_of', 'hetero_with']

Relation = Tuple[EdgeType, Optional[EdgeType]]


def _keys(edges: Tensor, num_dst: int) -> Tensor:
    return torch.unique(edges[0] * num_dst + edges[1])


def relation_of(data: Any, edge_type: Optional[List[str]],
                rev_edge_type: Optional[List[str]]
                ) -> Tuple[Relation, Tensor, int, int]:
    r"""``((edge_type, reverse), edges, num_dst, num_src)`` of the
    supervised relation of a heterogeneous :obj:`data`; the reverse is
    the relation given, or the one ``(dst, *, src)`` holding exactly the
    flipped edges (:obj:`None` if there is none)."""
    view = GraphView.of(data)
    types = view.edge_types()
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
    edges = view.edges(chosen)
    num_src, num_dst = view.num_nodes(src), view.num_nodes(dst)
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
        flipped = view.edges(other)
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
    return GraphView.of(data).with_edges(replaced)
