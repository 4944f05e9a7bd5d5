r"""Layer-neighbour sampling (LABOR; Balin & Çatalyürek, NeurIPS 2023): a
drop-in for neighbour sampling with the same fan-outs that samples far
fewer distinct vertices.

At every hop, each in-edge ``(u, t)`` of a frontier node ``t`` is taken
when ``r_u <= pi_ut`` (Poisson sampling), where ``r_u`` is **one** uniform
variate per source vertex ``u``, shared by every destination of the hop
(so destinations pick overlapping neighbours), and ``pi_ut`` the edge's
inclusion probability:

* LABOR-0: ``pi_ut = min(1, c_t * a_ut)`` with ``c_t = k / sum_u a_ut``
  (``a``: the edge's weight, 1 on an unweighted graph): every destination
  expects ``k`` in-neighbours (all of them when it has no more), each as
  likely as neighbour sampling makes it. The mean of the sampled rows
  needs no weights.
* LABOR-i (``importance_sampling=i``, ``-1``: until it converges): a
  vertex probability ``pi_u`` found by ``i`` fixed-point iterations that
  lower the expected number of distinct sources, ``pi_ut = min(1, c_t *
  pi_u)`` with ``c_t`` chosen so that the estimator of each destination
  has neighbour sampling's variance (the paper's Eq. 22). Batches then
  carry each sampled edge's weight ``edge_weight = a_ut / (sum_u a_ut *
  pi_ut)``, so that ``sum_u edge_weight * x_u`` over the sampled edges is
  an unbiased estimate of the (weighted) mean of every in-neighbour's row.

The variates are a hash of a per-batch seed, the hop (unless
:obj:`layer_dependency`: the same variates at every hop) and the global
node id: any rank computes the same ``r_u`` for a vertex from the same
seed (what DSP's collective sampling needs).
"""
from __future__ import annotations

import threading
from typing import Any, List, NamedTuple, Optional, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.sampler import SamplerOutput
from torch_geometric.sampler.base import SubgraphType

from ..graph.ranges import expand_ranges
from .hetero_sampler import HeteroNeighborSampler
from .neighbor_sampler import FastNeighborSampler

__all__ = ['LaborSampler', 'uniform_variates', 'labor_key']

_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
#: Relative tolerance of the fixed-point iterations.
_EPS = 1e-4
#: The most iterations ``importance_sampling=-1`` (until convergence) runs.
MAX_ITERATIONS = 100


def _signed(value: int) -> int:
    r""":obj:`value` modulo 2**64 as a signed 64-bit integer."""
    value &= _MASK64
    return value - (1 << 64) if value >> 63 else value


def _shr(x: Tensor, bits: int) -> Tensor:
    r"""The logical (unsigned) right shift of 64-bit words."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def labor_key(seed: int, hop: int) -> int:
    r"""The hash key of hop :obj:`hop` of a batch drawn with :obj:`seed`
    (splitmix64 of the pair, as a signed 64-bit integer)."""
    x = (seed + (hop + 1) * _GOLDEN) & _MASK64
    x = ((x ^ (x >> 30)) * _MIX1) & _MASK64
    x = ((x ^ (x >> 27)) * _MIX2) & _MASK64
    return _signed(x ^ (x >> 31))


def uniform_variates(ids: Tensor, key: int) -> Tensor:
    r"""One uniform variate in ``[0, 1)`` per entry of :obj:`ids` (float64),
    a function of the id and :obj:`key` alone: equal ids get equal
    variates, on any rank and device (splitmix64 of ``id * golden + key``,
    its top 53 bits).

    Example:
        >>> import torch
        >>> r = uniform_variates(torch.tensor([3, 7, 3]), labor_key(0, 0))
        >>> bool(r[0] == r[2]), bool((r >= 0).all() and (r < 1).all())
        (True, True)
    """
    x = ids.long() * _signed(_GOLDEN) + key
    x = (x ^ _shr(x, 30)) * _signed(_MIX1)
    x = (x ^ _shr(x, 27)) * _signed(_MIX2)
    x = x ^ _shr(x, 31)
    return _shr(x, 11).double() * (2.0 ** -53)


def _segment_sum(values: Tensor, segment: Tensor, count: int) -> Tensor:
    return values.new_zeros(count).index_add_(0, segment, values)


class Candidates(NamedTuple):
    r"""A hop's candidate in-edges (:meth:`LaborSampler.inclusion`)."""
    #: CSC position of every candidate edge, grouped by segment.
    pos: Tensor
    #: The segment (destination) of every candidate.
    segment: Tensor
    #: Its source vertex (the id its variate is hashed from).
    source: Tensor
    #: Its inclusion probability.
    prob: Tensor
    #: Its estimator weight if taken (``a_ut / (A_t * prob)``).
    weight: Tensor


