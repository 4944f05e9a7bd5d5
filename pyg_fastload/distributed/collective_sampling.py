r"""DSP's collective sampling: each hop's frontier is pushed to the owners of
its nodes, each owner samples the requests it received from its own CSC
with the ordinary vectorised sampler, and the sampled neighbour ids (with
per-node counts) come back the same way; frontier nodes a rank owns never
leave it. Node-wise (uniform or weighted) and layer-wise (DSP Eq. 2) on
homogeneous graphs (:class:`CollectiveSampler`); node-wise over every
relation of a heterogeneous one (:class:`HeteroCollectiveSampler`, typed
new ids). The exchange is one mixin (:class:`CollectiveHops`) in front of
the local sampler whose draw each owner runs.

Per hop, one request per owner: frontier ids out (after the request's
``[hop, batch key, batch seed]``), ``[counts, neighbour ids (, edge ids)]``
back; each owner draws a request from a generator of its own
(:func:`request_seed`), so the batches do not depend on how requests
travel. With a request service (``remote='async'``) they are point-to-point
messages the owner serves between its own batches; otherwise two exchanges
(each one all-to-all of sizes and one of data), and every rank must sample
the same number of batches with the same number of hops (the loaders run
in lockstep; temporal and layer-wise hops always do). Ids travel as
``int32`` when the graph allows it.
"""
from __future__ import annotations

import threading
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
from ..sampling.labor import labor_key
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
from .requests import RequestService

__all__ = ['CollectiveHops', 'CollectiveSampler', 'HeteroCollectiveSampler',
           'request_seed', 'share_node_times']


