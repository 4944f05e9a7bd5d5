r"""Turns what a user hands a sampler (a PyG ``Data`` or ``HeteroData``, a
``(FeatureStore, GraphStore)`` tuple or a :class:`CSCTopology`) into the CSC
topology (a :class:`HeteroTopology` for ``HeteroData``), with errors that
name the offending argument."""
from __future__ import annotations

import weakref
from typing import Any, Dict, List, Optional, Union

import numpy as np
import torch
from torch import Tensor
from torch_geometric.data import (
    Data,
    EdgeAttr,
    FeatureStore,
    GraphStore,
    HeteroData,
)

from .hetero_topology import EdgeType, HeteroTopology
from .kind import is_data, is_topology, stores_of
from .topology import CSCTopology, index_dtype_for

__all__ = ['topology_of', 'attach_topology', 'check_edge_rows',
           'check_data_edge_rows']

#: The topology of every ``Data`` / ``HeteroData`` a sampler was built on,
#: by the object's id: ``(weak reference to the object, the edge tensors
#: the topology was built from, their key, topology)``. Kept beside the
#: object, not in it: PyG makes each batch with ``copy.copy(data)``, which
#: would carry the whole graph into every batch (and a worker process,
#: sending a batch, moved arrays it was sampling from to shared memory).
_TOPOLOGIES: Dict[int, tuple] = {}


def _per_edge(key: str) -> bool:
    r"""Whether attribute :obj:`key` (of a ``Data`` or of a relation's
    store) is meant to hold one row per edge, by its name: ``edge_*``
    (PyG's ``edge_attr``, ``edge_weight``, ``edge_type``, ...) but the edge
    list and the link-level ``edge_label*`` supervision, or ``e_id``."""
    return key == 'e_id' or (key.startswith('edge_') and key != 'edge_index'
                             and not key.startswith('edge_label'))


def _from_data(data: Data) -> CSCTopology:
    if 'edge_index' not in data or data.edge_index is None:
        if 'adj_t' in data:
            raise NotImplementedError(
                "'data.adj_t' (SparseTensor) input is not supported yet: "
                "store the graph as 'data.edge_index'")
        if data.num_nodes is None:
            raise ValueError("the data object has neither 'edge_index' nor "
                             "a node count: set 'data.edge_index' (or "
                             "'data.num_nodes' for a graph without edges)")
        # a graph without edges, as PyG samples it: the seeds alone
        return CSCTopology.from_edge_index(
            torch.empty(2, 0, dtype=torch.long), data.num_nodes)
    topology = _cached(data, _key(data))
    if topology is None:
        topology = CSCTopology.from_edge_index(data.edge_index,
                                               data.num_nodes)
        attach_topology(data, topology)
    return topology


def _key(data: Data) -> tuple:
    # Any change is seen: another tensor (the cache holds the old one, so
    # its id stays unique), an in-place edit (the tensor's version
    # counter), another shape or another node count.
    edge_index = data.edge_index
    return (id(edge_index), edge_index._version, tuple(edge_index.shape),
            data.num_nodes)


def _cached(data: Any, key: tuple
            ) -> Optional[Union[CSCTopology, HeteroTopology]]:
    r"""The topology kept for :obj:`data` under :obj:`key`, if any."""
    entry = _TOPOLOGIES.get(id(data))
    if entry is not None and entry[0]() is data and entry[2] == key:
        return entry[3]
    return None


def _keep(data: Any, sources: Any, key: tuple,
          topology: Union[CSCTopology, HeteroTopology]) -> None:
    r"""Keeps :obj:`topology` for :obj:`data` while :obj:`data` lives."""
    ident = id(data)
    owner = weakref.ref(data, lambda _: _TOPOLOGIES.pop(ident, None))
    _TOPOLOGIES[ident] = (owner, sources, key, topology)


def attach_topology(data: Data, topology: CSCTopology) -> None:
    r"""Keeps :obj:`topology`, the CSC form of ``data.edge_index`` (which
    the caller vouches for), for :obj:`data`: samplers of :obj:`data` reuse
    it until ``edge_index`` or the node count changes."""
    _keep(data, data.edge_index, _key(data), topology)