class LaborSampler(FastNeighborSampler):
    r"""Layer-neighbour sampling (see the module's description) behind PyG's
    ``BaseSampler`` contract, on homogeneous and heterogeneous graphs
    (a ``HeteroData`` or typed stores give the heterogeneous engine, each
    relation with its own fan-outs as in
    :class:`~pyg_fastload.sampling.HeteroNeighborSampler`).

    Args:
        data: a ``Data``, ``HeteroData``, ``(FeatureStore, GraphStore)``
            tuple or topology.
        num_neighbors: fan-outs per hop, as neighbour sampling takes them
            (each destination expects that many in-neighbours; ``-1``: all).
        importance_sampling (int): fixed-point iterations of LABOR-*
            (``0``: LABOR-0; ``-1``: until the expected number of sampled
            vertices stops falling). With it, batches carry
            ``edge_weight`` (the estimator's weight of every sampled edge).
        layer_dependency (bool): the same variate for a vertex at every
            hop (sampled vertices are then likelier to be sampled again
            one hop further: fewer distinct vertices).
        **options: :class:`~pyg_fastload.sampling.FastNeighborSampler`'s
            (``subgraph_type``, ``disjoint``, ``weight_attr``, ``time_attr``
            with ``'uniform'`` temporal sampling among each destination's
            in-edges not later than its seed, ``share_memory``,
            ``device``); ``replace=True`` and ``temporal_strategy='last'``
            (which takes the most recent edges and draws nothing) are
            refused: LABOR takes each edge at most once.

    Example:
        >>> import torch
        >>> from torch_geometric.data import Data
        >>> from pyg_fastload import FastNeighborLoader
        >>> gen = torch.Generator().manual_seed(0)
        >>> data = Data(x=torch.randn(500, 8, generator=gen),
        ...             edge_index=torch.randint(0, 500, (2, 20000),
        ...                                      generator=gen))
        >>> loader = FastNeighborLoader(data, num_neighbors=[10, 5],
        ...                             batch_size=64,
        ...                             neighbor_sampler='labor')
        >>> batch = next(iter(loader))
        >>> batch.batch_size
        64
    """
    #: One draw spans the hop's whole frontier (its variates are shared).
    hop_tasks = False
    shared_variates = True

    def __init__(self, data: Any, num_neighbors: Any, *,
                 importance_sampling: int = 0,
                 layer_dependency: bool = False, **options: Any):
        if options.get('replace'):
            raise ValueError("'replace=True': LABOR takes each edge at most "
                             "once (Poisson sampling): leave it out, or use "
                             "neighbor_sampler='neighbor'")
        strategy = options.get('temporal_strategy', 'uniform')
        if strategy != 'uniform':
            raise ValueError(f"'temporal_strategy={strategy!r}' takes the "
                             f"most recent edges and draws nothing: LABOR "
                             f"samples with 'uniform'")
        subgraph_type = options.get('subgraph_type', 'directional')
        if isinstance(importance_sampling, bool) or not isinstance(
                importance_sampling, int) or importance_sampling < -1:
            raise ValueError(f"'importance_sampling' must be an int >= -1 "
                             f"(0: LABOR-0, i: LABOR-i, -1: until it "
                             f"converges), got {importance_sampling!r}")
        if not isinstance(layer_dependency, bool):
            raise ValueError(f"'layer_dependency' must be True or False, got "
                             f"{layer_dependency!r}")
        if importance_sampling and SubgraphType(subgraph_type) != \
                SubgraphType.directional:
            raise ValueError(f"'importance_sampling={importance_sampling}' "
                             f"weighs every sampled edge: it needs "
                             f"subgraph_type='directional' (got "
                             f"{subgraph_type!r})")
        self.importance_sampling = importance_sampling
        self.layer_dependency = layer_dependency
        super().__init__(data, num_neighbors, **options)
        self._weights = threading.local()

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.pop('_weights', None)
        return state

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._weights = threading.local()

    @classmethod
    def gives_edge_weight(cls, **options: Any) -> bool:
        return bool(options.get('importance_sampling', 0))

    # The draw ################################################################

    def batch_seed(self, generator: Optional[torch.Generator]) -> int:
        r"""The seed of the batch's variates: the batch's generator's own
        (without one, a draw of torch's global RNG; a collective sampler
        shares one across its ranks instead)."""
        if generator is None:
            return int(torch.randint(0, 2**62, (1, )))
        return generator.initial_seed()

    def _hop_edges(self, hop: int, frontier: int, in_edges: int) -> int:
        return in_edges  # every candidate in-edge is weighed

    def pick(self, hop: int, start: Tensor, deg: Tensor,
             k: Union[int, Tensor], indices: Tensor,
             generator: Optional[torch.Generator]
             ) -> Tuple[Tensor, Tensor]:
        seed = self.batch_seed(generator)
        key = labor_key(seed, 0 if self.layer_dependency else hop)
        pos, counts, weight = self.labor_draw(start, deg, k, indices, key)
        stash = getattr(self._weights, 'hops', None)
        if stash is not None and weight is not None:
            stash.append(weight)
        return pos, counts

    def labor_draw(self, start: Tensor, deg: Tensor, k: Union[int, Tensor],
                   indices: Tensor, key: int
                   ) -> Tuple[Tensor, Tensor, Optional[Tensor]]:
        r"""``(positions, counts, weights)``: the in-edges ``[start, start +
        deg)`` of every segment taken for fan-out :obj:`k` with the
        variates of :obj:`key`; ``weights`` (each taken edge's estimator
        weight) with :attr:`importance_sampling`, else :obj:`None`."""
        edges = self.inclusion(start, deg, k, indices)
        keep = uniform_variates(edges.source, key) < edges.prob
        counts = torch.bincount(edges.segment[keep], minlength=deg.numel())
        weight = edges.weight[keep].float() if self.importance_sampling \
            else None
        return edges.pos[keep], counts, weight

    def inclusion(self, start: Tensor, deg: Tensor, k: Union[int, Tensor],
                  indices: Tensor) -> 'Candidates':
        r"""Every candidate in-edge ``[start, start + deg)`` of every
        segment with its inclusion probability for fan-out :obj:`k` and its
        estimator weight (what a draw takes does not change them; the
        variates decide)."""
        num = deg.numel()
        total = int(deg.sum())
        pos = expand_ranges(start, deg, total)
        segment = torch.repeat_interleave(
            torch.arange(num, device=deg.device), deg, output_size=total)
        base = None  # a_ut of every candidate edge (None: all 1)
        if self.topology.edge_weight is not None:
            base = self.topology.edge_weight.index_select(0, pos).double()
        fanout = torch.as_tensor(k, dtype=torch.float64,
                                 device=deg.device).expand(num)
        degree = deg.double()
        mass = degree if base is None else _segment_sum(base, segment, num)
        # every edge of a destination with k < 0 or k >= its degree (its
        # c_t: k_t / A_t with k_t its degree at most, so that its sources
        # raise LABOR-*'s vertex probabilities no more than any other's)
        whole = (fanout < 0) | (fanout >= degree)
        c = torch.where(fanout < 0, degree, fanout.clamp(max=degree)) / \
            mass.clamp(min=torch.finfo(torch.float64).tiny)
        source = indices.index_select(0, pos).long()
        if self.importance_sampling:
            prob = _importance(c, segment, source, base, fanout, degree,
                               mass, whole, self.importance_sampling)
        else:
            prob = c.index_select(0, segment)
            if base is not None:
                prob = prob * base
        taken = torch.ones_like(prob) if base is None else \
            (base > 0).double()  # (zero-weight edges never)
        prob = torch.where(whole.index_select(0, segment), taken,
                           prob.clamp(max=1.0))
        top = torch.ones_like(prob) if base is None else base
        weight = top / (mass.index_select(0, segment) *
                        prob.clamp(min=torch.finfo(torch.float64).tiny))
        return Candidates(pos, segment, source, prob, weight)

    # Weights on the batches ##################################################

    def sample(self, seeds: Tensor,
               generator: Optional[torch.Generator] = None,
               seed_time: Optional[Tensor] = None) -> SamplerOutput:
        if not self.importance_sampling:
            return super().sample(seeds, generator, seed_time)
        self._weights.hops = []
        try:
            out = super().sample(seeds, generator, seed_time)
            hops: List[Tensor] = self._weights.hops
        finally:
            self._weights.hops = None
        none = torch.empty(0, device=out.row.device)
        out.edge_weight = torch.cat(hops) if hops else none
        return out

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}(num_neighbors='
                f'{self.num_neighbors}, importance_sampling='
                f'{self.importance_sampling}, layer_dependency='
                f'{self.layer_dependency}, disjoint={self.disjoint}, '
                f'time_attr={self.time_attr!r})')