class CollectiveHops:
    r"""One hop across the ranks, in front of a local sampler (a mixin
    listed before it): the frontier goes to the owners of its nodes, each
    owner draws for every request it received apart (:meth:`owner_draw`,
    the local sampler's draw over its part, from a generator of the
    request's own) and sends back ``[counts, neighbour ids (, edge ids)]``,
    put back in frontier order here.

    A request is ``[hop, key, batch seed]`` (int64 words) and the
    requested ids; its generator is seeded by the requester's batch key
    (drawn from the batch's generator), the hop and the requester's rank
    alone (:func:`request_seed`), so a draw does not depend on when or in
    which order the owner serves its requests. With a request service
    (``remote='async'``) the requests go out as point-to-point messages
    and the owner serves them between its own batches (the oldest batch
    first, then the cheapest: the requested nodes' in-degree sum);
    without one, through two all-to-alls per hop, every rank in
    lockstep. The batches are the same. Temporal and layer-wise hops
    stay collective (their times travel, their picks are drawn over the
    requester's whole frontier).

    A subclass sets :attr:`book`, :attr:`part`, :attr:`collectives`,
    :attr:`dtype` (how ids travel) and :attr:`edge_ids` (whether edge ids
    travel) in :meth:`_join`, and calls :meth:`_serve_from` when built.
    """
    concurrent_batches = False  # its collectives keep one order per rank
    book: Union[PartitionBook, HeteroPartitionBook]
    part: int
    collectives: Collectives
    dtype: torch.dtype
    edge_ids: bool
    #: The request service of the asynchronous frontier requests, or None.
    requests: Optional[RequestService]

    def _join(self, book: Union[PartitionBook, HeteroPartitionBook],
              part: int, collectives: Collectives, num_ids: int,
              edge_ids: bool, requests: Optional[RequestService]) -> None:
        if collectives.world_size != book.num_parts:
            raise ValueError(f'{book.num_parts} parts but world size '
                             f'{collectives.world_size}')
        self.book = book
        self.part = part
        self.collectives = collectives
        self.dtype = index_dtype_for(num_ids)
        self.edge_ids = edge_ids
        self.requests = requests
        self._batches = 0
        self._base_seed = self._seed = self._key = 0
        self._drawing = threading.local()  # the request being served
        self._built = threading.Event()
        self._op = 0
        if requests is not None:  # before the constructor's collectives:
            # every rank serves the op before any asks for it
            self._op = requests.register_next(
                'frontier', self._serve_request, self._request_cost)
        if self.shared_variates:  # one seed for them: rank 0's (collective)
            self._base_seed = int(collectives.all_gather_ints(
                [torch.initial_seed() % 2**62],
                'agree on the sampling seed')[0, 0])

    def _serve_from(self) -> None:
        r"""The sampler is built: its owner's draws may run."""
        self._built.set()

    def sample(self, seeds: Tensor,
               generator: Optional[torch.Generator] = None,
               seed_time: Optional[Tensor] = None) -> SamplerOutput:
        r"""As :meth:`HopSampler.sample`; also starts the batch's ordered
        launches."""
        self.collectives.begin_batch()
        self._seed = (self._base_seed + self._batches) % 2**63
        self._key = int(torch.randint(  # (draws apart from the batch's)
            0, 2**62, (1, ), generator=generator,
            device='cpu' if generator is None else generator.device))
        self._batches += 1
        return super().sample(seeds, generator, seed_time)  # type: ignore

    def batch_seed(self, generator: Optional[torch.Generator]) -> int:
        r"""The seed of a batch's shared variates (a hop-wise sampler that
        draws one variate per vertex, such as LABOR): the same on every
        rank for the batch the ranks sample together (rank 0's seed plus
        the batch's number), so each owner draws a vertex's edges with the
        variate every other rank would; an owner serving a request draws
        with the requester's (it travels with the request)."""
        seed = getattr(self._drawing, 'seed', None)
        return self._seed if seed is None else seed

    def _edge_ids(self, pos: Tensor) -> Tensor:
        r"""The owners already sent each edge's global id (or ``-1``)."""
        return pos

    def owner_draw(self, hop: int, ids: Tensor,
                   generator: Optional[torch.Generator],
                   time: Optional[Tensor] = None
                   ) -> Tuple[Tensor, Tensor, Tensor]:
        r"""``(positions, counts, degree)`` of one request for :obj:`ids`
        (this part's nodes, at seed times :obj:`time` for a temporal
        sampler): the CSC positions drawn, grouped by node, how many each
        drew, and each one's in-degree (for the pull counters)."""
        raise NotImplementedError

    def request_cost(self, ids: Tensor) -> int:
        r"""The owner's cost of drawing for :obj:`ids` (this part's
        nodes): their in-degree sum (ByteGNN's sampling cost)."""
        raise NotImplementedError

    def global_edges(self, pos: Tensor) -> Tensor:
        r"""The partition-wide ids of this part's CSC positions."""
        raise NotImplementedError

    # A request ##############################################################

    @property
    def _head(self) -> int:
        r"""How many id words a request's ``[hop, key, seed]`` takes."""
        return 3 * 8 // self.dtype.itemsize

    def _payload(self, hop: int, ids: Tensor) -> Tensor:
        r"""The request for :obj:`ids` (empty when there are none)."""
        if not ids.numel():
            return ids.to(self.dtype)
        head = torch.tensor([hop, self._key, self._seed], dtype=torch.long)
        return torch.cat([head.view(self.dtype), ids.to(self.dtype)])

    def _open(self, payload: Tensor) -> Tuple[int, int, int, Tensor]:
        r"""``(hop, key, seed, ids)`` of a request."""
        hop, key, seed = payload[:self._head].clone().view(
            torch.long).tolist()
        return hop, key, seed, payload[self._head:].long()

    def _request_cost(self, payload: Tensor) -> int:
        return self.request_cost(self._open(payload)[3]) \
            if payload.numel() else 0

    def _draw_request(self, requester: int, payload: Tensor,
                      time: Optional[Tensor] = None
                      ) -> Tuple[Tensor, Tensor, Tensor]:
        r"""The owner's draw for one request of rank :obj:`requester`
        (``(positions, counts, degree)``), from the request's own
        generator and (shared variates) the requester's batch seed; the
        pull it saved counted."""
        if not payload.numel():
            empty = torch.empty(0, dtype=torch.long)
            return empty, empty, empty
        hop, key, seed, ids = self._open(payload)
        generator = torch.Generator(self.device).manual_seed(
            request_seed(key, hop, requester))
        self._drawing.seed = seed
        try:
            pos, counts, degree = self.owner_draw(hop, ids, generator, time)
        finally:
            self._drawing.seed = None
        if requester != self.part:
            self._count_pull(degree)
        return pos, counts, degree

    def _serve_request(self, requester: int, payload: Tensor) -> Tensor:
        r"""The request service's handler: the answer to one request."""
        if not self._built.wait(self.collectives.context.timeout
                                .total_seconds()):
            raise RuntimeError(f'the frontier sampler of rank {self.part} '
                               f'was not built in time')
        pos, counts, _ = self._draw_request(requester, payload)
        answer = self._answer(pos, counts)
        self.collectives.counters.add(
            'sampling', sent=answer.numel() * answer.element_size(),
            received=(payload.numel() - self._head) *
            payload.element_size(), messages=1)
        return answer

    def _answer(self, pos: Tensor, counts: Tensor) -> Tensor:
        r"""``[counts, neighbour ids (, edge ids)]`` of a request's draw."""
        parts: List[Tensor] = [
            counts.to(self.dtype),
            self.topology.indices.index_select(0, pos).to(self.dtype)]
        if self.edge_ids:  # int64: as pairs of int32 words if need be
            parts.append(self.global_edges(pos).contiguous().view(
                self.dtype))
        return torch.cat(parts)

    def _unpack(self, answer: Tensor, size: int
                ) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
        r"""``(counts, neighbours, edge ids)`` of an answer to a request
        for :obj:`size` nodes."""
        count = answer[:size].long()
        total = int(count.sum())
        edges = answer[size + total:].clone().view(torch.long) \
            if self.edge_ids else None
        return count, answer[size:size + total].long(), edges

    # A hop ##################################################################

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
        owner = self.book.owner(frontier)
        order = torch.argsort(owner, stable=True)
        sizes = torch.bincount(
            owner, minlength=self.collectives.world_size).tolist()
        wanted = list(frontier[order].split(sizes))
        if self.requests is not None and time is None and \
                not self.layer_wise:
            answers = self._ask(hop, wanted)
        else:
            answers = self._exchange(hop, wanted, time, order, sizes,
                                     generator)
        got = [self._unpack(a, n) for a, n in zip(answers, sizes)]
        counts_sorted = torch.cat([g[0] for g in got])
        nbr_sorted = torch.cat([g[1] for g in got])
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(order.numel())
        first = torch.cumsum(counts_sorted, 0) - counts_sorted
        index = expand_ranges(first[inverse], counts_sorted[inverse],
                              nbr_sorted.numel())
        edge = torch.cat([g[2] for g in got])[index] if self.edge_ids \
            else torch.full((index.numel(), ), -1, dtype=torch.long)
        return nbr_sorted[index], counts_sorted[inverse], edge

    def _ask(self, hop: int, wanted: List[Tensor]) -> List[Tensor]:
        r"""Every owner's answer for its nodes of the frontier
        (:obj:`wanted`, per owner): requests to the others, sent at once,
        and this rank's own draw while they are served."""
        pending = {}
        for owner, ids in enumerate(wanted):
            if owner != self.part and ids.numel():
                pending[owner] = self.requests.request(
                    owner, self._op, self._payload(hop, ids),
                    f'hop {hop}: sample the frontier', self._batches)
        answers = []
        for owner, ids in enumerate(wanted):
            if owner == self.part or not ids.numel():
                answers.append(self._answer(*self._draw_request(
                    owner, self._payload(hop, ids))[:2]))
                continue
            answer = pending[owner].result()
            self.collectives.counters.add(
                'sampling', sent=ids.numel() * self.dtype.itemsize,
                received=answer.numel() * answer.element_size(),
                messages=1)
            answers.append(answer)
        return answers

    def _exchange(self, hop: int, wanted: List[Tensor],
                  time: Optional[Tensor], order: Tensor, sizes: List[int],
                  generator: Optional[torch.Generator]) -> List[Tensor]:
        r"""Every owner's answer for its nodes of the frontier, through
        the collectives: requests out, answers back (this rank serves
        every rank's between them)."""
        coll = self.collectives
        asked = coll.exchange(
            [self._payload(hop, ids) for ids in wanted], 'sampling',
            f'hop {hop}: push the frontier to its owners')
        times: List[Optional[Tensor]] = [None] * len(asked)
        if time is not None:
            times = list(coll.exchange(
                list(time[order].split(sizes)), 'sampling',
                f'hop {hop}: push the frontier times to their owners'))
        if self.layer_wise:
            draws = self._layer_draws(hop, asked, order, sizes, generator)
        else:
            draws = [self._draw_request(r, payload, when)[:2]
                     for r, (payload, when) in enumerate(zip(asked, times))]
        return coll.exchange([self._answer(*d) for d in draws], 'sampling',
                             f'hop {hop}: return the sampled neighbours')

    def _count_pull(self, deg: Tensor) -> None:
        r"""What a requester would have pulled for its remote frontier
        nodes of in-degrees :obj:`deg`: an ``indptr`` pair each and the
        lists (and weights)."""
        per_edge = self.topology.indices.element_size() + (
            4 if self.topology.edge_weight is not None else 0)
        self.collectives.counters.add(
            'sampling_pull',
            received=16 * deg.numel() + per_edge * int(deg.sum()))

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(part={self.part}, '
                f'num_neighbors={self.num_neighbors})')

    #: Whether a hop's picks are drawn over the requester's whole frontier
    #: (DSP's Eq. 2; collective hops).
    layer_wise = False

    def _layer_draws(self, hop: int, asked: List[Tensor], order: Tensor,
                     sizes: List[int], generator: Optional[torch.Generator]
                     ) -> List[Tuple[Tensor, Tensor]]:
        r"""Layer-wise hops (a subclass that has them)."""
        raise NotImplementedError


