r"""Mass moved against the edges, for the hotness policies that follow the
sampler's walk: GIDS's reverse PageRank and the expected accesses of the
loader's fan-outs, on either kind of topology. A homogeneous graph is one
relation: both kinds are CSC *segments* (a node's in-neighbours along one
relation; a :class:`~pyg_fastload.CSCTopology`'s segment ``v`` is node
``v``) listing nodes of one id space (:class:`Segments`). One step gives
every node the summed weight of the segments it is listed in; it runs in
memory through the transposed adjacency, or out of core over the CSC in
bounded chunks for graphs whose transpose does not fit (papers-like's 801M
edges would need about 18 GiB to transpose: :func:`transpose_bytes`, 24
bytes per edge)."""
from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..config import available_memory
from ..graph.kind import is_hetero
from ..graph.topology import index_dtype_for

__all__ = ['Segments', 'ReverseStep', 'reverse_walk_ranks',
           'expected_accesses']

#: Edges per chunk of the out-of-core step (a chunk's weights are 8 bytes
#: per edge, its ids a view of the CSC).
CHUNK_EDGES = 2**25


@dataclass
class Segments:
    r"""A topology as the walks see it: CSC segments listing in-neighbours
    among :attr:`num_nodes` nodes.

    Attributes:
        indptr (torch.Tensor): the segments' CSC offsets.
        indices (torch.Tensor): the listed nodes (in-neighbours).
        num_nodes (int): the nodes there are (every type's).
        node (torch.Tensor, optional): the node every segment belongs to
            (:obj:`None`: segment ``v`` is node ``v``, a homogeneous
            graph).
        relation (torch.Tensor, optional): the relation of every segment
            (:obj:`None`: one relation).
    """
    indptr: Tensor
    indices: Tensor
    num_nodes: int
    node: Optional[Tensor] = None
    relation: Optional[Tensor] = None

    @classmethod
    def of(cls, topo: Any) -> 'Segments':
        r"""The segments of a :class:`~pyg_fastload.CSCTopology` (one
        relation) or a :class:`~pyg_fastload.graph.HeteroTopology` (one
        segment per relation and destination node)."""
        if not is_hetero(topo):
            return cls(topo.indptr, topo.indices, topo.num_nodes)
        relation = torch.repeat_interleave(
            torch.arange(len(topo.edge_types)), topo.segment_offset.diff())
        local = torch.arange(int(topo.segment_offset[-1])) - \
            topo.segment_offset[relation]
        return cls(topo.indptr, topo.indices, topo.num_nodes,
                   topo.node_offset[topo.dst_type[relation]] + local,
                   relation)

    @property
    def num_segments(self) -> int:
        return self.indptr.numel() - 1

    @property
    def num_edges(self) -> int:
        return self.indices.numel()

    def sizes(self) -> Tensor:
        r"""The in-neighbours every segment lists."""
        return self.indptr[1:] - self.indptr[:-1]

    def in_degree(self) -> Tensor:
        r"""Every node's in-neighbours over all its segments."""
        if self.node is None:
            return self.sizes()
        return torch.zeros(self.num_nodes, dtype=torch.long).index_add_(
            0, self.node, self.sizes())

    def out_degree(self) -> Tensor:
        r"""In how many segments every node is listed (``int64``), counted
        in chunks of edges (memory stays bounded)."""
        counts = torch.zeros(self.num_nodes, dtype=torch.long)
        for start in range(0, self.num_edges, CHUNK_EDGES):
            counts += torch.bincount(
                self.indices[start:start + CHUNK_EDGES].long(),
                minlength=self.num_nodes)
        return counts

    def per_segment(self, values: Tensor) -> Tensor:
        r"""A per-node :obj:`values` at every segment."""
        return values if self.node is None else values[self.node]


def _transposed_pattern(seg: Segments) -> Tensor:
    r"""The sparse CSR matrix with a 1 at :math:`(u, s)` for every node
    :math:`u` segment :math:`s` lists, so that a product with a weight
    vector over the segments gives every node the summed weight of the
    segments listing it.

    The CSC lists edges by segment; the rows here are sources, so this is
    one (parallel) sort of the sources. A matrix-vector product over the
    transposed arrays gathers instead of scattering and runs on all
    threads, several times faster per step than an ``index_add_`` over the
    CSC.
    """
    n, s, m = seg.num_nodes, seg.num_segments, seg.num_edges
    # torch wants row offsets and columns of one dtype: int32 where the
    # node, segment and edge counts fit.
    dtype = index_dtype_for(max(n, s, m))
    perm = torch.sort(seg.indices, stable=True).indices
    dst = torch.repeat_interleave(torch.arange(s, dtype=dtype),
                                  seg.sizes(), output_size=m)
    col = dst.index_select(0, perm)
    del dst, perm
    crow = torch.zeros(n + 1, dtype=torch.long)
    torch.cumsum(seg.out_degree(), 0, out=crow[1:])
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter('ignore', UserWarning)
        return torch.sparse_csr_tensor(
            crow.to(dtype), col, torch.ones(m, dtype=torch.float64),
            size=(n, s), check_invariants=False)


def transpose_bytes(seg: Segments) -> int:
    r"""Peak bytes :func:`_transposed_pattern` allocates: the sort's
    permutation, the segments, the columns and ``float64`` values."""
    index = 4 if index_dtype_for(max(seg.num_nodes, seg.num_segments,
                                     seg.num_edges)) == torch.int32 else 8
    return seg.num_edges * (8 + 2 * index + 8)


