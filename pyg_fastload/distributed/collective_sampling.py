r"""DSP's collective sampling: each hop's frontier is pushed to the owners of
its nodes, each owner samples the requests it received from its own CSC
with the ordinary vectorised sampler, and the sampled neighbour ids (with
per-node counts) come back the same way; frontier nodes a rank owns never
leave it. Node-wise (uniform or weighted) and layer-wise (DSP Eq. 2) on
homogeneous graphs (:class:`CollectiveSampler`); node-wise over every
relation of a heterogeneous one (:class:`HeteroCollectiveSampler`, typed
new ids). The exchange is one mixin (:class:`CollectiveHops`) in front of
the local sampler whose draw each owner runs.

Per hop, two exchanges (each one all-to-all of sizes and one of data):
frontier ids out, ``[counts, neighbour ids (, edge ids)]`` back. Ids travel
as ``int32`` when the graph allows it. Every rank must sample the same
number of batches with the same number of hops (the loaders run in
lockstep).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.sampler import SamplerOutput

from ..graph.hetero_topology import EdgeType, HeteroTopology, offsets_of
from ..graph.kind import is_topology
from ..graph.ranges import expand_ranges
from ..graph.topology import CSCTopology, index_dtype_for
from ..partition import HeteroPartitionBook, PartitionBook
from ..sampling import FastNeighborSampler, HeteroNeighborSampler
from ..sampling.ops import first_occurrence_mask, sample_uniform
from ..sampling.temporal import (
    TemporalIndex,
    check_strategy,
    check_times,
    checked_times,
    edge_time_index,
    node_time_index,
)
from .collectives import Collectives

__all__ = ['CollectiveHops', 'CollectiveSampler', 'HeteroCollectiveSampler',
           'share_node_times', 'share_typed_node_times']


class CollectiveHops:
    r"""One hop across the ranks, in front of a local sampler (a mixin
    listed before it): the frontier goes to the owners of its nodes, each
    owner draws for the requests it received (:meth:`owner_draw`, the local
    sampler's draw over its part) and sends back ``[counts, neighbour ids
    (, edge ids)]``, put back in frontier order here.

    A subclass sets :attr:`book`, :attr:`part`, :attr:`collectives`,
    :attr:`dtype` (how ids travel) and :attr:`edge_ids` (whether edge ids
    travel) in :meth:`_join`.
    """
    concurrent_batches = False  # its collectives keep one order per rank
    book: Union[PartitionBook, HeteroPartitionBook]
    part: int
    collectives: Collectives
    dtype: torch.dtype
    edge_ids: bool

    def _join(self, book: Union[PartitionBook, HeteroPartitionBook],
              part: int, collectives: Collectives, num_ids: int,
              edge_ids: bool) -> None:
        if collectives.world_size != book.num_parts:
            raise ValueError(f'{book.num_parts} parts but world size '
                             f'{collectives.world_size}')
        self.book = book
        self.part = part
        self.collectives = collectives
        self.dtype = index_dtype_for(num_ids)
        self.edge_ids = edge_ids
        self._batches = 0
        self._base_seed = self._seed = 0
        if self.shared_variates:  # one seed for them: rank 0's (collective)
            self._base_seed = int(collectives.all_gather_ints(
                [torch.initial_seed() % 2**62],
                'agree on the sampling seed')[0, 0])

    def sample(self, seeds: Tensor,
               generator: Optional[torch.Generator] = None,
               seed_time: Optional[Tensor] = None) -> SamplerOutput:
        r"""As :meth:`HopSampler.sample`; also starts the batch's ordered
        launches."""
        self.collectives.begin_batch()
        self._seed = (self._base_seed + self._batches) % 2**63
        self._batches += 1  # the ranks sample their batches in lockstep
        return super().sample(seeds, generator, seed_time)  # type: ignore

    def batch_seed(self, generator: Optional[torch.Generator]) -> int:
        r"""The seed of a batch's shared variates (a hop-wise sampler that
        draws one variate per vertex, such as LABOR): the same on every
        rank for the batch the ranks sample together, so each owner draws
        a vertex's edges with the variate every other rank would."""
        return self._seed

    def _edge_ids(self, pos: Tensor) -> Tensor:
        r"""The owners already sent each edge's global id (or ``-1``)."""
        return pos

    def owner_draw(self, hop: int, ids: Tensor, lengths: List[int],
                   order: Tensor, sizes: List[int],
                   generator: Optional[torch.Generator],
                   time: Optional[Tensor] = None
                   ) -> Tuple[Tensor, Tensor, Tensor]:
        r"""``(positions, counts, degree)`` of the requests :obj:`ids`
        (this part's nodes, asked by the ranks in turn, :obj:`lengths`
        each, at seed times :obj:`time` for a temporal sampler): the CSC
        positions drawn, grouped by request, how many each drew, and each
        one's in-degree (for the pull counters)."""
        raise NotImplementedError

    def global_edges(self, pos: Tensor) -> Tensor:
        r"""The partition-wide ids of this part's CSC positions."""
        raise NotImplementedError

    def expand(self, hop: int, frontier: Tensor,
               generator: Optional[torch.Generator]
               ) -> Tuple[Tensor, Tensor, Tensor]:
        return self.expand_in_time(hop, frontier, None, generator)

    def expand_in_time(self, hop: int, frontier: Tensor,
                       time: Optional[Tensor],
                       generator: Optional[torch.Generator]
                       ) -> Tuple[Tensor, Tensor, Tensor]:
        r"""One hop across the ranks; with seed times :obj:`time` (a
        temporal sampler) each frontier node's time travels with it, and
        its owner draws only in-edges not later than it."""
        coll = self.collectives
        owner = self.book.owner(frontier)
        order = torch.argsort(owner, stable=True)
        sizes = torch.bincount(owner, minlength=coll.world_size).tolist()
        asked = coll.exchange(
            list(frontier[order].to(self.dtype).split(sizes)), 'sampling',
            f'hop {hop}: push the frontier to its owners')
        asked_time = None if time is None else torch.cat(coll.exchange(
            list(time[order].split(sizes)), 'sampling',
            f'hop {hop}: push the frontier times to their owners'))
        lengths = [a.numel() for a in asked]
        pos, counts, degree = self.owner_draw(
            hop, torch.cat(asked).long(), lengths, order, sizes, generator,
            asked_time)
        self._count_pull(degree, lengths)
        return self._send_back(hop, pos, counts, lengths, order, sizes)

    def _send_back(self, hop: int, pos: Tensor, counts: Tensor,
                   lengths: List[int], order: Tensor, sizes: List[int]
                   ) -> Tuple[Tensor, Tensor, Tensor]:
        r"""Returns each requester its nodes' draws, and puts the draws
        this rank asked for back in frontier order."""
        nbr = self.topology.indices.index_select(0, pos).to(self.dtype)
        replies = []
        drawn = counts.split(lengths)
        sums = [int(c.sum()) for c in drawn]
        nbrs = nbr.split(sums)
        edges = self.global_edges(pos).split(sums) if self.edge_ids else ()
        for r, chunk in enumerate(drawn):
            parts: List[Tensor] = [chunk.to(self.dtype), nbrs[r]]
            if self.edge_ids:  # int64: as pairs of int32 words if need be
                parts.append(edges[r].contiguous().view(self.dtype))
            replies.append(torch.cat(parts))
        back = self.collectives.exchange(
            replies, 'sampling', f'hop {hop}: return the sampled neighbours')
        got_counts, got_nbrs, got_edges = [], [], []
        for r, reply in enumerate(back):
            count = reply[:sizes[r]].long()
            total = int(count.sum())
            got_counts.append(count)
            got_nbrs.append(reply[sizes[r]:sizes[r] + total].long())
            if self.edge_ids:
                got_edges.append(
                    reply[sizes[r] + total:].clone().view(torch.long))
        counts_sorted = torch.cat(got_counts)
        nbr_sorted = torch.cat(got_nbrs)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel())
        first = torch.cumsum(counts_sorted, 0) - counts_sorted
        index = expand_ranges(first[inverse], counts_sorted[inverse],
                              nbr_sorted.numel())
        edge = torch.cat(got_edges)[index] if self.edge_ids else \
            torch.full((index.numel(), ), -1, dtype=torch.long)
        return nbr_sorted[index], counts_sorted[inverse], edge

    def _count_pull(self, deg: Tensor, lengths: List[int]) -> None:
        r"""What the requesters would have pulled for their remote
        frontier nodes: an ``indptr`` pair and the list (and weights)."""
        per_edge = self.topology.indices.element_size() + (
            4 if self.topology.edge_weight is not None else 0)
        total = 0
        for r, chunk in enumerate(deg.split(lengths)):
            if r != self.part:
                total += 16 * chunk.numel() + per_edge * int(chunk.sum())
        self.collectives.counters.add('sampling_pull', received=total)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(part={self.part}, '
                f'num_neighbors={self.num_neighbors})')


