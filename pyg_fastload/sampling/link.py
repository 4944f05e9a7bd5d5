r"""Link-level sampling, one path for both graph kinds: the label edges'
endpoints (of one edge type ``(src, rel, dst)`` on a heterogeneous graph;
a homogeneous graph is one node type and one relation), with negatives
drawn from the loader's generator among the source and destination types,
become the seeds of one sample of any hop-wise sampler, returned in the
layout of PyG's ``LinkNeighborLoader`` (``edge_label_index`` /
``edge_label``, or ``src_index`` / ``dst_pos_index`` /
``dst_neg_index``): shared trees, or one tree per label edge endpoint
(``disjoint``, which temporal sampling needs)."""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.sampler import EdgeSamplerInput
from torch_geometric.sampler.base import NegativeSampling

from .ops import arange_as
from .temporal import draw_before

__all__ = ['EdgeKeys', 'LabelEnds', 'add_negatives', 'negative_nodes',
           'negatives_drawer', 'sample_edges', 'label_times']

#: Redraws of the negatives that hit a true edge before strict negative
#: sampling draws the rest exactly among the source's non-neighbours.
STRICT_ROUNDS = 8


class LabelEnds(NamedTuple):
    r"""Where a relation's label edges end among a sampler's node ids.

    Args:
        src (tuple): ``(first id, count)`` of the source node type.
        dst (tuple): ``(first id, count)`` of the destination node type.
        one_type (bool): both ends are one node type (always on a
            homogeneous graph, one type from ``0``).
    """
    src: Tuple[int, int]
    dst: Tuple[int, int]
    one_type: bool


class EdgeKeys:
    r"""Every distinct edge ``u -> v`` of a CSC topology as the sorted key
    ``u * N + v`` (``N`` destinations), to test drawn pairs against (strict
    negatives), and the gaps between a node's out-neighbours, to draw its
    ``r``-th non-neighbour by one binary search. :obj:`num_sources`: the
    source node count of a relation between two node types (default: the
    same nodes as the destinations)."""

    def __init__(self, topology: Any, num_sources: Optional[int] = None):
        n = topology.num_nodes
        dst = torch.repeat_interleave(
            torch.arange(n, device=topology.indptr.device),
            topology.indptr.diff())
        #: Destinations a source can link to.
        self.num_nodes = n
        self.keys = torch.unique(topology.indices.long() * n + dst)
        src = torch.div(self.keys, n, rounding_mode='floor')
        self.out_degree = torch.bincount(
            src, minlength=n if num_sources is None else num_sources)
        self.first = torch.cumsum(self.out_degree, 0) - self.out_degree
        # key - rank within the source's run: u * N + (v_i - i), sorted
        self.gaps = self.keys - (arange_as(self.keys) - self.first[src])

    def non_neighbours(self, src: Tensor,
                       generator: Optional[torch.Generator]) -> Tensor:
        r"""A node drawn uniformly among those :obj:`src` has no edge to,
        for every entry of :obj:`src` (each needs one)."""
        free = self.num_nodes - self.out_degree[src]
        u = torch.rand(src.numel(), dtype=torch.float64, generator=generator,
                       device=src.device)
        r = torch.minimum((u * free).long(), free - 1)
        below = torch.searchsorted(self.gaps, src * self.num_nodes + r,
                                   right=True) - self.first[src]
        return r + below

    def contains(self, src: Tensor, dst: Tensor) -> Tensor:
        r"""Whether each pair ``(src[i], dst[i])`` is an edge."""
        key = src * self.num_nodes + dst
        if not self.keys.numel():
            return torch.zeros_like(key, dtype=torch.bool)
        pos = torch.searchsorted(self.keys, key).clamp_(
            max=self.keys.numel() - 1)
        return self.keys[pos] == key


def _strict(src: Tensor, dst: Tensor, keys: EdgeKeys,
            redraw: Callable[[str, Tensor], Tensor], redraw_src: bool,
            generator: Optional[torch.Generator]) -> None:
    r"""Redraws (in place) the negative pairs that are true edges: the
    destination, and the source too for binary negatives (:obj:`redraw`
    (endpoint, positions) -> nodes); after :obj:`STRICT_ROUNDS`, uniform
    negatives (:obj:`generator` given) take the rest exactly among their
    source's non-neighbours, weighted or temporal ones fail."""
    full = keys.out_degree[src] >= keys.num_nodes
    if not redraw_src and bool(full.any()):
        node = int(src[full][0])
        raise ValueError(f"strict negative sampling: source node {node} "
                         f"has an edge to every node, so it has no negative "
                         f"destination; drop its label edges or use "
                         f"non-strict negatives")
    for _ in range(STRICT_ROUNDS):
        bad = keys.contains(src, dst).nonzero().view(-1)
        if not bad.numel():
            return
        dst[bad] = redraw('dst', bad)
        if redraw_src:
            src[bad] = redraw('src', bad)
    bad = keys.contains(src, dst).nonzero().view(-1)
    if generator is not None and \
            bool((keys.out_degree[src[bad]] < keys.num_nodes).all()):
        dst[bad] = keys.non_neighbours(src[bad], generator)
        return
    node = int(src[bad][0])
    raise ValueError(f"strict negative sampling: {STRICT_ROUNDS} draws found "
                     f"no non-edge for source node {node} (it is linked to "
                     f"{int(keys.out_degree[node])} of {keys.num_nodes} "
                     f"nodes); use non-strict negatives on so dense a graph")


