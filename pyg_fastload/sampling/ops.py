r"""Vectorized building blocks of the samplers: no Python loop over nodes or
edges, only over the (small) fan-out."""
from __future__ import annotations

from typing import Optional, Tuple, Union

import torch
from torch import Tensor

from ..graph.ranges import expand_ranges

__all__ = [
    'sample_uniform',
    'sample_weighted',
    'first_occurrence_mask',
    'arange_as',
]


def arange_as(values: Tensor) -> Tensor:
    r"""``arange(len(values))`` on the device of :obj:`values` (every op
    here follows its inputs' device: CPU, or CUDA for a topology there)."""
    return torch.arange(values.numel(), device=values.device)


def _rand_below(bound: Tensor, generator: Optional[torch.Generator]) -> Tensor:
    r"""A uniform integer in ``[0, bound)`` for every entry of ``bound``."""
    u = torch.rand(bound.shape, dtype=torch.float64, generator=generator,
                   device=bound.device)
    return torch.minimum((u * bound).long(), bound - 1)


def _floyd_subsets(deg: Tensor, k: int,
                   generator: Optional[torch.Generator]) -> Tensor:
    r"""For every row ``i`` a uniform random ``k``-subset of
    ``[0, deg[i])`` (requires ``deg >= k``), by Floyd's algorithm run on all
    rows at once: ``k`` vectorized steps."""
    picks = deg.new_empty((deg.numel(), k))
    for j in range(k):
        upper = deg - k + j  # draw t in [0, upper], keep `upper` on collision
        t = _rand_below(upper + 1, generator)
        if j > 0:
            taken = (picks[:, :j] == t.unsqueeze(1)).any(dim=1)
            t = torch.where(taken, upper, t)
        picks[:, j] = t
    return picks


def sample_uniform(
    start: Tensor,
    deg: Tensor,
    k: Union[int, Tensor],
    replace: bool,
    generator: Optional[torch.Generator] = None,
) -> Tuple[Tensor, Tensor]:
    r"""Draws up to :obj:`k` in-edges uniformly for every frontier node.

    Args:
        start (torch.Tensor): CSC offset of every frontier node.
        deg (torch.Tensor): in-degree of every frontier node.
        k (int or torch.Tensor): fan-out; ``-1`` takes every in-edge. A
            tensor gives a per-node number of draws (with replacement only).
        replace (bool): sample with replacement (``k`` draws per node with
            at least one neighbour) or without (``min(deg, k)`` distinct).
        generator (torch.Generator, optional): source of randomness.

    Returns:
        ``(positions, counts)``: CSC positions of the drawn edges, grouped by
        frontier node in frontier order, and the number drawn per node.
    """
    if replace:
        if isinstance(k, int) and k < 0:
            return expand_ranges(start, deg), deg
        counts = torch.where(deg > 0, k, 0)
        rows = torch.repeat_interleave(arange_as(deg), counts)
        pos = start[rows] + _rand_below(deg[rows], generator)
        return pos, counts
    if not isinstance(k, int):
        raise ValueError("a per-node fan-out needs 'replace=True'")
    if k < 0:
        return expand_ranges(start, deg), deg

    counts = torch.clamp(deg, max=k)
    total = int(counts.sum())
    offsets = torch.cumsum(counts, 0) - counts
    pos = start.new_empty(total)
    full = deg <= k
    if bool(full.any()):
        idx = full.nonzero().view(-1)
        pos[expand_ranges(offsets[idx], deg[idx])] = expand_ranges(
            start[idx], deg[idx])
    part = ~full
    if bool(part.any()):
        idx = part.nonzero().view(-1)
        picks = _floyd_subsets(deg[idx], k, generator)
        slots = offsets[idx].unsqueeze(1) + torch.arange(k, device=deg.device)
        pos[slots.view(-1)] = (start[idx].unsqueeze(1) + picks).view(-1)
    return pos, counts