class CollectiveSampler(CollectiveHops, FastNeighborSampler):
    r"""Node-wise sampling (uniform or weighted, with or without
    replacement) over a partitioned graph, seen from one rank.

    Args:
        topology (CSCTopology): this rank's part: in-neighbour lists of the
            new ids ``[start, end)`` it owns, in new global ids (as
            :func:`~pyg_fastload.partition.open_partition` opens it).
        book (PartitionBook): who owns which new id.
        part (int): the part this rank owns.
        collectives (Collectives): this rank's (sampling) collectives.
        num_neighbors (List[int]): fan-out per hop.
        replace (bool): sample with replacement.
        disjoint (bool): one tree per seed.
        weight_attr (str, optional): sample in proportion to the part's
            edge weights.
        edge_ids (bool): also send back each sampled edge's global id
            (``part's first edge + CSC position``); otherwise ``e_id`` is
            ``-1`` and less is sent.
        layer_wise (bool): :obj:`num_neighbors` are layer sizes: draws for
            a hop's whole frontier, node ``u`` picked in proportion to its
            in-degree (or in-edge weight), as
            :class:`~pyg_fastload.sampling.LayerWiseSampler` (DSP, Eq. 2),
            with one more exchange per hop (masses back, pick counts
            out).
        node_time (torch.Tensor, optional): temporal sampling with
            node-level times: the time of each node this part owns (new-id
            order); the ranks share them once, so a neighbour joins a
            tree only if it is not later than the tree's seed (PyG's
            ``time_attr`` semantics; each frontier node's seed time
            travels with it).
        edge_time (torch.Tensor, optional): temporal sampling with
            edge-level times: the time of each of this part's CSC edges.
        temporal_strategy (str): ``'uniform'`` or ``'last'``, as in
            :class:`~pyg_fastload.FastNeighborSampler`.

    The counters' ``'sampling_pull'`` kind (on the owner's side) counts
    what pulling the remote frontier nodes' adjacency lists would have
    moved instead (an ``indptr`` pair and the list, plus
    weights), for comparison with the pushed bytes the collectives count
    as ``'sampling'`` (DSP Fig. 11).
    """
    def __init__(self, topology: CSCTopology, book: PartitionBook, part: int,
                 collectives: Collectives, num_neighbors: List[int],
                 replace: bool = False, disjoint: bool = False,
                 subgraph_type: str = 'directional',
                 weight_attr: Optional[str] = None, edge_ids: bool = False,
                 layer_wise: bool = False,
                 node_time: Optional[Tensor] = None,
                 edge_time: Optional[Tensor] = None,
                 temporal_strategy: str = 'uniform', **options: Any):
        if subgraph_type == 'induced':
            raise ValueError("collective sampling draws 'directional' or "
                             "'bidirectional' subgraphs, not 'induced'")
        if node_time is not None and edge_time is not None:
            raise ValueError("give 'node_time' or 'edge_time', not both")
        timed = node_time is not None or edge_time is not None
        self._join(book, part, collectives, book.num_nodes, edge_ids)
        super().__init__(topology, num_neighbors, replace=replace,
                         subgraph_type=subgraph_type,
                         disjoint=disjoint or timed, weight_attr=weight_attr,
                         **options)
        self.start, self.end = book.part_range(part)
        if topology.num_nodes != self.end - self.start:
            raise ValueError(f'the topology has {topology.num_nodes} rows, '
                             f'part {part} owns {self.end - self.start}')
        if layer_wise and (disjoint or replace or timed):
            raise ValueError("'layer_wise' draws with replacement over the "
                             "whole frontier: leave 'disjoint', 'replace' "
                             "and the times unset")
        self.layer_wise = layer_wise
        edges = collectives.all_gather_ints(
            [topology.num_edges], 'count the edges of every part').view(-1)
        self.edge_offset = int(edges[:part].sum())
        if timed:
            self.temporal_strategy, _ = check_strategy(
                temporal_strategy, 'time', True, weight_attr)
            self.time_attr = 'node_time' if edge_time is None \
                else 'edge_time'
            self.temporal = self._part_times(node_time, edge_time)

    def _part_times(self, node_time: Optional[Tensor],
                    edge_time: Optional[Tensor]) -> TemporalIndex:
        r"""The part's in-edges sorted by time: by their own times, or by
        their sources' node times (every part's, shared once)."""
        topo = self.topology
        if edge_time is not None:
            edge_time = check_times(edge_time, "'edge_time'")
            if edge_time.numel() != topo.num_edges:
                raise ValueError(f"'edge_time' has {edge_time.numel()} "
                                 f"entries for the part's {topo.num_edges} "
                                 f"edges: give one time per CSC edge")
            return TemporalIndex(topo.indptr, topo.indices, edge_time)
        return TemporalIndex.of(topo, share_node_times(
            self.collectives, node_time, topo.num_nodes, self.part), 'node')

    @property
    def num_nodes(self) -> int:
        return self.book.num_nodes

    def owner_draw(self, hop: int, ids: Tensor, lengths: List[int],
                   order: Tensor, sizes: List[int],
                   generator: Optional[torch.Generator],
                   time: Optional[Tensor] = None
                   ) -> Tuple[Tensor, Tensor, Tensor]:
        rows = ids - self.start
        topo = self.topology
        start = topo.indptr.index_select(0, rows)
        deg = topo.indptr.index_select(0, rows + 1) - start
        if time is not None:  # a prefix of each time-sorted segment
            _, counts, pos = FastNeighborSampler.expand_in_time(
                self, hop, rows, time, generator)
            return pos, counts, deg
        if self.layer_wise:
            pos, counts = self._layer_draw(hop, start, deg, lengths, order,
                                           sizes, generator)
        else:
            pos, counts = self.draw(hop, start, deg, generator)
        return pos, counts, deg

    def global_edges(self, pos: Tensor) -> Tensor:
        return pos + self.edge_offset

    def _layer_draw(self, hop: int, start: Tensor, deg: Tensor,
                    lengths: List[int], order: Tensor, sizes: List[int],
                    generator: Optional[torch.Generator]
                    ) -> Tuple[Tensor, Tensor]:
        r"""DSP's Eq. 2 across ranks: the owners send back each frontier
        node's mass (in-degree, or in-edge weight), the requester draws the
        layer's ``size`` picks over its whole frontier and sends each owner
        its nodes' pick counts, and the owners draw that many in-edges of
        each (with replacement; a repeated edge kept once)."""
        size = self.num_neighbors[hop]
        if size < 0:
            return sample_uniform(start, deg, -1, False, generator)
        coll = self.collectives
        mass = _mass(start, deg, self.cum_weight)
        back = coll.exchange(list(mass.split(lengths)), 'sampling',
                             f'hop {hop}: return the frontier masses')
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel())
        frontier_mass = torch.cat(back)[inverse]
        picks = torch.zeros(order.numel(), dtype=torch.long)
        if size > 0 and bool((frontier_mass > 0).any()):
            drawn = torch.multinomial(frontier_mass, size, replacement=True,
                                      generator=generator)
            picks = torch.bincount(drawn, minlength=order.numel())
        got = coll.exchange(list(picks[order].split(sizes)), 'sampling',
                            f'hop {hop}: send the pick counts to the owners')
        draws = torch.cat(got)
        pos, counts = self._sample(start, deg, draws, True, generator)
        rows = torch.repeat_interleave(torch.arange(deg.numel()), counts,
                                       output_size=pos.numel())
        # A repeated edge is kept once per requester (two ranks may ask
        # for the same node).
        asker = torch.repeat_interleave(
            torch.arange(len(lengths)), torch.tensor(lengths))[rows]
        keep = first_occurrence_mask(
            asker * (self.topology.num_edges + 1) + pos)
        return pos[keep], torch.bincount(rows[keep], minlength=deg.numel())


