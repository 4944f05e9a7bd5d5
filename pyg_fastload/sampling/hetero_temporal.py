r"""Temporal sampling on a heterogeneous graph: the times of every node
type (or every edge type) in the global ids of a
:class:`~pyg_fastload.graph.HeteroTopology`, indexed per CSC segment (one
node's in-edges along one relation) by :class:`TemporalIndex`.

As pyg-lib does, a node type (or relation) without times has no time
constraint: its nodes (edges) are never later than a seed."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import FeatureStore

from ..graph.hetero_topology import EdgeType, HeteroTopology
from ..graph.kind import is_data, stores_of
from ..storage import CSCGraphStore
from .temporal import TemporalIndex, check_times

__all__ = ['checked_times', 'edge_time_index', 'hetero_temporal_index',
           'node_time_index']


def _earliest(dtype: torch.dtype, device: torch.device) -> Tensor:
    r"""A time no seed time precedes, in :obj:`dtype`."""
    value = float('-inf') if dtype.is_floating_point else \
        torch.iinfo(dtype).min
    return torch.tensor(value, dtype=dtype, device=device)


def _joined(parts: List[Optional[Tensor]], sizes: List[int],
            device: torch.device) -> Tensor:
    r"""Per-type times in one tensor on :obj:`device` (types without times
    at the earliest time), in float64 if any type's times are
    floating-point."""
    given = [p for p in parts if p is not None]
    dtype = torch.float64 if any(p.dtype.is_floating_point for p in given) \
        else torch.int64
    return torch.cat([_earliest(dtype, device).expand(size) if part is None
                      else part.to(device, dtype)
                      for part, size in zip(parts, sizes)])


def checked_times(time: Any, count: int, name: str, what: str) -> Tensor:
    r""":obj:`time` checked (:func:`check_times`), one per entry of
    :obj:`count` (:obj:`what` in the error)."""
    time = check_times(time, name)
    if time.numel() != count:
        raise ValueError(f"{name} has {time.numel()} entries for the "
                         f"{count} {what}: give one time per entry")
    return time


def _node_times(get: Any, topo: HeteroTopology, time_attr: str
                ) -> Dict[str, Tensor]:
    r"""The node times of every type that has them (:obj:`get` maps a node
    type to its tensor or ``None``)."""
    out = {}
    for node_type in topo.node_types:
        time = get(node_type)
        if time is not None:
            out[node_type] = checked_times(
                time, topo.num_nodes_of(node_type),
                f"data[{node_type!r}].{time_attr}", f"{node_type!r} nodes")
    return out


def _store_time(store: FeatureStore, time_attr: str) -> Any:
    def get(node_type: str) -> Optional[Tensor]:
        try:
            time = store.get_tensor(node_type, time_attr, None)
        except KeyError:
            return None
        return None if time is None else time.reshape(-1)
    return get


def hetero_temporal_index(data: Any, time_attr: str, topo: HeteroTopology
                          ) -> Tuple[TemporalIndex, List[str]]:
    r"""The :class:`TemporalIndex` of :obj:`topo` with the times named
    :obj:`time_attr`: node-level (a tensor of node types, in a
    ``HeteroData`` or a feature store) or edge-level (of edge types, in a
    ``HeteroData``, or edge arrays of a
    :class:`~pyg_fastload.storage.CSCGraphStore`'s relations: a
    heterogeneous dataset directory's); and the node types without node
    times."""
    name = f"'time_attr={time_attr!r}'"
    edge: Dict[Any, Tensor] = {}  # each timed relation's, in CSC order
    if is_data(data, hetero=True):
        node = _node_times(lambda t: data[t].get(time_attr), topo, time_attr)
        for r, e in enumerate(topo.edge_types):
            if time_attr in data[e]:
                edge[e] = checked_times(
                    data[e][time_attr], topo.num_edges_of(e),
                    f"data[{e}].{time_attr}", f"edges of {e}").to(
                    topo.device).index_select(0, topo.edge_id[
                        int(topo.edge_offset[r]):int(topo.edge_offset[r + 1])])
    elif stores_of(data) is not None:
        node = _node_times(_store_time(data[0], time_attr), topo, time_attr)
        graph_store = data[1]  # (a CSCGraphStore holds edge arrays)
        for e in topo.edge_types if isinstance(graph_store,
                                               CSCGraphStore) else ():
            rows = graph_store.edge_array(time_attr, e)
            if rows is not None:  # (held in the relation's CSC order)
                edge[e] = checked_times(
                    rows, topo.num_edges_of(e), f"edge array {time_attr!r} "
                    f"of {e}", f"edges of {e}")
    else:
        raise NotImplementedError(f"{name} needs a HeteroData or a "
                                  f"(FeatureStore, GraphStore) tuple, got "
                                  f"{type(data).__name__}")
    if node and edge:
        raise ValueError(f"{name} names node times ({sorted(node)}) and edge "
                         f"times ({sorted(edge)}): keep one level")
    if not node and not edge:
        raise ValueError(f"{name} is a tensor of no node type and no edge "
                         f"type of the graph: put the times there, e.g. "
                         f"data[node_type].{time_attr}")
    if node:
        return node_time_index(topo, node)
    return edge_time_index(topo, edge), list(topo.node_types)


def node_time_index(topo: HeteroTopology, node: Dict[str, Tensor]
                    ) -> Tuple[TemporalIndex, List[str]]:
    r"""The :class:`TemporalIndex` of :obj:`topo`'s in-edges by their
    sources' times (:obj:`node`: every timed node type's times, in the
    type's ids), and the node types without times."""
    node_time = _joined([node.get(t) for t in topo.node_types],
                        [topo.num_nodes_of(t) for t in topo.node_types],
                        topo.device)
    indices = topo.indices.long()
    return TemporalIndex(
        topo.indptr, indices, node_time.index_select(0, indices),
        node_time), [t for t in topo.node_types if t not in node]


def edge_time_index(topo: HeteroTopology, edge: Dict[EdgeType, Tensor]
                    ) -> TemporalIndex:
    r"""The :class:`TemporalIndex` of :obj:`topo`'s in-edges by their own
    times (:obj:`edge`: every timed relation's times, in its CSC
    order)."""
    return TemporalIndex(topo.indptr, topo.indices.long(), _joined(
        [edge.get(e) for e in topo.edge_types],
        topo.edge_offset.diff().tolist(), topo.device))
