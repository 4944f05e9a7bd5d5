r"""Mass moved against the edges, for the hotness policies that follow the
sampler's walk: GIDS's reverse PageRank and the expected accesses of the
loader's fan-outs. One step gives every node the summed weight of the nodes
it is an in-neighbour of; it runs in memory through the transposed
adjacency, or out of core over the CSC in bounded chunks for graphs whose
transpose does not fit (papers-like's 801M edges would need about 18 GiB
to transpose)."""
from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Optional, Sequence

import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..config import available_memory
from ..graph.topology import CSCTopology, index_dtype_for

__all__ = ['ReverseStep', 'reverse_walk_ranks', 'expected_accesses']

#: Edges per chunk of the out-of-core step (a chunk's weights are 8 bytes
#: per edge, its ids a view of the CSC).
CHUNK_EDGES = 2**25


def _transposed_pattern(topo: CSCTopology) -> Tensor:
    r"""The sparse CSR matrix with a 1 at :math:`(u, v)` for every edge
    :math:`u \to v`, so that a product with a weight vector gives every
    node the summed weight of its out-neighbours.

    The CSC lists edges by destination; the rows here are sources, so this
    is one (parallel) sort of the sources. A matrix-vector product over the
    transposed arrays gathers instead of scattering and runs on all threads,
    several times faster per step than an ``index_add_`` over the CSC.
    """
    n, m = topo.num_nodes, topo.num_edges
    # torch wants row offsets and columns of one dtype: int32 where both
    # the node and the edge count fit.
    dtype = index_dtype_for(max(n, m))
    perm = torch.sort(topo.indices, stable=True).indices
    dst = torch.repeat_interleave(torch.arange(n, dtype=dtype),
                                  topo.in_degree(), output_size=m)
    col = dst.index_select(0, perm)
    del dst, perm
    crow = torch.zeros(n + 1, dtype=torch.long)
    torch.cumsum(topo.out_degree(), 0, out=crow[1:])
    with warnings.catch_warnings():  # "sparse CSR support is in beta"
        warnings.simplefilter('ignore', UserWarning)
        return torch.sparse_csr_tensor(
            crow.to(dtype), col, torch.ones(m, dtype=torch.float64),
            size=(n, n), check_invariants=False)


def transpose_bytes(topo: CSCTopology) -> int:
    r"""Peak bytes :func:`_transposed_pattern` allocates: the sort's
    permutation, the destinations, the columns and ``float64`` values."""
    index = 4 if index_dtype_for(max(topo.num_nodes, topo.num_edges)) == \
        torch.int32 else 8
    return topo.num_edges * (8 + 2 * index + 8)


class ReverseStep:
    r"""``out[u] = sum of weight[v] over the edges u -> v``, as a callable.

    Out of core (:obj:`out_of_core`, default: where the transpose needs
    more than half the available memory) it scatters the CSC's edges chunk
    by chunk of destinations (:data:`CHUNK_EDGES` edges), the chunks shared
    round robin by torch's intra-op threads, each with a private ``float64``
    sum of one entry per node (the scatter is bound by memory latency, so
    threads add up).
    """
    def __init__(self, topo: CSCTopology, out_of_core: Optional[bool] = None):
        if out_of_core is None:
            out_of_core = transpose_bytes(topo) > available_memory() // 2
        self.topo = topo
        self.out_of_core = out_of_core
        self._pattern = None if out_of_core else _transposed_pattern(topo)
        threads = min(torch.get_num_threads(),
                      max(1, topo.num_edges // CHUNK_EDGES))
        self._sums = [torch.empty(topo.num_nodes, dtype=torch.float64)
                      for _ in range(threads - 1)] if out_of_core else []
        self._deg = topo.in_degree() if out_of_core else None
        # chunks of destinations (v0, v1, first edge, end edge)
        indptr = topo.indptr
        bounds = torch.searchsorted(indptr, torch.arange(
            0, topo.num_edges, CHUNK_EDGES, dtype=indptr.dtype)).tolist()
        bounds.append(topo.num_nodes)
        self._chunks = [(v0, v1, int(indptr[v0]), int(indptr[v1]))
                        for v0, v1 in zip(bounds[:-1], bounds[1:])
                        if v1 > v0] if out_of_core else []

    def __call__(self, weight: Tensor, out: Tensor) -> Tensor:
        if self._pattern is not None:
            out.copy_(torch.mv(self._pattern, weight))
            return out
        indices, deg = self.topo.indices, self._deg
        targets = [out] + self._sums

        def scatter(k: int) -> None:
            total = targets[k]
            total.zero_()
            for v0, v1, e0, e1 in self._chunks[k::len(targets)]:
                repeated = torch.repeat_interleave(
                    weight[v0:v1], deg[v0:v1], output_size=e1 - e0)
                total.index_add_(0, indices[e0:e1], repeated)

        if not self._sums:
            scatter(0)
            return out
        with ThreadPoolExecutor(len(targets)) as pool:
            list(pool.map(scatter, range(len(targets))))
        for total in self._sums:
            out.add_(total)
        return out


def reverse_walk_ranks(topo: CSCTopology, alpha: float, max_iters: int,
                       tol: float, out_of_core: Optional[bool] = None,
                       progress: bool = False) -> Tensor:
    r"""Power iteration in ``float64`` of the walk to a uniformly drawn
    in-neighbour with teleport ``1 - alpha`` (the mass of nodes without
    in-neighbours spread uniformly), until the L1 change is below
    :obj:`tol` or :obj:`max_iters` steps (:class:`ReverseStep` says how
    each step runs)."""
    n = topo.num_nodes
    score = torch.full((n, ), 1.0 / n, dtype=torch.float64)
    if topo.num_edges == 0:
        return score
    step = ReverseStep(topo, out_of_core)
    indeg = topo.in_degree()
    dangling = indeg == 0
    any_dangling = bool(dangling.any())
    inv = 1.0 / indeg.clamp(min=1).to(torch.float64)
    new = torch.empty_like(score)
    bar = tqdm(total=max_iters, desc='reverse PageRank', unit='step',
               disable=not progress, leave=False)
    for _ in range(max_iters):
        step(score * inv, new)
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


def expected_accesses(topo: CSCTopology, seeds: Tensor,
                      num_neighbors: Sequence[int],
                      out_of_core: Optional[bool] = None) -> Tensor:
    r"""Expected fetches of every node's row in one epoch whose seeds are
    :obj:`seeds`, under uniform sampling of :obj:`num_neighbors` in-
    neighbours per hop (``-1``: all): ``r_0`` is 1 on every seed,
    ``r_{l+1}(u) = sum over u -> v of r_l(v) * min(1, f_l / deg_in(v))``,
    and the result is ``r_0 + ... + r_L`` (``float64``). Repeated visits
    within a batch count each time, so this is an upper estimate that ranks
    nodes the way sampling reaches them."""
    n = topo.num_nodes
    reach = torch.zeros(n, dtype=torch.float64)
    reach.index_fill_(0, seeds, 1.0)
    total = reach.clone()
    if topo.num_edges == 0:
        return total
    step = ReverseStep(topo, out_of_core)
    deg = topo.in_degree().to(torch.float64)
    for fanout in num_neighbors:
        share = torch.ones_like(deg) if fanout < 0 else \
            (fanout / deg.clamp(min=1)).clamp_(max=1.0)
        step(reach * share, reach)
        total.add_(reach)
    return total