class HeteroCollectiveSampler(CollectiveHops, HeteroNeighborSampler):
    r"""Node-wise sampling over every relation of a partitioned
    heterogeneous graph, seen from one rank: each owner draws its frontier
    nodes' in-edges along every relation into their type, with the
    relation's fan-out, as :class:`~pyg_fastload.sampling.
    HeteroNeighborSampler` does on one machine; batches come in PyG's
    per-type layout, ids the partition's typed new ids.

    Each sampled edge travels with its partition-wide id (relation by
    relation, part by part: what tells its relation), so ``e_id`` of a
    relation is the edge's position among the relation's edges of every
    part, part after part.

    Args:
        topology (HeteroTopology): this rank's part (every relation's
            in-edges into the part's nodes; sources in global new ids of
            the whole graph), as :func:`~pyg_fastload.partition.
            open_partition` opens it.
        book (HeteroPartitionBook): who owns which typed new id.
        part (int): the part this rank owns.
        collectives (Collectives): this rank's (sampling) collectives.
        num_neighbors: fan-outs per hop, one list for every relation or a
            dict naming every edge type.
        replace (bool): sample with replacement.
        disjoint (bool): one tree per seed.
        subgraph_type (str): ``'directional'`` or ``'bidirectional'``.
        layer_wise (bool): refused (layer-wise draws are homogeneous).
        node_time (Dict[str, torch.Tensor], optional): temporal sampling
            with node-level times: per node type, the times of the nodes of
            that type this part owns (typed new-id order); the ranks share
            them once. A type without times has no time constraint (as in
            pyg-lib); every rank names the same types.
        edge_time (Dict[EdgeType, torch.Tensor], optional): temporal
            sampling with edge-level times: per relation, the times of the
            part's CSC edges of that relation (a relation without times has
            no time constraint).
        temporal_strategy (str): ``'uniform'`` or ``'last'``, as in
            :class:`~pyg_fastload.sampling.HeteroNeighborSampler`.
    """
    def __init__(self, topology: HeteroTopology, book: HeteroPartitionBook,
                 part: int, collectives: Collectives,
                 num_neighbors: Union[List[int], Dict[EdgeType, List[int]]],
                 replace: bool = False, disjoint: bool = False,
                 subgraph_type: str = 'directional',
                 layer_wise: bool = False,
                 node_time: Optional[Dict[str, Tensor]] = None,
                 edge_time: Optional[Dict[EdgeType, Tensor]] = None,
                 temporal_strategy: str = 'uniform', **options: Any):
        if node_time is not None and edge_time is not None:
            raise ValueError("give 'node_time' or 'edge_time', not both")
        timed = node_time is not None or edge_time is not None
        if layer_wise:
            raise ValueError("layer-wise sampling (DSP's Eq. 2) draws over "
                             "a homogeneous graph's frontier: sample node-"
                             "wise a heterogeneous one (mode_options."
                             "sampling: node)")
        if subgraph_type == 'induced':
            raise ValueError("collective sampling draws 'directional' or "
                             "'bidirectional' subgraphs, not 'induced'")
        if not is_topology(topology, hetero=True) or \
                list(topology.node_types) != book.node_types or \
                not torch.equal(topology.node_offset.cpu(),
                                book.node_offset):
            raise ValueError(
                f"'topology' must be a part of the partition the book "
                f"describes (node types {book.node_types}, each in the "
                f"whole graph's ids): open it with open_partition")
        self._join(book, part, collectives, topology.num_nodes, True)
        super().__init__(topology, num_neighbors, replace=replace,
                         subgraph_type=subgraph_type,
                         disjoint=disjoint or timed, **options)
        #: Where each type's rows of this part start, in type-local ids.
        self.starts = book.offsets[:, part].clone()
        owned = {t: b.part_range(part)[1] - b.part_range(part)[0]
                 for t, b in book.books.items()}
        for r, edge_type in enumerate(topology.edge_types):
            rows = int(topology.segment_offset[r + 1] -
                       topology.segment_offset[r])
            if rows != owned[edge_type[2]]:
                raise ValueError(f'relation {edge_type} has {rows} rows, '
                                 f'part {part} owns {owned[edge_type[2]]} '
                                 f'{edge_type[2]!r} nodes')
        counts = collectives.all_gather_ints(
            topology.edge_offset.diff().tolist(),
            'count the edges of every relation of every part')
        #: Where each relation's edges start in the partition-wide ids.
        self.relation_offset = offsets_of(counts.sum(0).tolist())
        # Partition-wide id of CSC position p of relation r: p + shift[r].
        self._shift = (self.relation_offset[:-1] + counts[:part].sum(0) -
                       topology.edge_offset[:-1])
        if timed:
            self.temporal_strategy, _ = check_strategy(
                temporal_strategy, 'time', True)
            self.time_attr = 'node_time' if edge_time is None \
                else 'edge_time'
            self.temporal, self.untimed_types = self._part_times(
                node_time, edge_time)

    def _part_times(self, node_time: Optional[Dict[str, Tensor]],
                    edge_time: Optional[Dict[EdgeType, Tensor]]
                    ) -> Tuple[TemporalIndex, List[str]]:
        r"""The part's in-edges sorted by time (by their own times, or by
        their sources' node times, every part's shared once), and the node
        types without node times."""
        topo: HeteroTopology = self.topology
        if edge_time is not None:
            times = _agreed_times(
                self.collectives, edge_time, "'edge_time'", 'edge type',
                topo.edge_types,
                lambda e: (topo.num_edges_of(e),
                           f"edges of {e} in part {self.part} (its CSC "
                           f"order)"))
            return edge_time_index(topo, times), list(topo.node_types)
        return node_time_index(topo, share_typed_node_times(
            self.collectives, self.book, self.part, node_time))

    def owner_draw(self, hop: int, ids: Tensor, lengths: List[int],
                   order: Tensor, sizes: List[int],
                   generator: Optional[torch.Generator],
                   time: Optional[Tensor] = None
                   ) -> Tuple[Tensor, Tensor, Tensor]:
        topo: HeteroTopology = self.topology
        types = topo.node_type_of(ids)
        rows = ids - topo.node_offset[types] - self.starts[types]
        segment, relation, owner = topo.typed_segments(types, rows)
        start = topo.indptr.index_select(0, segment)
        deg = topo.indptr.index_select(0, segment + 1) - start
        degree = ids.new_zeros(ids.numel()).index_add_(0, owner, deg)
        if time is not None:  # the one-machine hop; each type's rows of
            # the part shifted to start at the type's offset
            _, per_node, pos = HeteroNeighborSampler.expand_in_time(
                self, hop, ids - self.starts[types], time, generator)
            return pos, per_node, degree
        pos, counts = self.pick(hop, start, deg, self.fanout[relation, hop],
                                topo.indices, generator)
        per_node = ids.new_zeros(ids.numel()).index_add_(0, owner, counts)
        return pos, per_node, degree

    def global_edges(self, pos: Tensor) -> Tensor:
        return pos + self._shift[self.topology.relation_of(pos)]

    def _relation_edges(self, edge: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        relation = torch.bucketize(edge, self.relation_offset[1:],
                                   right=True)
        return (relation, edge - self.relation_offset[relation],
                torch.arange(edge.numel()))


def share_node_times(collectives: Collectives, node_time: Any, owned: int,
                     part: int) -> Tensor:
    r"""Every part's node times end to end (the whole graph's new ids), from
    :obj:`node_time`, those of the :obj:`owned` nodes :obj:`part` owns
    (checked); a collective."""
    node_time = check_times(node_time, "'node_time'")
    if node_time.numel() != owned:
        raise ValueError(f"'node_time' has {node_time.numel()} entries for "
                         f"the {owned} nodes part {part} owns: give one "
                         f"time per owned node, in new-id order")
    return torch.cat(collectives.exchange(
        [node_time] * collectives.world_size, 'control',
        'share the node times'))


def share_typed_node_times(collectives: Collectives,
                           book: HeteroPartitionBook, part: int,
                           node_time: Any) -> Dict[str, Tensor]:
    r"""Every part's node times by node type, end to end (the whole graph's
    typed new ids), from :obj:`node_time`: per node type, the times of the
    nodes of that type :obj:`part` owns (checked; a type without times has
    none, and every rank names the same types); a collective."""
    types = book.node_types
    owned = book.offsets.diff(dim=1)  # [node types, parts]
    times = _agreed_times(
        collectives, node_time, "'node_time'", 'node type', types,
        lambda t: (int(owned[types.index(t), part]),
                   f"{t!r} nodes part {part} owns (typed new-id order)"))
    timed = [t for t in types if t in times]
    rows = [types.index(t) for t in timed]
    got = collectives.exchange(
        [torch.cat([times[t] for t in timed])] * collectives.world_size,
        'control', 'share the node times')
    every = [g.split(owned[rows, r].tolist()) for r, g in enumerate(got)]
    return {t: torch.cat([chunks[i] for chunks in every])
            for i, t in enumerate(timed)}


def _agreed_times(collectives: Collectives, given: Any, name: str,
                  kind: str, keys: List[Any],
                  count: Callable[[Any], Tuple[int, str]]
                  ) -> Dict[Any, Tensor]:
    r""":obj:`given` (times by node or edge type, :obj:`count` of a key
    its ``(entries, what they are)``) checked, in the dtype every rank's
    times take (float64 if any rank's are floating-point); every rank must
    time the same keys."""
    if not isinstance(given, dict) or not given:
        raise ValueError(f"{name} must map {kind}s to their times, e.g. "
                         f"{{{keys[0]!r}: times}}, got {given!r}")
    unknown = [k for k in given if k not in keys]
    if unknown:
        raise ValueError(f"{name} names {kind}(s) {unknown} the graph "
                         f"does not have; its {kind}s are {keys}")
    times = {}
    for k in keys:
        if k in given:
            entries, what = count(k)
            times[k] = checked_times(given[k], entries, f"{name}[{k!r}]",
                                     what)
    flags = collectives.all_gather_ints(
        [int(k in times) for k in keys] + [int(any(
            t.dtype.is_floating_point for t in times.values()))],
        f'agree on the {kind}s of {name}')
    if bool((flags[:, :-1] != flags[0, :-1]).any()):
        named = [[k for k, on in zip(keys, row) if on]
                 for row in flags[:, :-1].tolist()]
        raise ValueError(f"{name}: the ranks time different {kind}s "
                         f"({named}, rank by rank): every rank must name "
                         f"the same ones (an empty tensor where its part "
                         f"has none)")
    dtype = torch.float64 if bool(flags[:, -1].any()) else torch.int64
    return {k: t.to(dtype) for k, t in times.items()}


def _mass(start: Tensor, deg: Tensor, cum_weight: Optional[Tensor]) -> Tensor:
    r"""Each node's in-degree, or the total weight of its in-edges."""
    if cum_weight is None:
        return deg.to(torch.float64)
    end = (start + deg - 1).clamp(min=0)
    before = torch.where(start > 0, cum_weight[(start - 1).clamp(min=0)],
                         0.0)
    return torch.where(deg > 0, cum_weight[end] - before, 0.0).double()
