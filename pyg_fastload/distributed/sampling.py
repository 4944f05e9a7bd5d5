r"""DSP's collective sampling: each hop's frontier is pushed to the owners of
its nodes, each owner samples the requests it received from its own CSC
with the ordinary vectorised sampler, and the sampled neighbour ids (with
per-node counts) come back the same way; frontier nodes a rank owns never
leave it.

Per hop, two exchanges (each one all-to-all of sizes and one of data):
frontier ids out, ``[counts, neighbour ids (, edge ids)]`` back. Ids travel
as ``int32`` when the graph allows it. Every rank must sample the same
number of batches with the same number of hops (the loaders run in
lockstep).
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import torch
from torch import Tensor

from ..graph.ranges import expand_ranges
from ..graph.topology import CSCTopology, index_dtype_for
from ..partition import PartitionBook
from ..sampling import FastNeighborSampler
from .collectives import Collectives

__all__ = ['CollectiveSampler']


class CollectiveSampler(FastNeighborSampler):
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

    :attr:`pull_bytes` (and the counters' ``'sampling_pull'`` kind, on the
    owner's side) counts what pulling the remote frontier nodes' adjacency
    lists would have moved instead (an ``indptr`` pair and the list, plus
    weights), for comparison with the pushed bytes the collectives count
    as ``'sampling'`` (DSP Fig. 11).
    """
    def __init__(self, topology: CSCTopology, book: PartitionBook, part: int,
                 collectives: Collectives, num_neighbors: List[int],
                 replace: bool = False, disjoint: bool = False,
                 subgraph_type: str = 'directional',
                 weight_attr: Optional[str] = None, edge_ids: bool = False):
        if subgraph_type == 'induced':
            raise ValueError("collective sampling draws 'directional' or "
                             "'bidirectional' subgraphs, not 'induced'")
        if collectives.world_size != book.num_parts:
            raise ValueError(f'{book.num_parts} parts but world size '
                             f'{collectives.world_size}')
        super().__init__(topology, num_neighbors, replace=replace,
                         subgraph_type=subgraph_type, disjoint=disjoint,
                         weight_attr=weight_attr)
        self.book = book
        self.part = part
        self.collectives = collectives
        self.start, self.end = book.part_range(part)
        if topology.num_nodes != self.end - self.start:
            raise ValueError(f'the topology has {topology.num_nodes} rows, '
                             f'part {part} owns {self.end - self.start}')
        self.edge_ids = edge_ids
        self.dtype = index_dtype_for(book.num_nodes)
        edges = collectives.all_gather_ints(
            [topology.num_edges], 'count the edges of every part').view(-1)
        self.edge_offset = int(edges[:part].sum())
        self.pull_bytes = 0

    @property
    def num_nodes(self) -> int:
        return self.book.num_nodes

    def expand(self, hop: int, frontier: Tensor,
               generator: Optional[torch.Generator]
               ) -> Tuple[Tensor, Tensor, Tensor]:
        coll = self.collectives
        owner = self.book.owner(frontier)
        order = torch.argsort(owner, stable=True)
        sizes = torch.bincount(owner, minlength=coll.world_size).tolist()
        asked = coll.exchange(
            list(frontier[order].to(self.dtype).split(sizes)), 'sampling',
            f'hop {hop}: push the frontier to its owners')
        lengths = [a.numel() for a in asked]
        ids = torch.cat(asked).long() - self.start
        topo = self.topology
        start = topo.indptr.index_select(0, ids)
        deg = topo.indptr.index_select(0, ids + 1) - start
        pos, counts = self.draw(hop, start, deg, generator)
        nbr = topo.indices.index_select(0, pos).to(self.dtype)
        self._count_pull(deg, lengths)
        replies = []
        drawn = counts.split(lengths)
        sums = [int(c.sum()) for c in drawn]
        nbrs = nbr.split(sums)
        edges = (pos + self.edge_offset).split(sums)
        for r, chunk in enumerate(drawn):
            parts: List[Tensor] = [chunk.to(self.dtype), nbrs[r]]
            if self.edge_ids:  # int64: as pairs of int32 words if need be
                parts.append(edges[r].contiguous().view(self.dtype))
            replies.append(torch.cat(parts))
        back = coll.exchange(replies, 'sampling',
                             f'hop {hop}: return the sampled neighbours')
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
        self.pull_bytes += total
        self.collectives.counters.add('sampling_pull', received=total)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(part={self.part}, '
                f'num_neighbors={self.num_neighbors})')