def request_seed(key: int, hop: int, requester: int) -> int:
    r"""The seed of the generator an owner draws one frontier request
    with: splitmix64 of the requester's batch :obj:`key`, the
    :obj:`hop` and the :obj:`requester`'s rank (a non-negative int64).

    Example:
        >>> request_seed(5, 0, 1) == request_seed(5, 0, 1)
        True
        >>> request_seed(5, 0, 1) == request_seed(5, 0, 0)
        False
    """
    return labor_key(labor_key(key, hop), requester) % 2**63


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
        subgraph_type (str): ``'directional'`` or ``'bidirectional'``
            (``'induced'`` is refused).
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
        requests (RequestService, optional): send the frontier requests
            point-to-point through it (``remote='async'``), served between
            the owners' own batches; :obj:`None`: two all-to-alls per hop.

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
                 temporal_strategy: str = 'uniform',
                 requests: Optional[RequestService] = None,
                 **options: Any):
        if subgraph_type == 'induced':
            raise ValueError("collective sampling draws 'directional' or "
                             "'bidirectional' subgraphs, not 'induced'")
        if node_time is not None and edge_time is not None:
            raise ValueError("give 'node_time' or 'edge_time', not both")
        timed = node_time is not None or edge_time is not None
        self._join(book, part, collectives, book.num_nodes, edge_ids,
                   requests)
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
        self._serve_from()

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
            self.collectives, self.book, self.part, node_time)[None], 'node')

    @property
    def num_nodes(self) -> int:
        return self.book.num_nodes

    def owner_draw(self, hop: int, ids: Tensor,
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
        pos, counts = self.draw(hop, start, deg, generator)
        return pos, counts, deg

    def request_cost(self, ids: Tensor) -> int:
        rows = ids - self.start
        indptr = self.topology.indptr
        return int((indptr.index_select(0, rows + 1) -
                    indptr.index_select(0, rows)).sum())

    def global_edges(self, pos: Tensor) -> Tensor:
        return pos + self.edge_offset

    def _layer_draws(self, hop: int, asked: List[Tensor], order: Tensor,
                     sizes: List[int], generator: Optional[torch.Generator]
                     ) -> List[Tuple[Tensor, Tensor]]:
        r"""DSP's Eq. 2 across ranks: the owners send back each frontier
        node's mass (in-degree, or in-edge weight), the requester draws the
        layer's ``size`` picks over its whole frontier and sends each owner
        its nodes' pick counts, and the owners draw that many in-edges of
        each (with replacement, from each request's generator; a repeated
        edge kept once)."""
        size = self.num_neighbors[hop]
        coll = self.collectives
        requests = [self._open(a) if a.numel() else None for a in asked]
        rows = [torch.empty(0, dtype=torch.long) if r is None
                else r[3] - self.start for r in requests]
        indptr = self.topology.indptr
        starts = [indptr.index_select(0, r) for r in rows]
        degs = [indptr.index_select(0, r + 1) - s
                for r, s in zip(rows, starts)]
        for r, deg in enumerate(degs):
            if r != self.part:
                self._count_pull(deg)
        if size < 0:
            return [sample_uniform(s, d, -1, False, None)
                    for s, d in zip(starts, degs)]
        back = coll.exchange([_mass(s, d, self.cum_weight)
                              for s, d in zip(starts, degs)], 'sampling',
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
        draws = []
        for r, (request, start, deg) in enumerate(zip(requests, starts,
                                                      degs)):
            if request is None:
                draws.append((start, deg))  # (empty)
                continue
            gen = torch.Generator(self.device).manual_seed(
                request_seed(request[1], hop, r))
            pos, counts = self._sample(start, deg, got[r], True, gen)
            node = torch.repeat_interleave(
                torch.arange(deg.numel()), counts, output_size=pos.numel())
            keep = first_occurrence_mask(pos)  # a repeated edge once
            draws.append((pos[keep],
                          torch.bincount(node[keep], minlength=deg.numel())))
        return draws


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
                 temporal_strategy: str = 'uniform',
                 requests: Optional[RequestService] = None,
                 **options: Any):
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
        self._join(book, part, collectives, topology.num_nodes, True,
                   requests)
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
        self._serve_from()

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
        return node_time_index(topo, share_node_times(
            self.collectives, self.book, self.part, node_time))

    def _owned_segments(self, ids: Tensor
                        ) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        r"""``(types, segment, relation, owner, degree)`` of this part's
        typed ids: every relation's CSC segment into each node, the node
        each segment belongs to, and each node's in-degree (all
        relations)."""
        topo: HeteroTopology = self.topology
        types = topo.node_type_of(ids)
        rows = ids - topo.node_offset[types] - self.starts[types]
        segment, relation, owner = topo.typed_segments(types, rows)
        deg = topo.indptr.index_select(0, segment + 1) - \
            topo.indptr.index_select(0, segment)
        degree = ids.new_zeros(ids.numel()).index_add_(0, owner, deg)
        return types, segment, relation, owner, degree

    def owner_draw(self, hop: int, ids: Tensor,
                   generator: Optional[torch.Generator],
                   time: Optional[Tensor] = None
                   ) -> Tuple[Tensor, Tensor, Tensor]:
        topo: HeteroTopology = self.topology
        types, segment, relation, owner, degree = self._owned_segments(ids)
        if time is not None:  # the one-machine hop; each type's rows of
            # the part shifted to start at the type's offset
            _, per_node, pos = HeteroNeighborSampler.expand_in_time(
                self, hop, ids - self.starts[types], time, generator)
            return pos, per_node, degree
        start = topo.indptr.index_select(0, segment)
        deg = topo.indptr.index_select(0, segment + 1) - start
        pos, counts = self.pick(hop, start, deg, self.fanout[relation, hop],
                                topo.indices, generator)
        per_node = ids.new_zeros(ids.numel()).index_add_(0, owner, counts)
        return pos, per_node, degree

    def request_cost(self, ids: Tensor) -> int:
        return int(self._owned_segments(ids)[4].sum())

    def global_edges(self, pos: Tensor) -> Tensor:
        return pos + self._shift[self.topology.relation_of(pos)]

    def _relation_edges(self, edge: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        relation = torch.bucketize(edge, self.relation_offset[1:],
                                   right=True)
        return (relation, edge - self.relation_offset[relation],
                torch.arange(edge.numel()))


def share_node_times(collectives: Collectives,
                     book: Union[PartitionBook, HeteroPartitionBook],
                     part: int, node_time: Any) -> Dict[Any, Tensor]:
    r"""Every part's node times by node type, end to end (the whole graph's
    new ids, typed on a heterogeneous one), from :obj:`node_time`: the
    times of the nodes :obj:`part` owns, per node type (checked; a type
    without times has none, and every rank names the same types). A
    homogeneous graph is one node type, :obj:`None`: its :obj:`node_time`
    is one tensor, and so is the answer's ``[None]``. A collective."""
    types: List[Optional[str]] = book.node_types if book.hetero else [None]
    owned = book.offsets.view(len(types), -1).diff(dim=1)  # [types, parts]
    given = node_time if book.hetero else {None: node_time}
    times = _agreed_times(
        collectives, given, "'node_time'", 'node type', types,
        lambda t: (int(owned[types.index(t), part]),
                   f"nodes part {part} owns (new-id order)" if t is None
                   else f"{t!r} nodes part {part} owns (typed new-id "
                        f"order)"))
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
    for k in keys:  # (a homogeneous graph's one type is None)
        if k in given:
            entries, what = count(k)
            times[k] = checked_times(
                given[k], entries, name if k is None else f"{name}[{k!r}]",
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
