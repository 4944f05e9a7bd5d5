r"""Turns what a user hands a sampler (a PyG ``Data``, a
``(FeatureStore, GraphStore)`` tuple or a :class:`CSCTopology`) into the CSC
topology, with errors that name the offending argument."""
from __future__ import annotations

from typing import Any, Optional

import torch
from torch import Tensor
from torch_geometric.data import Data, FeatureStore, GraphStore, HeteroData

from ..errors import HETERO_UNSUPPORTED
from .topology import CSCTopology, index_dtype_for

__all__ = ['topology_of']

_CACHE_ATTR = '_fastload_topology'


def _from_data(data: Data) -> CSCTopology:
    if 'edge_index' not in data or data.edge_index is None:
        if 'adj_t' in data:
            raise NotImplementedError(
                "'data.adj_t' (SparseTensor) input is not supported yet: "
                "store the graph as 'data.edge_index'")
        raise ValueError("the data object has no 'edge_index': neighbour "
                         "sampling needs the graph's edges")
    edge_index = data.edge_index
    # Any change is seen: another tensor, an in-place edit (the tensor's
    # version counter), another shape or another node count.
    key = (edge_index._version, tuple(edge_index.shape), data.num_nodes)
    cached = data.__dict__.get(_CACHE_ATTR)
    if cached is not None and cached[0] is edge_index and \
            cached[1] == key:
        return cached[2]
    topology = CSCTopology.from_edge_index(edge_index, data.num_nodes)
    data.__dict__[_CACHE_ATTR] = (edge_index, key, topology)
    return topology


def _weighted(topology: CSCTopology, weight: Tensor,
              weight_attr: str) -> CSCTopology:
    weight = weight.reshape(-1)
    if weight.numel() != topology.num_edges:
        raise ValueError(f"'weight_attr={weight_attr!r}' has {weight.numel()} "
                         f"entries, expected one per edge "
                         f"({topology.num_edges})")
    if weight.dtype.is_complex or not (weight.dtype.is_floating_point
                                       or weight.dtype in (torch.int32,
                                                           torch.int64)):
        raise TypeError(f"'weight_attr={weight_attr!r}' must be numeric, got "
                        f"dtype {weight.dtype}")
    if weight.dtype.is_floating_point and not bool(
            torch.isfinite(weight).all()):
        bad = int((~torch.isfinite(weight)).sum())
        raise ValueError(f"'weight_attr={weight_attr!r}' holds {bad} NaN or "
                         f"infinite weights; sampling weights must be finite "
                         f"and >= 0 (replace them, e.g. with "
                         f"torch.nan_to_num(w, nan=0.0, posinf=0.0))")
    if bool((weight < 0).any()):
        raise ValueError(f"'weight_attr={weight_attr!r}' holds negative "
                         f"weights; sampling weights must be >= 0")
    if topology.edge_id is not None:
        weight = weight[topology.edge_id.long()]
    return CSCTopology(topology.indptr, topology.indices, topology.num_nodes,
                       topology.edge_id, weight.to(torch.float64))


def _from_stores(feature_store: FeatureStore,
                 graph_store: GraphStore) -> CSCTopology:
    own = getattr(graph_store, 'topology', None)
    if isinstance(own, CSCTopology):
        return own
    edge_attrs = graph_store.get_all_edge_attrs()
    if len(edge_attrs) == 0:
        raise ValueError("the GraphStore holds no edges")
    if any(attr.edge_type is not None for attr in edge_attrs):
        raise NotImplementedError(HETERO_UNSUPPORTED)
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


def topology_of(data: Any, weight_attr: Optional[str] = None) -> CSCTopology:
    r"""The CSC topology of :obj:`data` (built once per ``Data`` and cached
    on it), with :obj:`weight_attr` edge weights attached if given."""
    if isinstance(data, HeteroData):
        raise NotImplementedError(HETERO_UNSUPPORTED)
    if isinstance(data, CSCTopology):
        if weight_attr is not None and data.edge_weight is None:
            raise ValueError(f"'weight_attr={weight_attr!r}' was given but "
                             f"the topology carries no edge weights")
        return data
    if isinstance(data, Data):
        topology = _from_data(data)
        if weight_attr is None:
            return topology
        if weight_attr not in data:
            raise ValueError(f"'weight_attr={weight_attr!r}' is not an "
                             f"attribute of the data object")
        return _weighted(topology, data[weight_attr], weight_attr)
    if (isinstance(data, (tuple, list)) and len(data) == 2
            and isinstance(data[0], FeatureStore)
            and isinstance(data[1], GraphStore)):
        if weight_attr is not None:
            raise NotImplementedError(
                "'weight_attr' is not supported for (FeatureStore, "
                "GraphStore) input yet: pass a Data object")
        return _from_stores(*data)
    raise TypeError(f"'data' must be a torch_geometric.data.Data, a "
                    f"(FeatureStore, GraphStore) tuple or a CSCTopology, got "
                    f"{type(data).__name__}")