def sample_weighted(
    start: Tensor,
    deg: Tensor,
    k: Union[int, Tensor],
    replace: bool,
    cum_weight: Tensor,
    weight: Tensor,
    generator: Optional[torch.Generator] = None,
) -> Tuple[Tensor, Tensor]:
    r"""Draws up to :obj:`k` in-edges per frontier node with probability
    proportional to the edge weight; zero-weight edges are never drawn.

    With replacement every draw is a binary search in the global inclusive
    cumulative weight :obj:`cum_weight` (``float64``). Without replacement the
    Efraimidis-Spirakis keys ``u ** (1 / w)`` of every candidate edge are
    ranked per node, which equals successive weighted draws without
    replacement.

    ``k=-1`` takes every positive-weight in-edge, like a fan-out at or
    above the degree does.

    Returns:
        ``(positions, counts)`` as in :func:`sample_uniform`.
    """
    if cum_weight.numel() == 0:  # a graph without edges
        return start.new_empty(0), torch.zeros_like(deg)
    if isinstance(k, int) and k < 0:
        pos = expand_ranges(start, deg)
        rows = torch.repeat_interleave(arange_as(deg), deg,
                                       output_size=pos.numel())
        keep = weight[pos] > 0
        return pos[keep], torch.bincount(rows[keep], minlength=deg.numel())
    lo = torch.where(start > 0, cum_weight[(start - 1).clamp(min=0)], 0.0)
    end = start + deg
    hi = torch.where(deg > 0, cum_weight[(end - 1).clamp(min=0)], 0.0)
    has_mass = hi > lo
    if replace:
        counts = torch.where(has_mass, k, 0)
        rows = torch.repeat_interleave(arange_as(deg), counts)
        u = torch.rand(rows.numel(), dtype=torch.float64, generator=generator,
                       device=deg.device)
        target = lo[rows] + u * (hi[rows] - lo[rows])
        pos = torch.searchsorted(cum_weight, target, right=True)
        pos = torch.minimum(torch.maximum(pos, start[rows]), end[rows] - 1)
        return pos, counts

    if not isinstance(k, int):
        raise ValueError("a per-node fan-out needs 'replace=True'")
    # Candidates: all positive-weight in-edges of every frontier node.
    cand = expand_ranges(start, deg)
    rows = torch.repeat_interleave(arange_as(deg), deg,
                                   output_size=cand.numel())
    w = weight[cand].to(torch.float64)
    keep = w > 0
    cand, rows, w = cand[keep], rows[keep], w[keep]
    u = torch.rand(cand.numel(), dtype=torch.float64, generator=generator,
                   device=deg.device)
    key = torch.log(u.clamp(min=1e-300)) / w  # log of u ** (1 / w)
    order = torch.sort(key, descending=True, stable=True).indices
    order = order[torch.sort(rows[order], stable=True).indices]
    cand, rows = cand[order], rows[order]
    num_pos = torch.bincount(rows, minlength=deg.numel())
    row_start = torch.cumsum(num_pos, 0) - num_pos
    rank = arange_as(cand) - row_start[rows]
    chosen = rank < k
    return cand[chosen], torch.clamp(num_pos, max=k)


def first_occurrence_mask(keys: Tensor) -> Tensor:
    r"""``True`` at the first occurrence of every distinct value in
    :obj:`keys` (one sort; the result keeps the input order)."""
    if keys.numel() == 0:
        return torch.zeros(0, dtype=torch.bool, device=keys.device)
    uniq, inverse = torch.unique(keys, return_inverse=True)
    first = torch.full((uniq.numel(), ), keys.numel(), dtype=torch.long,
                       device=keys.device)
    first.scatter_reduce_(0, inverse, arange_as(keys), 'amin')
    mask = torch.zeros(keys.numel(), dtype=torch.bool, device=keys.device)
    mask[first] = True
    return mask
