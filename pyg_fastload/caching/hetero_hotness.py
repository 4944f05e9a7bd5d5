r"""Hotness on a heterogeneous graph: one score per global node id (every
node type's rows ranked together), under the same policies as on a
homogeneous graph, over every relation at once.

A step moves mass against the edges of every relation: each CSC segment
(one relation into one node) passes a weight to every in-neighbour it
lists, in chunks of :data:`CHUNK_EDGES` edges, so memory stays bounded."""
from __future__ import annotations

from typing import Dict, List, Sequence, Union

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..graph.hetero_topology import EdgeType, HeteroTopology
from ..sampling.hetero_sampler import hetero_fanouts

__all__ = ['hetero_out_degree', 'hetero_reverse_pagerank',
           'hetero_expected_access', 'segment_destinations']

#: Edges scattered at once by a step.
CHUNK_EDGES = 2**24


def segment_destinations(topo: HeteroTopology) -> Tensor:
    r"""The global id of the node every CSC segment lists the in-neighbours
    of (along the segment's relation)."""
    sizes = topo.segment_offset.diff()
    rel = torch.repeat_interleave(torch.arange(len(topo.edge_types)), sizes)
    local = torch.arange(int(topo.segment_offset[-1])) - \
        topo.segment_offset[rel]
    return topo.node_offset[topo.dst_type[rel]] + local


def _step(topo: HeteroTopology, seg_weight: Tensor) -> Tensor:
    r"""``out[u]`` = the summed weight of the segments listing ``u``."""
    out = torch.zeros(topo.num_nodes, dtype=torch.float64)
    indptr, deg = topo.indptr, topo.indptr.diff()
    num_segments = deg.numel()
    bounds = torch.searchsorted(indptr, torch.arange(
        0, topo.num_edges, CHUNK_EDGES, dtype=indptr.dtype)).tolist()
    bounds.append(num_segments)
    for s0, s1 in zip(bounds[:-1], bounds[1:]):
        if s1 <= s0:
            continue
        e0, e1 = int(indptr[s0]), int(indptr[s1])
        out.index_add_(0, topo.indices[e0:e1].long(), torch.repeat_interleave(
            seg_weight[s0:s1], deg[s0:s1], output_size=e1 - e0))
    return out


def hetero_out_degree(topo: HeteroTopology) -> Tensor:
    r"""In how many in-neighbour lists (over all relations) every node
    appears (``int64``)."""
    return torch.bincount(topo.indices.long(), minlength=topo.num_nodes)


def hetero_reverse_pagerank(topo: HeteroTopology, alpha: float = 0.85,
                            max_iters: int = 50, tol: float = 1e-6,
                            progress: bool = False) -> Tensor:
    r"""GIDS' reverse PageRank over every relation: the walk steps from a
    node to one of its in-neighbours (of any relation) drawn uniformly,
    teleporting with probability ``1 - alpha``."""
    n = topo.num_nodes
    score = torch.full((n, ), 1.0 / max(n, 1), dtype=torch.float64)
    if topo.num_edges == 0:
        return score
    seg_dst = segment_destinations(topo)
    indeg = torch.zeros(n, dtype=torch.long).index_add_(
        0, seg_dst, topo.indptr.diff())
    dangling = indeg == 0
    inv = 1.0 / indeg.clamp(min=1).to(torch.float64)
    bar = tqdm(total=max_iters, desc='reverse PageRank', unit='step',
               disable=not progress, leave=False)
    for _ in range(max_iters):
        new = _step(topo, (score * inv)[seg_dst])
        base = 1.0 - alpha + alpha * float(score[dangling].sum())
        new.mul_(alpha).add_(base / n)
        change = float((new - score).abs_().sum())
        score = new
        bar.update(1)
        if change < tol:
            break
    bar.close()
    return score.div_(score.sum())


def hetero_expected_access(
    topo: HeteroTopology, seeds: Tensor,
    num_neighbors: Union[Sequence[int], Dict[EdgeType, List[int]]],
) -> Tensor:
    r"""Expected fetches of every node's row in one epoch over
    :obj:`seeds` (global ids) under the heterogeneous sampler's fan-outs:
    at hop ``l`` every segment of relation ``r`` into ``v`` passes
    ``reach(v) * min(1, f_r[l] / deg)`` to each node it lists (``-1``:
    all), the sum over hops plus 1 on every seed (``float64``)."""
    fanouts = hetero_fanouts(num_neighbors, topo.edge_types)
    hops = len(next(iter(fanouts.values()), []))
    reach = torch.zeros(topo.num_nodes, dtype=torch.float64)
    reach.index_fill_(0, seeds.long(), 1.0)
    total = reach.clone()
    seg_dst = segment_destinations(topo)
    rel = torch.repeat_interleave(torch.arange(len(topo.edge_types)),
                                  topo.segment_offset.diff())
    deg = topo.indptr.diff().to(torch.float64)
    for hop in range(hops):
        fan = torch.tensor([fanouts[e][hop] for e in topo.edge_types],
                           dtype=torch.float64)[rel]
        share = torch.where(fan < 0, torch.ones_like(deg),
                            (fan / deg.clamp(min=1)).clamp(max=1))
        reach = _step(topo, reach[seg_dst] * share)
        total += reach
    return total
