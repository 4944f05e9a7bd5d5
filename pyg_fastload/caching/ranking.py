r"""Ranking rows by hotness and scoring a cache against an access trace
(:func:`hot_order`, :func:`hit_ratio`, :func:`hit_ratio_curve`), with the
argument checks the hotness policies share."""
from __future__ import annotations

from typing import Any, List, Sequence

import torch
from torch import Tensor

__all__ = ['hot_order', 'hit_ratio', 'hit_ratio_curve']


def check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"'{name}' must be an int, got {value!r}")
    if value < low:
        raise ValueError(f"'{name}' = {value}: pass an int >= {low}")
    return value


def node_ids(name: str, nodes: Any, num_nodes: int) -> Tensor:
    r"""A 1-D ``int64`` id tensor from ids or a boolean node mask."""
    if not isinstance(nodes, Tensor):
        try:
            nodes = torch.as_tensor(nodes)
        except (TypeError, ValueError, RuntimeError):
            raise TypeError(f"'{name}' must be a tensor of node ids or a "
                            f"boolean node mask, got "
                            f"{type(nodes).__name__}") from None
    if nodes.dtype == torch.bool:
        if nodes.numel() != num_nodes:
            raise ValueError(f"'{name}' is a boolean mask of "
                             f"{nodes.numel()} entries but the graph has "
                             f"{num_nodes} nodes; pass one entry per node "
                             f"or a tensor of node ids")
        return nodes.reshape(-1).nonzero().view(-1)
    if nodes.dtype.is_floating_point or nodes.dtype.is_complex:
        raise TypeError(f"'{name}' must hold integer node ids or be a "
                        f"boolean mask, got dtype {nodes.dtype}")
    nodes = nodes.reshape(-1).long()
    if nodes.numel() > 0:
        low, high = int(nodes.min()), int(nodes.max())
        if low < 0 or high >= num_nodes:
            raise ValueError(f"'{name}' holds node id "
                             f"{low if low < 0 else high}, outside "
                             f"[0, num_nodes={num_nodes})")
    return nodes


def _check_scores(name: str, scores: Any) -> Tensor:
    if not isinstance(scores, Tensor):
        raise TypeError(f"'{name}' must be a torch.Tensor, got "
                        f"{type(scores).__name__}")
    if scores.dim() != 1:
        raise ValueError(f"'{name}' must be 1-D (one entry per node), got "
                         f"shape {list(scores.shape)}")
    if scores.dtype.is_complex:
        raise TypeError(f"'{name}' must be real, got dtype {scores.dtype}")
    if scores.dtype.is_floating_point:
        if bool(torch.isnan(scores).any()):
            raise ValueError(f"'{name}' holds NaN; hotness must be "
                             f"comparable")
        return scores
    return scores.long()


def hot_order(scores: Tensor) -> Tensor:
    r"""Node ids hottest first; ties go to the smaller node id (a stable
    sort), so the order is deterministic.  A cache of ``k`` rows holds
    ``hot_order(scores)[:k]``.

    Args:
        scores (torch.Tensor): one score per node.

    Example:
        >>> import torch
        >>> from pyg_fastload.caching import hot_order
        >>> hot_order(torch.tensor([0.5, 2.0, 0.5, 1.0])).tolist()
        [1, 3, 0, 2]
    """
    scores = _check_scores('scores', scores)
    return torch.sort(scores, descending=True, stable=True).indices


def _check_counts(counts: Any) -> Tensor:
    counts = _check_scores('counts', counts)
    if counts.numel() > 0 and bool((counts < 0).any()):
        raise ValueError("'counts' holds negative entries; pass access "
                         "counts (see access_counts)")
    return counts


def hit_ratio(counts: Tensor, cached: Tensor) -> float:
    r"""The share of the accesses in :obj:`counts` that a cache holding
    :obj:`cached` serves: ``counts[cached].sum() / counts.sum()`` (``0.0``
    for an empty trace).

    Args:
        counts (torch.Tensor): accesses per node (see :func:`access_counts`).
        cached (torch.Tensor): the cached nodes, as a boolean mask or ids
            (repeated ids count once).

    Example:
        >>> import torch
        >>> from pyg_fastload.caching import hit_ratio
        >>> hit_ratio(torch.tensor([5, 3, 0, 2]), torch.tensor([0, 1]))
        0.8
    """
    counts = _check_counts(counts)
    n = counts.numel()
    mask = cached
    if not (isinstance(cached, Tensor) and cached.dtype == torch.bool):
        mask = torch.zeros(n, dtype=torch.bool)
        mask[node_ids('cached', cached, n)] = True
    elif cached.numel() != n:
        raise ValueError(f"'cached' is a boolean mask of {cached.numel()} "
                         f"entries but 'counts' has {n}; pass one entry "
                         f"per node or a tensor of node ids")
    total = float(counts.sum())
    if total == 0.0:
        return 0.0
    return float(counts[mask.reshape(-1)].sum()) / total


def hit_ratio_curve(counts: Tensor, order: Tensor,
                    fractions: Sequence[float]) -> List[float]:
    r"""Hit ratios of caches filled along :obj:`order` with
    ``round(f * num_nodes)`` rows for every ``f`` in :obj:`fractions`, from
    one cumulative sum.

    Args:
        counts (torch.Tensor): accesses per node.
        order (torch.Tensor): node ids hottest first, each at most once
            (e.g. :func:`hot_order`); a shorter order caps the cache.
        fractions (List[float]): cache sizes as fractions of the nodes, in
            ``[0, 1]``.
    """
    counts = _check_counts(counts)
    n = counts.numel()
    order = node_ids('order', order, n)
    if order.numel() > 0 and int(torch.bincount(order).max()) > 1:
        raise ValueError("'order' repeats a node id: pass every node at "
                         "most once (see hot_order)")
    for f in fractions:
        if isinstance(f, bool) or not isinstance(f, (int, float)) or \
                not 0.0 <= float(f) <= 1.0:
            raise ValueError(f"'fractions' holds {f!r}: pass cache sizes "
                             f"as fractions of the nodes in [0, 1]")
    cum = torch.zeros(order.numel() + 1, dtype=torch.float64)
    torch.cumsum(counts[order].to(torch.float64), 0, out=cum[1:])
    total = float(counts.sum())
    if total == 0.0:
        return [0.0 for _ in fractions]
    return [float(cum[min(int(round(float(f) * n)), order.numel())]) / total
            for f in fractions]
