r"""Temporal sampling, PyG's semantics without pyg-lib: a neighbour is
sampled only if its time (the node's time, or the edge's) is not later than
the time of the seed whose tree it joins. One path for both graph kinds
(:func:`temporal_index`): a heterogeneous graph's times of every node type
(or every edge type) are joined in the global ids of its
:class:`~pyg_fastload.graph.HeteroTopology`, whose CSC segments are a
node's in-edges along one relation; as pyg-lib does, a node type (or
relation) without times has no time constraint: its nodes (edges) are
never later than a seed.

:class:`TemporalIndex` sorts every node's in-edges by time once, so the
edges valid for a seed time are a prefix of the node's CSC segment, found by
one binary search per frontier node: ``'uniform'`` draws from the prefix,
``'last'`` takes its end (the most recent neighbours)."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import FeatureStore, GraphStore

from ..graph.hetero_topology import EdgeType, HeteroTopology
from ..graph.kind import is_data, is_topology, stores_of
from ..graph.topology import CSCTopology
from ..storage import CSCGraphStore

__all__ = ['TemporalIndex', 'TEMPORAL_STRATEGIES', 'check_strategy',
           'check_times', 'checked_times', 'read_time', 'seed_times',
           'draw_before', 'edge_time_index', 'node_time_index',
           'temporal_index']

#: The values of ``temporal_strategy``.
TEMPORAL_STRATEGIES = ('uniform', 'last')

#: Redraws of weighted temporal negatives that are later than their seed.
TIME_ROUNDS = 32


def check_strategy(temporal_strategy: Any, time_attr: Optional[str],
                   disjoint: bool = False,
                   weight_attr: Optional[str] = None) -> Tuple[str, bool]:
    r"""``(temporal_strategy, disjoint)``, checked: the strategy is
    ``'uniform'`` or ``'last'``; ``'last'`` needs a ``time_attr`` (it would
    otherwise be ignored); temporal sampling takes no ``weight_attr`` and
    is always disjoint, every seed its own tree with the seed's time (PyG
    turns ``disjoint`` on by itself when sampling is temporal)."""
    if time_attr is not None and not isinstance(time_attr, str):
        raise TypeError(f"'time_attr' must name an attribute (a str), got "
                        f"{time_attr!r}")
    if temporal_strategy not in TEMPORAL_STRATEGIES:
        raise ValueError(f"'temporal_strategy={temporal_strategy!r}' is not "
                         f"one of {TEMPORAL_STRATEGIES}")
    if temporal_strategy == 'last' and time_attr is None:
        raise ValueError("'temporal_strategy=\"last\"' picks the most "
                         "recent neighbours and needs times: set 'time_attr' "
                         "(a node or edge attribute)")
    if time_attr is not None and weight_attr is not None:
        raise NotImplementedError("weighted temporal sampling "
                                  "('weight_attr' with 'time_attr') is "
                                  "not supported: drop one of them")
    return temporal_strategy, bool(disjoint) or time_attr is not None


def check_times(time: Any, name: str) -> Tensor:
    r"""A 1-D integer or floating-point tensor without NaN."""
    if not isinstance(time, Tensor):
        raise TypeError(f"{name} must be a tensor, got "
                        f"{type(time).__name__}")
    if time.dtype == torch.bool or time.dtype.is_complex or not (
            time.dtype.is_floating_point or time.dtype in (
                torch.int8, torch.int16, torch.int32, torch.int64,
                torch.uint8)):
        raise TypeError(f"{name} has dtype {time.dtype}: times are integer "
                        f"(e.g. seconds) or floating-point numbers")
    if time.dim() != 1:
        raise ValueError(f"{name} has shape {list(time.shape)}: give one "
                         f"time per entry, a 1-D tensor")
    if time.dtype.is_floating_point and bool(time.isnan().any()):
        raise ValueError(f"{name} holds NaN times")
    if time.dtype.is_floating_point:
        return time.to(torch.float64)
    return time.long()


def read_time(data: Any, time_attr: str,
              topology: CSCTopology) -> Tuple[Tensor, str]:
    r"""The times named :obj:`time_attr` of :obj:`data` (whose CSC form is
    :obj:`topology`) and their level: ``'node'`` (one per node) or
    ``'edge'`` (one per edge **in CSC order**, what :class:`TemporalIndex`
    takes). Read from an attribute of a ``Data`` (node- or edge-level, as
    PyG decides; edge times permuted by :meth:`CSCTopology.csc_order`), or
    from a ``(FeatureStore, GraphStore)`` pair: a node tensor of the
    feature store (group :obj:`None`) or an edge array of a
    :class:`~pyg_fastload.storage.CSCGraphStore`
    (:meth:`~pyg_fastload.storage.CSCGraphStore.edge_array`; a dataset
    directory's edge arrays are there), never a name that is both."""
    name = f"'time_attr={time_attr!r}'"
    if is_data(data, hetero=False):
        if time_attr not in data:
            raise ValueError(f"{name} is not an attribute of the data "
                             f"object (it has {sorted(data.keys())})")
        time = data[time_attr]
        if isinstance(time, Tensor) and time.dim() == 1 and \
                time.numel() == topology.num_nodes and \
                data.is_node_attr(time_attr):
            return check_times(time, name), 'node'
        if isinstance(time, Tensor) and time.dim() == 1 and \
                time.numel() == topology.num_edges:
            return check_times(topology.csc_order(time), name), 'edge'
        size = list(time.shape) if isinstance(time, Tensor) else \
            type(time).__name__
        raise ValueError(f"{name} ({size}) holds neither one time per node "
                         f"({topology.num_nodes}) nor one per edge "
                         f"({topology.num_edges})")
    stores = stores_of(data)
    if stores is not None:
        return _store_time(*stores, time_attr, topology, name)
    raise NotImplementedError(f"{name} needs a Data or a (FeatureStore, "
                              f"GraphStore) tuple, got {type(data).__name__}")


def _store_time(feature_store: FeatureStore, graph_store: GraphStore,
                time_attr: str, topology: CSCTopology,
                name: str) -> Tuple[Tensor, str]:
    r"""The node times of :obj:`feature_store` or the edge times (CSC
    order) of :obj:`graph_store` named :obj:`time_attr` (see
    :func:`read_time`)."""
    try:
        node = feature_store.get_tensor(None, time_attr, None)  # all rows
    except KeyError:
        node = None
    held = graph_store.edge_array_names if isinstance(
        graph_store, CSCGraphStore) else []
    edge = graph_store.edge_array(time_attr) if time_attr in held else None
    if node is not None and edge is not None:
        raise ValueError(f"{name} names both a node tensor of the feature "
                         f"store and an edge array of the graph store: "
                         f"rename one of them")
    if node is None and edge is None:
        raise ValueError(f"{name} is not a tensor of the feature store: "
                         f"put the node times there (group None), or the "
                         f"edge times (one per edge, in CSC order) in the "
                         f"graph store, a CSCGraphStore, with "
                         f"put_edge_array (it holds the edge arrays "
                         f"{held})")
    level, time, count = ('node', node, topology.num_nodes) \
        if edge is None else ('edge', edge, topology.num_edges)
    time = check_times(time.reshape(-1), name)
    if time.numel() != count:
        raise ValueError(f"{name} has {time.numel()} entries for {count} "
                         f"{level}s: give one time per {level}")
    return time, level


def checked_times(time: Any, count: int, name: str, what: str) -> Tensor:
    r""":obj:`time` checked (:func:`check_times`), one per entry of
    :obj:`count` (:obj:`what` in the error)."""
    time = check_times(time, name)
    if time.numel() != count:
        raise ValueError(f"{name} has {time.numel()} entries for the "
                         f"{count} {what}: give one time per entry")
    return time


def _typed_node_times(get: Callable[[str], Optional[Tensor]],
                      topo: HeteroTopology, time_attr: str
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


def _typed_store_time(store: FeatureStore, time_attr: str
                      ) -> Callable[[str], Optional[Tensor]]:
    def get(node_type: str) -> Optional[Tensor]:
        try:
            time = store.get_tensor(node_type, time_attr, None)
        except KeyError:
            return None
        return None if time is None else time.reshape(-1)
    return get


def _typed_temporal_index(data: Any, time_attr: str, topo: HeteroTopology
                     ) -> Tuple[TemporalIndex, List[str]]:
    r"""The index of a heterogeneous :obj:`topo` with the times named
    :obj:`time_attr` (see :func:`temporal_index`) and the node types
    without node times: node-level (a tensor of node types, in a
    ``HeteroData`` or a feature store) or edge-level (of edge types, in a
    ``HeteroData``, or edge arrays of a
    :class:`~pyg_fastload.storage.CSCGraphStore`'s relations: a
    heterogeneous dataset directory's)."""
    name = f"'time_attr={time_attr!r}'"
    edge: Dict[Any, Tensor] = {}  # each timed relation's, in CSC order
    if is_data(data, hetero=True):
        node = _typed_node_times(lambda t: data[t].get(time_attr), topo,
                                 time_attr)
        for r, e in enumerate(topo.edge_types):
            if time_attr in data[e]:
                edge[e] = checked_times(
                    data[e][time_attr], topo.num_edges_of(e),
                    f"data[{e}].{time_attr}", f"edges of {e}").to(
                    topo.device).index_select(0, topo.edge_id[
                        int(topo.edge_offset[r]):int(topo.edge_offset[r + 1])])
    elif stores_of(data) is not None:
        node = _typed_node_times(_typed_store_time(data[0], time_attr), topo,
                                 time_attr)
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


def seed_times(input_time: Optional[Tensor], seeds: Tensor,
               node_time: Optional[Tensor], name: str) -> Tensor:
    r"""Every seed's time: :obj:`input_time` (one per seed), or the seeds'
    own node times; edge-level times need :obj:`input_time`."""
    if input_time is None:
        if node_time is None:
            raise ValueError(f"the graph's times are edge-level: give every "
                             f"seed its time with {name!r}")
        return node_time.index_select(0, seeds)
    return input_time


class TemporalIndex:
    r"""The edges of every CSC segment (a node's in-edges; on a
    heterogeneous graph, a node's in-edges along one relation) sorted by
    time.

    Args:
        indptr (torch.Tensor): the CSC segments' offsets.
        indices (torch.Tensor): the source node of every CSC position.
        edge_time (torch.Tensor): the time of every CSC position (its source
            node's time, or its edge's).
        node_time (torch.Tensor, optional): node times, for node-level
            times (negatives are drawn among the nodes not later than a
            seed).

    Attributes:
        indices: the source node of every sorted position.
        positions: the CSC position each sorted position holds (the sampler
            maps it to the edge id).
        node_time: the node times (``None`` for edge-level times).
    """
    def __init__(self, indptr: Tensor, indices: Tensor, edge_time: Tensor,
                 node_time: Optional[Tensor] = None):
        num_segments = indptr.numel() - 1
        self.times, rank = torch.unique(edge_time, return_inverse=True)
        num_ranks = max(self.times.numel(), 1)
        self.num_ranks = num_ranks
        if num_segments * num_ranks >= 2**62:
            raise ValueError(f"{num_segments} nodes x {num_ranks} distinct "
                             f"times overflow the sort keys: round the "
                             f"times (e.g. to seconds)")
        dst = torch.repeat_interleave(torch.arange(num_segments,
                                                   device=indptr.device),
                                      indptr.diff())
        order = torch.sort(dst * num_ranks + rank, stable=True).indices
        del dst
        self.positions = order
        self.indices = indices.long().index_select(0, order)
        #: The time rank (index into :attr:`times`) of every sorted
        #: position: ascending within each segment.
        self.ranks = rank.index_select(0, order).to(
            torch.int32 if num_ranks < 2**31 else torch.int64)
        self.node_time = node_time
        self._time_order: Dict[Tuple[int, int], Tuple[Tensor, Tensor]] = {}

    @classmethod
    def of(cls, topology: CSCTopology, time: Tensor,
           level: str) -> 'TemporalIndex':
        r"""The index of :obj:`topology` with node or edge times
        (:obj:`level` ``'node'`` or ``'edge'``, edge times in CSC order, as
        :func:`read_time` gives them; a heterogeneous topology's in its
        global ids, as :func:`temporal_index` joins them)."""
        indices = topology.indices.long()
        time = time.to(topology.device)
        if level == 'node':
            return cls(topology.indptr, indices,
                       time.index_select(0, indices), time)
        return cls(topology.indptr, indices, time)

    def cast(self, time: Tensor, name: str) -> Tensor:
        r""":obj:`time` in the index's dtype (integer times refuse
        fractional seed times, which would be rounded)."""
        time = check_times(time, name)
        if self.times.dtype == torch.int64 and time.dtype.is_floating_point:
            raise TypeError(f"{name} holds floating-point times but the "
                            f"graph's times are integers: pass integer "
                            f"times (e.g. time.long())")
        return time.to(self.times.dtype)

    def valid_counts(self, nodes: Tensor, start: Tensor, deg: Tensor,
                     time: Tensor) -> Tensor:
        r"""How many in-edges of each of :obj:`nodes` (CSC segments
        :obj:`start`, :obj:`deg`) are not later than :obj:`time`: a prefix
        of the time-sorted segment, found by a binary search within the
        segment (all segments at once: a few probes close together, where
        one search over every edge would miss the cache on most)."""
        if not self.ranks.numel() or not deg.numel():
            return torch.zeros_like(deg)
        rank = (torch.searchsorted(self.times, time, right=True) - 1).to(
            self.ranks.dtype)
        lo, hi = start.clone(), start + deg
        last = self.ranks.numel() - 1
        for _ in range(int(deg.max()).bit_length()):
            mid = torch.div(lo + hi, 2, rounding_mode='floor')
            later = self.ranks.index_select(0, mid.clamp(max=last)) > rank
            open_ = lo < hi
            hi = torch.where(later & open_, mid, hi)
            lo = torch.where(~later & open_, mid + 1, lo)
        return lo - start

    def earlier_nodes(self, count: int, time: Tensor,
                      generator: Optional[torch.Generator],
                      low: int = 0, high: Optional[int] = None) -> Tensor:
        r""":obj:`count` nodes drawn uniformly among the nodes ``[low,
        high)`` (default: all) not later than ``time[i % len(time)]``
        (node-level times), as offsets from :obj:`low`."""
        high = self.node_time.numel() if high is None else high
        if (low, high) not in self._time_order:
            self._time_order[low, high] = torch.sort(
                self.node_time[low:high])
        sorted_time, order = self._time_order[low, high]
        time = time.repeat((count + time.numel() - 1) //
                           max(time.numel(), 1))[:count]
        valid = torch.searchsorted(sorted_time, time, right=True)
        if bool((valid == 0).any()):
            bad = time[valid == 0][0].item()
            raise ValueError(f"temporal negative sampling: no node is as "
                             f"early as seed time {bad} (the earliest node "
                             f"time is {sorted_time[0].item()})")
        u = torch.rand(count, dtype=torch.float64, generator=generator,
                       device=valid.device)
        pick = torch.minimum((u * valid).long(), valid - 1)
        return order.index_select(0, pick)


def draw_before(draw: Any, count: int, time: Tensor, node_time: Tensor,
                generator: Optional[torch.Generator]) -> Tensor:
    r"""Weighted temporal negatives: :obj:`draw` (count -> nodes) redrawn
    where a node is later than its seed time ``time[i % len(time)]``
    (bounded rounds, then an error)."""
    time = time.repeat((count + time.numel() - 1) //
                       max(time.numel(), 1))[:count]
    out = draw(count)
    for _ in range(TIME_ROUNDS):
        bad = (node_time.index_select(0, out) > time).nonzero().view(-1)
        if not bad.numel():
            return out
        out[bad] = draw(bad.numel())
    raise ValueError(f"temporal negative sampling: {TIME_ROUNDS} weighted "
                     f"draws found no node as early as the seed times; give "
                     f"early nodes weight or drop the weights")


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


def node_time_index(topo: HeteroTopology, node: Dict[str, Tensor]
                    ) -> Tuple[TemporalIndex, List[str]]:
    r"""The :class:`TemporalIndex` of a heterogeneous :obj:`topo`'s
    in-edges by their sources' times (:obj:`node`: every timed node type's
    times, in the type's ids), and the node types without times."""
    return TemporalIndex.of(topo, _joined(
        [node.get(t) for t in topo.node_types],
        [topo.num_nodes_of(t) for t in topo.node_types], topo.device),
        'node'), [t for t in topo.node_types if t not in node]


def edge_time_index(topo: HeteroTopology, edge: Dict[EdgeType, Tensor]
                    ) -> TemporalIndex:
    r"""The :class:`TemporalIndex` of a heterogeneous :obj:`topo`'s
    in-edges by their own times (:obj:`edge`: every timed relation's times,
    in its CSC order)."""
    return TemporalIndex.of(topo, _joined(
        [edge.get(e) for e in topo.edge_types],
        topo.edge_offset.diff().tolist(), topo.device), 'edge')


def temporal_index(data: Any, time_attr: str, topology: Any
                   ) -> Tuple[TemporalIndex, List[str]]:
    r"""The :class:`TemporalIndex` of :obj:`topology` (the CSC form of
    :obj:`data`) with the times named :obj:`time_attr`, and the node types
    without node times (whose seeds need input times; none on a
    homogeneous graph, one node type that has them).

    Args:
        data: a ``Data`` or ``HeteroData``, or a ``(FeatureStore,
            GraphStore)`` pair (:func:`read_time`; per type on a
            heterogeneous graph).
        time_attr (str): the node-level or edge-level times' name.
        topology: a :class:`~pyg_fastload.graph.CSCTopology` or a
            :class:`~pyg_fastload.graph.HeteroTopology`.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from pyg_fastload.graph import topology_of
        >>> from pyg_fastload.sampling.temporal import temporal_index
        >>> data = Data(edge_index=torch.tensor([[0, 1], [1, 2]]),
        ...             time=torch.tensor([3, 1, 2]), num_nodes=3)
        >>> index, untimed = temporal_index(data, 'time', topology_of(data))
        >>> index.node_time.tolist(), untimed
        ([3, 1, 2], [])
    """
    if is_topology(topology, hetero=True):
        return _typed_temporal_index(data, time_attr, topology)
    return TemporalIndex.of(topology,
                            *read_time(data, time_attr, topology)), []