def _check_weight(weight: Tensor, weight_attr: str, num_edges: int,
                  where: str = '') -> Tensor:
    r"""Sampling weights, one finite value >= 0 per edge (``float64``)."""
    name = f"'weight_attr={weight_attr!r}'{where}"
    weight = weight.reshape(-1)
    if weight.numel() != num_edges:
        raise ValueError(f"{name} has {weight.numel()} entries, expected one "
                         f"per edge ({num_edges})")
    if weight.dtype.is_complex or not (weight.dtype.is_floating_point
                                       or weight.dtype in (torch.int32,
                                                           torch.int64)):
        raise TypeError(f"{name} must be numeric, got dtype {weight.dtype}")
    if weight.dtype.is_floating_point and not bool(
            torch.isfinite(weight).all()):
        bad = int((~torch.isfinite(weight)).sum())
        raise ValueError(f"{name} holds {bad} NaN or infinite weights; "
                         f"sampling weights must be finite and >= 0 (replace "
                         f"them, e.g. with torch.nan_to_num(w, nan=0.0, "
                         f"posinf=0.0))")
    if bool((weight < 0).any()):
        raise ValueError(f"{name} holds negative weights; sampling weights "
                         f"must be >= 0")
    return weight.to(torch.float64)


def _weighted(topology: CSCTopology, weight: Tensor,
              weight_attr: str) -> CSCTopology:
    weight = _check_weight(weight, weight_attr, topology.num_edges)
    if topology.edge_id is not None:
        weight = weight[topology.edge_id.long()]
    return CSCTopology(topology.indptr, topology.indices, topology.num_nodes,
                       topology.edge_id, weight)


def check_edge_rows(store: Any, edge_type: EdgeType) -> None:
    r"""Every edge-level tensor (``edge_attr``, ``edge_weight``, any
    ``edge_*`` but the edge list and link labels) of relation
    :obj:`edge_type`'s :obj:`store` has one row per edge of its
    ``edge_index``: PyG's ``filter_hetero_data`` would serve one of another
    length whole, unsliced."""
    edge_index = store.get('edge_index')
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2:
        return  # refused where the edges are read
    num_edges = edge_index.size(1)
    for key, value in store.items():
        if _per_edge(key) and \
                isinstance(value, Tensor) and value.dim() >= 1 and \
                value.size(0) != num_edges:
            raise ValueError(
                f"data[{edge_type}].{key} has {value.size(0)} rows but edge "
                f"type {edge_type} has {num_edges} edges; give every edge "
                f"one row of '{key}' (or drop it)")


def check_data_edge_rows(data: Data) -> None:
    r"""Every edge-level attribute of a homogeneous :obj:`data` (by its
    name, :func:`_per_edge`: ``edge_attr``, ``edge_weight``, ``edge_type``,
    ...) has one row per edge of ``edge_index`` (along PyG's
    ``__cat_dim__``), checked where a loader is built on :obj:`data`. PyG
    decides by length (``Data.is_edge_attr``), so its ``filter_data`` would
    slice one of ``num_nodes`` rows by the batch's nodes and serve one of
    any other length whole in every batch, without a word."""
    edge_index = data.edge_index
    if not isinstance(edge_index, Tensor) or edge_index.dim() != 2:
        return  # refused where the edges are read
    num_edges = edge_index.size(1)
    for key, value in data.items():
        if not _per_edge(key) or not isinstance(value, (Tensor, np.ndarray)) \
                or value.ndim == 0:
            continue
        dim = data.__cat_dim__(key, value)
        if not isinstance(dim, int):
            continue
        length = value.shape[dim]
        if length == num_edges:
            continue
        rows = 'rows' if dim == 0 else f'entries along dim {dim}'
        served = ('sliced by the batch\'s nodes, as a node attribute'
                  if length == data.num_nodes else
                  'served whole in every batch')
        raise ValueError(
            f"'data.{key}' has {length} {rows} but 'edge_index' has "
            f"{num_edges} edges: an edge attribute needs one row per edge "
            f"(PyG would have it {served}); give every edge one row of "
            f"'{key}', or drop it (del data.{key}) or rename it if it is "
            f"not per edge")


def _from_hetero_data(data: HeteroData,
                      weight_attr: Optional[str]) -> HeteroTopology:
    num_nodes = {}
    for node_type in data.node_types:
        count = data[node_type].num_nodes
        if count is None:
            raise ValueError(f"node type {node_type!r} has no node count: "
                             f"set data[{node_type!r}].num_nodes")
        num_nodes[node_type] = int(count)
    edge_index, weights = {}, {}
    for edge_type in data.edge_types:
        store = data[edge_type]
        if 'edge_index' not in store:
            raise ValueError(f"edge type {edge_type} has no 'edge_index' "
                             f"(SparseTensor 'adj_t' is not supported): "
                             f"store its edges as data[{edge_type}]"
                             f".edge_index")
        check_edge_rows(store, edge_type)
        edge_index[edge_type] = store.edge_index
        if weight_attr is not None:
            if weight_attr not in store:
                raise ValueError(f"'weight_attr={weight_attr!r}' is not an "
                                 f"attribute of edge type {edge_type}: give "
                                 f"every edge type its weights")
            weights[edge_type] = _check_weight(
                store[weight_attr], weight_attr, store.edge_index.size(1),
                f' of edge type {edge_type}')
    # Any change is seen: another tensor (the cache holds the old ones, so
    # their ids stay unique), an in-place edit, another shape or count.
    key = (weight_attr, tuple(num_nodes.items()),
           tuple((e, id(v), v._version, tuple(v.shape))
                 for e, v in edge_index.items()))
    topology = _cached(data, key)
    if topology is None:
        topology = HeteroTopology.from_relations(
            num_nodes, edge_index,
            weights if weight_attr is not None else None)
        _keep(data, list(edge_index.values()), key, topology)
    return topology