class HeteroLaborSampler(LaborSampler, HeteroNeighborSampler):
    r""":class:`LaborSampler` on a heterogeneous graph (what
    ``LaborSampler(hetero_data, ...)`` makes): each relation of a hop drawn
    with its own fan-out, the variates shared across relations (a source
    vertex is one vertex whichever relation reaches it); ``edge_weight``
    per relation."""


LaborSampler.typed_class = HeteroLaborSampler


def _importance(c: Tensor, segment: Tensor, source: Tensor,
                base: Optional[Tensor], fanout: Tensor, degree: Tensor,
                mass: Tensor, whole: Tensor, iterations: int) -> Tensor:
    r"""LABOR-*'s inclusion probability of every candidate edge: the vertex
    probabilities ``pi_u`` from fixed-point iterations (each ``pi_u`` times
    the largest ``c_t`` among its destinations), each destination's
    ``c_t`` solved so that its estimator has neighbour sampling's variance
    (``sum_u a_ut^2 / min(1, c_t pi_u) = A_t^2 / k - A_t^2 / d_t + sum_u
    a_ut^2``), until the expected number of sampled vertices stops falling
    (or after :obj:`iterations`)."""
    num = c.numel()
    vertex, inverse = torch.unique(source, return_inverse=True)
    square = torch.ones_like(segment, dtype=torch.float64) if base is None \
        else base * base
    target = mass * mass / fanout.clamp(min=1) - mass * mass / \
        degree.clamp(min=1) + _segment_sum(square, segment, num)
    solve = ~whole & (fanout > 0)
    pi: Optional[Tensor] = None
    expected = torch.inf
    rounds = MAX_ITERATIONS if iterations < 0 else iterations
    for round in range(rounds):
        step = c.index_select(0, segment)
        if pi is None and base is not None:
            step = step * base
        best = torch.zeros(vertex.numel(), dtype=torch.float64,
                           device=c.device).scatter_reduce_(
            0, inverse, step.clamp(max=torch.finfo(torch.float64).max),
            'amax')
        pi = best if pi is None else pi * best
        edge_pi = pi.index_select(0, inverse)
        c = _solve_c(c, segment, edge_pi, square, target, solve)
        now = float(pi.clamp(max=1.0).sum())
        if now / expected >= 1 - _EPS:
            break
        expected = now
    return c.index_select(0, segment) * pi.index_select(0, inverse)


def _solve_c(c: Tensor, segment: Tensor, edge_pi: Tensor, square: Tensor,
             target: Tensor, solve: Tensor) -> Tensor:
    r"""Each destination's ``c_t`` with ``sum_u a_ut^2 / min(1, c_t pi_u)``
    equal to its :obj:`target`, by the multiplicative iteration ``c <- c *
    f(c) / target`` (``f`` falls as ``c`` grows), for the destinations in
    :obj:`solve`."""
    c = c.clone()
    num = c.numel()
    active = solve.clone()
    c[active] = c[active].clamp(min=1e-300)
    for _ in range(MAX_ITERATIONS):
        if not bool(active.any()):
            break
        prob = (c.index_select(0, segment) * edge_pi).clamp(
            min=1e-300, max=1.0)
        value = _segment_sum(square / prob, segment, num)
        ratio = value / target
        c = torch.where(active, c * ratio, c)
        done = torch.minimum(value, target) / torch.maximum(
            value, target) >= 1 - _EPS
        active &= ~done
    return c