def negative_nodes(count: int, num_nodes: int, neg: NegativeSampling,
                   endpoint: str, generator: torch.Generator) -> Tensor:
    r""":obj:`count` nodes drawn uniformly (or by ``neg.src_weight`` /
    ``neg.dst_weight`` for :obj:`endpoint` ``'src'`` / ``'dst'``) with
    replacement; like PyG's default, a drawn pair may be a true edge.
    Weighted draws invert the weights' running sum (no limit on the
    nodes, where ``torch.multinomial`` takes at most 2^24)."""
    weight = neg.src_weight if endpoint == 'src' else neg.dst_weight
    if weight is not None:
        weight = weight.to(generator.device, torch.float64)
        if weight.numel() != num_nodes:
            raise ValueError(f"'neg_sampling.{endpoint}_weight' has "
                             f"{weight.numel()} entries, the graph "
                             f"{num_nodes} nodes: give one weight per node")
        total = weight.cumsum(0)
        drawn = torch.rand(count, generator=generator, dtype=torch.float64,
                           device=generator.device) * total[-1]
        # strictly below the sum (a product may round up to it): then a
        # node of weight 0 spans no interval of the sum, never drawn
        drawn = torch.minimum(drawn, total[-1].nextafter(total.new_zeros(())))
        return torch.searchsorted(total, drawn, right=True)
    return torch.randint(num_nodes, (count, ), generator=generator,
                         device=generator.device)


def negatives_drawer(counts: Dict[str, Tuple[int, int]],
                     neg: NegativeSampling, generator: torch.Generator,
                     temporal: Any, time: Optional[Tensor]
                     ) -> Callable[[str, Tensor], Tensor]:
    r"""``(endpoint, positions) -> nodes``: the negatives at those
    positions among the ``count`` nodes from ``first`` (:obj:`counts` maps
    ``'src'`` and ``'dst'`` to ``(first, count)``; ids from ``first``),
    drawn among the nodes not later than the seed time ``time[position %
    len(time)]`` when the graph has node times."""
    def draw(endpoint: str, where: Tensor) -> Tensor:
        first, count = counts[endpoint]
        if time is None or temporal is None or temporal.node_time is None:
            return negative_nodes(where.numel(), count, neg, endpoint,
                                  generator)
        when = time.index_select(0, where % time.numel())
        weight = neg.src_weight if endpoint == 'src' else neg.dst_weight
        if weight is None:
            return temporal.earlier_nodes(where.numel(), when, generator,
                                          first, first + count)
        return draw_before(lambda n: negative_nodes(
            n, count, neg, endpoint, generator), where.numel(), when,
            temporal.node_time[first:first + count], generator)
    return draw


def add_negatives(src: Tensor, dst: Tensor, label: Any,
                  neg: Optional[NegativeSampling],
                  draw: Callable[[str, Tensor], Tensor],
                  edge_keys: Optional[EdgeKeys], exact: bool,
                  generator: torch.Generator) -> Tuple[Tensor, Tensor, Any]:
    r"""The label edges with :obj:`neg`'s negatives appended, drawn by
    :obj:`draw` (binary: pairs labelled 0; triplet: destinations), in
    ``amount`` rounds over the positives: negative ``j`` belongs to positive
    ``j % num_pos``. With :obj:`edge_keys`, no negative pair is a true edge
    (:obj:`exact`: the last misses are drawn exactly among the source's
    non-neighbours)."""
    if neg is None:
        return src, dst, label
    num_pos = src.numel()
    num_neg = math.ceil(num_pos * neg.amount)
    triplet = neg.is_triplet()
    where = torch.arange(num_neg, device=src.device)
    src_neg = src.repeat(int(neg.amount)) if triplet else draw('src', where)
    dst_neg = draw('dst', where)
    if edge_keys is not None:
        _strict(src_neg, dst_neg, edge_keys, draw, not triplet,
                generator if exact else None)
    dst = torch.cat([dst, dst_neg])
    if triplet:
        return src, dst, label
    if label is None:
        label = torch.ones(num_pos, device=src.device)
    return torch.cat([src, src_neg]), dst, torch.cat(
        [label, label.new_zeros((num_neg, ) + tuple(label.shape[1:]))])