def _from_stores(feature_store: FeatureStore, graph_store: GraphStore
                 ) -> Union[CSCTopology, HeteroTopology]:
    own = getattr(graph_store, 'topology', None)
    if is_topology(own):
        return own
    edge_attrs = graph_store.get_all_edge_attrs()
    if len(edge_attrs) == 0:
        raise ValueError("the GraphStore holds no edges")
    if any(attr.edge_type is not None for attr in edge_attrs):
        return _hetero_from_stores(graph_store, edge_attrs)
    size = edge_attrs[0].size
    if size is None:
        raise ValueError("the GraphStore's EdgeAttr has no 'size': put the "
                         "edge index with size=(num_nodes, num_nodes)")
    num_nodes = max(size)
    row, colptr, perm = graph_store.csc()
    if perm is not None:
        perm = perm.to(index_dtype_for(max(perm.numel() - 1, 0)))
    return CSCTopology(colptr.long(), row.to(index_dtype_for(num_nodes - 1)),
                       num_nodes, perm)


def _hetero_from_stores(graph_store: GraphStore,
                        edge_attrs: List[EdgeAttr]) -> HeteroTopology:
    r"""Every relation of a GraphStore of another library, read in COO
    (converted by the store from the layout it holds: COO, CSR or CSC)."""
    num_nodes: Dict[str, int] = {}
    edge_index = {}
    for attr in edge_attrs:
        if tuple(attr.edge_type or ()) in edge_index:
            continue  # a relation held in several layouts
        if attr.edge_type is None or attr.size is None:
            raise ValueError(f"the GraphStore's EdgeAttr {attr} has no "
                             f"edge type or no 'size': put every relation "
                             f"with edge_type and size=(num_src, num_dst)")
        src, _, dst = attr.edge_type
        num_nodes.setdefault(src, int(attr.size[0]))
        num_nodes.setdefault(dst, int(attr.size[1]))
        row, col, _ = graph_store.coo([attr.edge_type])
        edge_index[tuple(attr.edge_type)] = torch.stack(
            [row[attr.edge_type], col[attr.edge_type]])
    return HeteroTopology.from_relations(num_nodes, edge_index)


def topology_of(data: Any, weight_attr: Optional[str] = None
                ) -> Union[CSCTopology, HeteroTopology]:
    r"""The CSC topology of :obj:`data` (built once per ``Data`` or
    ``HeteroData`` and kept while it lives, beside it: copies of it, such
    as PyG's batches, do not carry it), with :obj:`weight_attr` edge weights
    attached if given.

    Args:
        data (Data or HeteroData): the graph.
        weight_attr (str, optional): the edge attribute holding edge
            weights.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from pyg_fastload.graph import topology_of
        >>> topo = topology_of(Data(edge_index=torch.tensor([[0, 1, 2],
        ...                                                 [1, 2, 1]]),
        ...                         num_nodes=3))
        >>> topo.indptr.tolist(), topo.indices.tolist()
        ([0, 0, 2, 3], [0, 2, 1])
    """
    if is_data(data, hetero=True):
        return _from_hetero_data(data, weight_attr)
    if is_topology(data):
        if weight_attr is not None and data.edge_weight is None:
            raise ValueError(f"'weight_attr={weight_attr!r}' was given but "
                             f"the topology carries no edge weights")
        return data
    if is_data(data):
        topology = _from_data(data)
        if weight_attr is None:
            return topology
        if weight_attr not in data:
            raise ValueError(f"'weight_attr={weight_attr!r}' is not an "
                             f"attribute of the data object")
        return _weighted(topology, data[weight_attr], weight_attr)
    stores = stores_of(data)
    if stores is not None:
        if weight_attr is not None:
            raise NotImplementedError(
                "'weight_attr' is not supported for (FeatureStore, "
                "GraphStore) input yet: pass a Data object")
        return _from_stores(*stores)
    raise TypeError(f"'data' must be a torch_geometric.data.Data, a "
                    f"(FeatureStore, GraphStore) tuple or a CSCTopology, got "
                    f"{type(data).__name__}")