class ReverseStep:
    r"""``out[u] = sum of weight[s] over the segments s listing u``, as a
    callable (on a homogeneous graph: over the edges ``u -> s``).

    Out of core (:obj:`out_of_core`, default: where the transpose needs
    more than half the available memory) it scatters the CSC's edges chunk
    by chunk of segments (:data:`CHUNK_EDGES` edges), the chunks shared
    round robin by torch's intra-op threads, each with a private ``float64``
    sum of one entry per node (the scatter is bound by memory latency, so
    threads add up).
    """
    def __init__(self, seg: Segments, out_of_core: Optional[bool] = None):
        if out_of_core is None:
            out_of_core = transpose_bytes(seg) > available_memory() // 2
        self.seg = seg
        self.out_of_core = out_of_core
        self._pattern = None if out_of_core else _transposed_pattern(seg)
        threads = min(torch.get_num_threads(),
                      max(1, seg.num_edges // CHUNK_EDGES))
        self._sums = [torch.empty(seg.num_nodes, dtype=torch.float64)
                      for _ in range(threads - 1)] if out_of_core else []
        self._deg = seg.sizes() if out_of_core else None
        # chunks of segments (s0, s1, first edge, end edge)
        indptr = seg.indptr
        bounds = torch.searchsorted(indptr, torch.arange(
            0, seg.num_edges, CHUNK_EDGES, dtype=indptr.dtype)).tolist()
        bounds.append(seg.num_segments)
        self._chunks = [(s0, s1, int(indptr[s0]), int(indptr[s1]))
                        for s0, s1 in zip(bounds[:-1], bounds[1:])
                        if s1 > s0] if out_of_core else []

    def __call__(self, weight: Tensor, out: Tensor) -> Tensor:
        if self._pattern is not None:
            out.copy_(torch.mv(self._pattern, weight))
            return out
        indices, deg = self.seg.indices, self._deg
        targets = [out] + self._sums

        def scatter(k: int) -> None:
            total = targets[k]
            total.zero_()
            for s0, s1, e0, e1 in self._chunks[k::len(targets)]:
                repeated = torch.repeat_interleave(
                    weight[s0:s1], deg[s0:s1], output_size=e1 - e0)
                total.index_add_(0, indices[e0:e1], repeated)

        if not self._sums:
            scatter(0)
            return out
        with ThreadPoolExecutor(len(targets)) as pool:
            list(pool.map(scatter, range(len(targets))))
        for total in self._sums:
            out.add_(total)
        return out


def reverse_walk_ranks(seg: Segments, alpha: float, max_iters: int,
                       tol: float, out_of_core: Optional[bool] = None,
                       progress: bool = False) -> Tensor:
    r"""Power iteration in ``float64`` of the walk to an in-neighbour drawn
    uniformly among all of a node's (of any relation) with teleport
    ``1 - alpha`` (the mass of nodes without in-neighbours spread
    uniformly), until the L1 change is below :obj:`tol` or
    :obj:`max_iters` steps (:class:`ReverseStep` says how each step
    runs)."""
    n = seg.num_nodes
    score = torch.full((n, ), 1.0 / n, dtype=torch.float64)
    if seg.num_edges == 0:
        return score
    step = ReverseStep(seg, out_of_core)
    indeg = seg.in_degree()
    dangling = indeg == 0
    any_dangling = bool(dangling.any())
    inv = 1.0 / indeg.clamp(min=1).to(torch.float64)
    new = torch.empty_like(score)
    bar = tqdm(total=max_iters, desc='reverse PageRank', unit='step',
               disable=not progress, leave=False)
    for _ in range(max_iters):
        step(seg.per_segment(score * inv), new)
        base = 1.0 - alpha
        if any_dangling:
            base += alpha * float(score[dangling].sum())
        new.mul_(alpha).add_(base / n)
        change = float((new - score).abs_().sum())
        score, new = new, score
        bar.update(1)
        bar.set_postfix(change=f'{change:.1e}')
        if change < tol:
            break
    bar.close()
    return score.div_(score.sum())


def expected_accesses(seg: Segments, seeds: Tensor,
                      num_neighbors: Sequence[List[int]],
                      out_of_core: Optional[bool] = None) -> Tensor:
    r"""Expected fetches of every node's row in one epoch whose seeds are
    :obj:`seeds`, under uniform sampling of ``num_neighbors[l][r]``
    in-neighbours along relation ``r`` at hop ``l`` (``-1``: all):
    ``r_0`` is 1 on every seed, ``r_{l+1}(u)`` the sum over the segments
    ``s`` of node ``v`` and relation ``r`` listing ``u`` of
    ``r_l(v) * min(1, f_{l,r} / |s|)``, and the result is
    ``r_0 + ... + r_L`` (``float64``). Repeated visits within a batch
    count each time, so this is an upper estimate that ranks nodes the way
    sampling reaches them."""
    reach = torch.zeros(seg.num_nodes, dtype=torch.float64)
    reach.index_fill_(0, seeds.long(), 1.0)
    total = reach.clone()
    if seg.num_edges == 0:
        return total
    step = ReverseStep(seg, out_of_core)
    share_of = seg.sizes().clamp(min=1).to(torch.float64).reciprocal()
    for fanouts in num_neighbors:
        fan = torch.tensor(fanouts, dtype=torch.float64)
        fan = fan[0] if seg.relation is None else fan[seg.relation]
        share = torch.where(fan < 0, 1.0,
                            (share_of * fan).clamp_(max=1.0))
        step(seg.per_segment(reach) * share, reach)
        total.add_(reach)
    return total
