r"""A graph read the same way whatever form it came in
(:class:`GraphView`): a ``Data``, a ``HeteroData`` or a
``(FeatureStore, GraphStore)`` pair of this package's stores. The modes,
the link split and inference ask it for node counts, relations, edges and
node attributes instead of branching on the form themselves."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from torch import Tensor
from torch_geometric.data import Data, HeteroData

from .hetero_topology import EdgeType, HeteroTopology
from .kind import GraphInput, graph_input, stores_of
from .topology import CSCTopology

__all__ = ['GraphView']

#: Relations' edges by edge type (:obj:`None`: a homogeneous graph's).
Edges = Dict[Optional[EdgeType], Tensor]


class GraphView:
    r"""Reads a graph's node counts, relations, edges and node attributes,
    and makes the same graph with other edges, in whichever of PyG's three
    forms it came (:meth:`of` picks the reader once).

    A homogeneous graph has no edge types: its edges are ``edges(None)``
    and its node attributes ``node_attr(name)``.

    Args:
        data (Data or HeteroData or Tuple[FeatureStore, GraphStore]): the
            graph (:meth:`of` makes the view from it alone).
        kind (GraphInput): which of the three forms :obj:`data` is.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from pyg_fastload.graph.view import GraphView
        >>> view = GraphView.of(Data(edge_index=torch.tensor([[0, 1],
        ...                                                  [1, 2]]),
        ...                          num_nodes=3))
        >>> view.num_nodes(), view.edges().tolist(), view.edge_types()
        (3, [[0, 1], [1, 2]], [])
    """
    kind: GraphInput

    def __init__(self, data: Any, kind: GraphInput):
        self.data = data
        self.kind = kind

    @staticmethod
    def of(data: Any, name: str = 'data') -> 'GraphView':
        r"""The view of :obj:`data`; anything else is refused with a
        ``TypeError`` naming the argument :obj:`name`."""
        kind = graph_input(data, name)
        if kind.stores:
            return _StoresView(data, kind)
        if kind.hetero:
            return _HeteroDataView(data, kind)
        return _DataView(data, kind)

    def num_nodes(self, node_type: Optional[str] = None) -> int:
        r"""Nodes of the graph, or of :obj:`node_type` (typed graphs)."""
        raise NotImplementedError

    def edge_types(self) -> List[EdgeType]:
        r"""The relations of a typed graph (none for a homogeneous one)."""
        raise NotImplementedError

    def edges(self, edge_type: Optional[EdgeType] = None) -> Tensor:
        r"""The ``[2, E]`` edges (``int64``) of relation :obj:`edge_type`
        in its node types' ids, or of a homogeneous graph."""
        raise NotImplementedError

    def node_attr(self, name: str, node_type: Optional[str] = None,
                  index: Optional[Tensor] = None) -> Optional[Tensor]:
        r"""Node attribute :obj:`name` (of :obj:`node_type`; on stores
        without a type, of the one group holding it), rows :obj:`index` or
        all; :obj:`None` where the graph has no such attribute."""
        raise NotImplementedError

    def with_edges(self, edges: Edges) -> Any:
        r"""The graph in the same form whose relations :obj:`edges` names
        hold those edges (a homogeneous graph: ``{None: edges}``); node
        features are shared, not copied."""
        raise NotImplementedError


def _rows(value: Any, index: Optional[Tensor]) -> Optional[Tensor]:
    if value is None or index is None:
        return value
    return value[index]


class _DataView(GraphView):
    def num_nodes(self, node_type: Optional[str] = None) -> int:
        return int(self.data.num_nodes)

    def edge_types(self) -> List[EdgeType]:
        return []

    def edges(self, edge_type: Optional[EdgeType] = None) -> Tensor:
        return self.data.edge_index.long()

    def node_attr(self, name: str, node_type: Optional[str] = None,
                  index: Optional[Tensor] = None) -> Optional[Tensor]:
        return _rows(self.data.get(name), index)

    def with_edges(self, edges: Edges) -> Any:
        return Data(x=self.data.x, edge_index=edges[None],
                    num_nodes=self.num_nodes())


class _HeteroDataView(GraphView):
    def num_nodes(self, node_type: Optional[str] = None) -> int:
        if node_type is None:
            return int(self.data.num_nodes)
        return int(self.data[node_type].num_nodes)

    def edge_types(self) -> List[EdgeType]:
        return [tuple(e) for e in self.data.edge_types]

    def edges(self, edge_type: Optional[EdgeType] = None) -> Tensor:
        return self.data[edge_type].edge_index.long()

    def node_attr(self, name: str, node_type: Optional[str] = None,
                  index: Optional[Tensor] = None) -> Optional[Tensor]:
        return _rows(self.data[node_type].get(name), index)

    def with_edges(self, edges: Edges) -> Any:
        data = self.data
        out = HeteroData()
        for node_type in data.node_types:
            for key, value in data[node_type].items():
                out[node_type][key] = value
            out[node_type].num_nodes = data[node_type].num_nodes
        for edge_type in data.edge_types:
            out[edge_type].edge_index = edges.get(
                tuple(edge_type), data[edge_type].edge_index)
        return out


class _StoresView(GraphView):
    r"""A ``(FeatureStore, GraphStore)`` pair whose graph store has this
    package's ``topology`` (a :class:`CSCTopology` or a
    :class:`HeteroTopology`) and is built from one."""

    def __init__(self, data: Any, kind: GraphInput):
        super().__init__(data, kind)
        self.feature_store, self.graph_store = stores_of(data)

    @property
    def topology(self) -> Any:
        return self.graph_store.topology

    def num_nodes(self, node_type: Optional[str] = None) -> int:
        if node_type is None:
            return int(self.topology.num_nodes)
        return int(self.topology.num_nodes_of(node_type))

    def edge_types(self) -> List[EdgeType]:
        if not self.kind.hetero:
            return []
        return list(self.topology.edge_types)

    def edges(self, edge_type: Optional[EdgeType] = None) -> Tensor:
        if edge_type is None:
            return self.topology.to_edge_index()
        return self.topology.relation_topology(edge_type).to_edge_index()

    def node_attr(self, name: str, node_type: Optional[str] = None,
                  index: Optional[Tensor] = None) -> Optional[Tensor]:
        store = self.feature_store
        groups = [a.group_name for a in store.get_all_tensor_attrs()
                  if a.attr_name == name and
                  (node_type is None or a.group_name == node_type)]
        if len(groups) != 1:
            return None
        return store.get_tensor(group_name=groups[0], attr_name=name,
                                index=index)

    def with_edges(self, edges: Edges) -> Any:
        if not self.kind.hetero:
            topology = CSCTopology.from_edge_index(edges[None],
                                                   self.num_nodes())
            # a graph store of the same class, over the new topology
            return self.feature_store, type(self.graph_store)(topology)
        kept = [e for e in self.edge_types() if e not in edges]
        store = type(self.graph_store)(HeteroTopology.from_relations(
            {t: self.num_nodes(t) for t in self.topology.node_types},
            {e: edges.get(e, self.edges(e)) for e in self.edge_types()}))
        # a kept relation's edges come back in its CSC order (a stable
        # sort of edges sorted by destination), so its edge arrays hold
        names_of = getattr(self.graph_store, 'edge_array_names_of', None)
        for e in kept if names_of is not None else ():
            for name in names_of(e):
                store.put_edge_array(name, self.graph_store.edge_array(
                    name, e), e)
        return self.feature_store, store