def label_times(time: Tensor, count: int) -> Tensor:
    r"""The time of each of :obj:`count` label edges, positives first and
    negative ``j`` at the time of positive ``j % num_pos``."""
    return time.repeat(math.ceil(count / time.numel()))[:count]


def _seeds(src: Tensor, dst: Tensor, ends: LabelEnds, disjoint: bool
           ) -> Tuple[Tensor, Tensor, Tensor]:
    r"""The seeds (ids among all the graph's nodes) and every label edge's
    source and destination index among the seeds of its type: one set if
    both ends have one type, distinct ids unless :obj:`disjoint` (one tree
    per endpoint)."""
    first_src, first_dst = ends.src[0], ends.dst[0]
    if ends.one_type:
        seeds = torch.cat([src, dst])
        index = arange_as(seeds)
        if not disjoint:
            seeds, index = seeds.unique(return_inverse=True)
        return (seeds + first_src, index[:src.numel()],
                index[src.numel():])
    if disjoint:
        return (torch.cat([src + first_src, dst + first_dst]),
                arange_as(src), arange_as(dst))
    src_seeds, src_index = src.unique(return_inverse=True)
    dst_seeds, dst_index = dst.unique(return_inverse=True)
    return (torch.cat([src_seeds + first_src, dst_seeds + first_dst]),
            src_index, dst_index)


def sample_edges(sampler: Any, inputs: EdgeSamplerInput,
                 neg_sampling: Optional[NegativeSampling],
                 generator: torch.Generator, strict: bool = False) -> Any:
    r"""Samples around the label edges of :obj:`inputs` (positives, then
    ``neg_sampling``'s negatives) with the hop-wise :obj:`sampler`, on a
    homogeneous graph (one node type, one relation: ``input_type``
    :obj:`None`) or along the edge type ``input_type`` of a heterogeneous
    one; ``metadata`` as PyG's link samplers give it.

    Args:
        sampler: a :class:`~pyg_fastload.sampling.FastNeighborSampler` (or
            any hop-wise sampler); its ``label_ends``, ``edge_keys``,
            ``seed_time`` and ``sample_global`` answer for the graph's kind.
        inputs (EdgeSamplerInput): the label edges (ids of their types).
        neg_sampling (NegativeSampling, optional): binary or triplet
            negatives, drawn among the source and destination types.
        generator (torch.Generator): draws the negatives and the sample.
        strict (bool): no negative pair is an edge of the relation.

    Negatives are drawn in ``amount`` rounds over the positives: negative
    ``j`` belongs to positive ``j % num_pos`` (its tree in ``batch``, its
    time, its triplet row). A temporal sampler gives every label edge's
    endpoints the edge's time (``edge_label_time``) and draws negatives
    only among nodes not later than it.

    """
    ends = sampler.label_ends(inputs.input_type)
    device = generator.device  # the sampler's
    src, dst = inputs.row.long().to(device), inputs.col.long().to(device)
    label: Any = inputs.label
    if label is not None:
        label = label.to(device)
    num_pos = src.numel()
    time = inputs.time
    if time is not None or sampler.temporal is not None:
        if time is None:
            raise ValueError("a temporal link sampler needs every label "
                             "edge's time: give 'edge_label_time'")
        time = sampler.seed_time(src + ends.src[0], time, 'edge_label_time')
    triplet = neg_sampling is not None and neg_sampling.is_triplet()
    if neg_sampling is not None:
        temporal = sampler.temporal
        exact = neg_sampling.dst_weight is None and (
            temporal is None or temporal.node_time is None)
        draw = negatives_drawer({'src': ends.src, 'dst': ends.dst},
                                neg_sampling, generator, temporal, time)
        src, dst, label = add_negatives(
            src, dst, label, neg_sampling, draw,
            sampler.edge_keys(inputs.input_type) if strict else None,
            exact, generator)
    seeds, src_index, dst_index = _seeds(src, dst, ends, sampler.disjoint)
    times = None
    if time is not None:  # every label edge's endpoints at its time
        times = torch.cat([label_times(time, src.numel()),
                           label_times(time, dst.numel())])
    # PyG's disjoint trees: a seed's position modulo num_pos
    out = sampler.sample_global(seeds, generator, times,
                                num_pos if sampler.disjoint else None)
    src_time = None if times is None else times[:src.numel()]
    if triplet:
        out.metadata = (inputs.input_id, src_index, dst_index[:num_pos],
                        dst_index[num_pos:].view(-1, num_pos).t()
                        .contiguous().squeeze(-1), src_time)
    else:
        out.metadata = (inputs.input_id, torch.stack([src_index, dst_index]),
                        label, src_time)
    return out
