r"""Node-wise neighbour sampling on heterogeneous graphs: the one engine of
:class:`~pyg_fastload.sampling.FastNeighborSampler` (its hops, link and
temporal paths) run over a :class:`~pyg_fastload.graph.HeteroTopology` in
global node ids, keyed by type where a homogeneous graph has one: seeds of
a node type, a CSC segment per node and relation with its own fan-out
(every relation of a hop drawn in one vectorized call, one per distinct
fan-out), the label edges of an edge type; then split into PyG's per-type
``HeteroSamplerOutput``."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.sampler import HeteroSamplerOutput, SamplerOutput
from torch_geometric.sampler.base import SubgraphType

from ..config import check_fanouts
from ..graph.hetero_topology import EdgeType, HeteroTopology
from ..graph.kind import is_topology
from .link import LabelEnds
from .neighbor_sampler import SCRATCH_BATCH_SIZE, FastNeighborSampler
from .ops import arange_as

__all__ = ['HeteroNeighborSampler', 'hetero_fanouts']


def hetero_fanouts(num_neighbors: Any,
                   edge_types: List[EdgeType]) -> Dict[EdgeType, List[int]]:
    r"""Fan-outs per edge type from a list (every relation) or a dict by
    edge type (naming every relation, as PyG asks), checked."""
    if isinstance(num_neighbors, dict):
        unknown = [key for key in num_neighbors
                   if tuple(key) not in edge_types]
        if unknown:
            raise ValueError(
                f"'num_neighbors' names edge type(s) {unknown} the graph does "
                f"not have; its edge types are {edge_types}")
        checked = {tuple(key): check_fanouts(value, zero_hops=True)
                   for key, value in num_neighbors.items()}
        hops = {len(v) for v in checked.values()}
        if len(hops) > 1:
            raise ValueError(f"'num_neighbors': the number of hops must be "
                             f"the same across all edge types (got "
                             f"{sorted(hops)}): give every edge type one "
                             f"fan-out per hop")
        missing = [e for e in edge_types if e not in checked]
        if missing:  # PyG's words; a misspelt relation is never sampled
            raise ValueError(
                f"Missing number of neighbors for edge type "
                f"'{missing[0]}': 'num_neighbors' leaves out {missing}; "
                f"give each its fan-outs per hop ([0, ...] samples none)")
        return {e: checked[e] for e in edge_types}
    fanouts = check_fanouts(num_neighbors, zero_hops=True)
    return {e: list(fanouts) for e in edge_types}


def _per_hop(kind: Tensor, per_hop: Optional[List[int]], num_kinds: int
             ) -> Tensor:
    r"""``[num_kinds, hops]``: how many of the items of every hop
    (``per_hop``, in hop order; ``None``: one hop of all) are of each
    kind."""
    if per_hop == []:  # zero hops
        return torch.zeros(num_kinds, 0, dtype=torch.long,
                           device=kind.device)
    parts = kind.split(per_hop) if per_hop is not None else [kind]
    return torch.stack([torch.bincount(part, minlength=num_kinds)
                        for part in parts], 1)


class HeteroNeighborSampler(FastNeighborSampler):
    r"""Node-wise neighbour sampler on a ``HeteroData``: at hop ``i`` every
    frontier node of type ``t`` draws up to ``num_neighbors[e][i]`` of its
    in-neighbours along every relation ``e`` into ``t`` (``-1``: all),
    uniformly or by :obj:`weight_attr`, with or without replacement; PyG's
    :class:`~torch_geometric.sampler.NeighborSampler` contract (and batch
    layout) on heterogeneous graphs, needing neither pyg-lib nor
    torch-sparse.

    Args:
        data: a ``HeteroData`` or a
            :class:`~pyg_fastload.graph.HeteroTopology`.
        num_neighbors: fan-outs per hop, one list for every relation or a
            dict naming every edge type.
        temporal_strategy, time_attr: temporal sampling, as in
            :class:`~pyg_fastload.FastNeighborSampler`; :obj:`time_attr`
            names a tensor of node types or of edge types (types without
            it have no time constraint, as in pyg-lib).
        replace, subgraph_type, disjoint, weight_attr, share_memory,
        directed: as in :class:`~pyg_fastload.FastNeighborSampler`.
        device (torch.device or str, optional): where the topology lives
            and sampling runs (:class:`HopSampler`). The loaders leave it
            on the CPU: with ``sampling_device='cuda'`` they sample a
            heterogeneous graph there and send its batches to the GPU.
        batch_size (int): seeds of one batch, whose sampling scratch a
            move to a GPU leaves room for (:class:`HopSampler`).

    Example:
        >>> import torch
        >>> from torch_geometric.sampler import NodeSamplerInput
        >>> from pyg_fastload.datasets import generate_hetero
        >>> from pyg_fastload.sampling import HeteroNeighborSampler
        >>> sampler = HeteroNeighborSampler(generate_hetero('hetero-tiny'),
        ...                                 num_neighbors=[2, 2])
        >>> out = sampler.sample_from_nodes(NodeSamplerInput(
        ...     input_id=None, node=torch.tensor([0, 1]), input_type='paper'))
        >>> out.node['paper'][:2].tolist(), sorted(out.node)
        ([0, 1], ['author', 'field_of_study', 'institution', 'paper'])
    """
    adds_reverse_edges = False  # per type, in the hetero output

    def __init__(
        self,
        data: Any,
        num_neighbors: Union[List[int], Dict[EdgeType, List[int]]],
        replace: bool = False,
        subgraph_type: Union[SubgraphType, str] = 'directional',
        disjoint: bool = False,
        temporal_strategy: str = 'uniform',
        time_attr: Optional[str] = None,
        weight_attr: Optional[str] = None,
        share_memory: bool = False,
        directed: bool = True,
        device: Optional[Union[str, torch.device]] = None,
        batch_size: int = SCRATCH_BATCH_SIZE,
    ):
        super().__init__(data, num_neighbors, replace, subgraph_type,
                         disjoint, temporal_strategy, time_attr, weight_attr,
                         share_memory=share_memory, directed=directed,
                         device=device, batch_size=batch_size)
        self.fanout = self.fanout.to(self.device)

    def _take_fanouts(self, fanouts: Any) -> int:
        topo = self.topology
        if not is_topology(topo, hetero=True):
            raise TypeError(f"'data' must be a HeteroData or a "
                            f"HeteroTopology, got {type(topo).__name__}")
        self.num_neighbors = hetero_fanouts(fanouts, topo.edge_types)
        num_hops = len(next(iter(self.num_neighbors.values()), []))
        #: Fan-out of every relation at every hop, ``[num_relations,
        #: num_hops]``.
        fanout = torch.tensor(
            [self.num_neighbors[e] for e in topo.edge_types],
            dtype=torch.long, device='cpu').view(len(topo.edge_types),
                                                 num_hops)
        #: The distinct fan-outs of every hop (one draw call each).
        self.hop_fanouts = [sorted(set(fanout[:, hop].tolist()))
                            for hop in range(num_hops)]
        self.fanout = fanout  # moved with the topology
        return num_hops

    def _hop_fanout(self, hop: int) -> int:
        fanouts = [self.num_neighbors[e][hop] for e in self.edge_types]
        return -1 if min(fanouts, default=0) < 0 else sum(fanouts)

    def _most_in_edges(self) -> int:
        return super()._most_in_edges() * len(self.edge_types)

    @property
    def node_types(self) -> List[str]:
        return self.topology.node_types

    @property
    def edge_types(self) -> List[EdgeType]:
        return self.topology.edge_types

    def _edge_ids(self, pos: Tensor) -> Tensor:
        return pos  # mapped per relation in _split

    # One hop over every relation #############################################

    def _segments(self, nodes: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        return self.topology.segments(nodes)

    def _fanouts(self, hop: int, relations: Optional[Tensor]
                 ) -> Union[int, Tensor]:
        return self.fanout[relations, hop]

    def seed_time(self, seeds: Tensor, time: Optional[Tensor],
                  name: str = 'input_time') -> Optional[Tensor]:
        if time is None and self.temporal is not None and \
                self.untimed_types and seeds.numel():
            types = self.topology.node_type_of(seeds.long()).unique()
            untimed = [self.node_types[t] for t in types.tolist()
                       if self.node_types[t] in self.untimed_types]
            if untimed:
                raise ValueError(f"seeds of node type(s) {untimed} have no "
                                 f"{self.time_attr!r} times: give every "
                                 f"seed its time with {name!r}")
        return super().seed_time(seeds, time, name)

    # Typed seeds, label edges and output #####################################

    def global_seeds(self, input_type: Any, seeds: Tensor) -> Tensor:
        topo: HeteroTopology = self.topology
        if input_type not in topo.node_types:
            raise ValueError(f"'input_nodes' type {input_type!r} is not a "
                             f"node type of the graph ({topo.node_types})")
        t = topo.node_types.index(input_type)
        count = int(topo.node_offset[t + 1] - topo.node_offset[t])
        seeds = seeds.reshape(-1).long()
        if seeds.numel() and (int(seeds.min()) < 0
                              or int(seeds.max()) >= count):
            raise IndexError(f"seed ids of node type {input_type!r} must lie "
                             f"in [0, {count}), got ids from "
                             f"{int(seeds.min())} to {int(seeds.max())}")
        return seeds + topo.node_offset[t]

    def sample_hetero(self, input_type: str, seeds: Tensor,
                      generator: Optional[torch.Generator] = None,
                      input_time: Optional[Tensor] = None
                      ) -> HeteroSamplerOutput:
        r"""Samples the neighbourhood of :obj:`seeds` (ids of node type
        :obj:`input_type`, at :obj:`input_time` for a temporal sampler) into
        PyG's per-type layout: seeds first in their type, then every type's
        nodes in the hop they were reached."""
        seeds = self.global_seeds(input_type, seeds)
        return self.sample_global(seeds, generator,
                                  self.seed_time(seeds, input_time))

    def label_ends(self, input_type: Any) -> LabelEnds:
        if input_type is None or len(input_type) != 3:
            raise ValueError("heterogeneous link sampling needs the label "
                             "edges' edge type, e.g. ('author', 'writes', "
                             "'paper')")
        topo: HeteroTopology = self.topology
        src_type, _, dst_type = input_type

        def end(node_type: str) -> Tuple[int, int]:
            first = topo.node_offset[topo.node_types.index(node_type)]
            return int(first), topo.num_nodes_of(node_type)
        return LabelEnds(end(src_type), end(dst_type), src_type == dst_type)

    def _relation(self, edge_type: Any) -> Tuple[Any, int]:
        topo: HeteroTopology = self.topology
        return (topo.relation_topology(edge_type),
                topo.num_nodes_of(edge_type[0]))

    def _typed(self, out: SamplerOutput) -> HeteroSamplerOutput:
        r"""The global-id output, split by node type and relation (and
        made bidirectional if asked)."""
        hetero = self._split(out)
        if self.subgraph_type == SubgraphType.bidirectional:
            hetero = hetero.to_bidirectional()
        return hetero

    def _relation_edges(self, edge: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        r"""``(relation, ids, at)`` of a batch's edges (the positions
        :meth:`sample` reports): each edge's relation (index), and its id
        within the relation, ``ids[at]``."""
        topo: HeteroTopology = self.topology
        return topo.relation_of(edge), topo.edge_id, edge

    def _split(self, out: SamplerOutput) -> HeteroSamplerOutput:
        r"""The global-id output, split by node type and relation."""
        topo: HeteroTopology = self.topology
        num_types = len(topo.node_types)
        types = topo.node_type_of(out.node)
        # Every node's index among the batch's nodes of its type.
        order = torch.sort(_narrow(types, num_types), stable=True).indices
        nodes_per_hop = _per_hop(types, out.num_sampled_nodes, num_types)
        per_type = nodes_per_hop.sum(1)
        first = torch.cumsum(per_type, 0) - per_type
        local = torch.empty_like(types)
        local[order] = arange_as(types) - torch.repeat_interleave(
            first, per_type, output_size=types.numel())
        node, batch = {}, {}
        for i, name in enumerate(topo.node_types):
            idx = order[int(first[i]):int(first[i] + per_type[i])]
            node[name] = out.node.index_select(0, idx) - topo.node_offset[i]
            if out.batch is not None:
                batch[name] = out.batch.index_select(0, idx)
        relation, edge_ids, edge_at = self._relation_edges(out.edge)
        # Edges grouped by relation with one stable sort (hop order kept).
        by_relation = torch.sort(_narrow(relation, len(topo.edge_types)),
                                 stable=True).indices
        edges_per_hop = _per_hop(relation, out.num_sampled_edges,
                                 len(topo.edge_types))
        sizes = edges_per_hop.sum(1)
        # index_select, not ``[]``: faster on one thread.
        parts = [source.index_select(0, index.index_select(0, by_relation))
                 .split(sizes.tolist()) for source, index in
                 ((local, out.row), (local, out.col),
                  (edge_ids, edge_at))]
        row, col, edge = ({e: p[r] for r, e in enumerate(topo.edge_types)}
                          for p in parts)
        hetero = HeteroSamplerOutput(
            node=node, row=row, col=col, edge=edge,
            batch=batch if out.batch is not None else None,
            num_sampled_nodes=None if out.num_sampled_nodes is None else
            dict(zip(topo.node_types, nodes_per_hop.tolist())),
            num_sampled_edges=None if out.num_sampled_edges is None else
            dict(zip(topo.edge_types, edges_per_hop.tolist())))
        weight = getattr(out, 'edge_weight', None)
        if weight is not None:  # the draw's estimator weights, per relation
            hetero.edge_weight = dict(zip(topo.edge_types, weight.index_select(
                0, by_relation).split(sizes.tolist())))
        return hetero


FastNeighborSampler.typed_class = HeteroNeighborSampler


def _narrow(keys: Tensor, count: int) -> Tensor:
    r""":obj:`keys` (values below :obj:`count`) in the narrowest integer
    type that holds them (torch sorts narrow keys faster than int64
    ones)."""
    for dtype, limit in ((torch.uint8, 2**8), (torch.int16, 2**15),
                         (torch.int32, 2**31)):
        if count <= limit:
            return keys.to(dtype)
    return keys
