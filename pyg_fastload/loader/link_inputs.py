r"""Checks of the link loader's label edges (``edge_label_index``,
``edge_label``, ``edge_label_time``), homogeneous or of one edge type, and of
the negatives a batch draws, with errors naming the argument, the value and
the fix."""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.sampler.base import NegativeSampling

__all__ = ['check_label_edges', 'check_label_time', 'check_negatives',
           'hetero_label_edges', 'MAX_NEGATIVES']

#: The most negatives one batch may draw: each is a seed whose neighbourhood
#: is sampled, as a label edge's endpoints are (16.8M seeds already take
#: gigabytes of node ids before a feature is gathered).
MAX_NEGATIVES = 2**24


def check_label_edges(edge_label_index: Any, edge_label: Any, num_src: int,
                      num_dst: int, where: str = '') -> None:
    r"""``edge_label_index`` is ``[2, E]`` integer ids, sources in ``[0,
    num_src)`` and destinations in ``[0, num_dst)``, and ``edge_label`` (if
    given) has one entry per label edge."""
    if not isinstance(edge_label_index, Tensor):
        raise TypeError(f"'edge_label_index' must be a [2, num_edges] "
                        f"tensor{where}, got "
                        f"{type(edge_label_index).__name__}")
    if edge_label_index.dim() != 2 or edge_label_index.size(0) != 2:
        raise ValueError(f"'edge_label_index' has shape "
                         f"{list(edge_label_index.shape)}: pass [2, "
                         f"num_edges] (sources, then destinations)")
    if edge_label_index.dtype.is_floating_point or \
            edge_label_index.dtype == torch.bool:
        raise TypeError(f"'edge_label_index' has dtype "
                        f"{edge_label_index.dtype}: pass integer node ids")
    for row, count, end in ((0, num_src, 'source'),
                            (1, num_dst, 'destination')):
        ids = edge_label_index[row]
        if ids.numel():
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= count:
                raise IndexError(f"'edge_label_index' holds {end} node id "
                                 f"{low if low < 0 else high}, outside [0, "
                                 f"{count}){where}")
    if edge_label is not None and (not isinstance(edge_label, Tensor) or
                                   edge_label.size(0) !=
                                   edge_label_index.size(1)):
        size = edge_label.size(0) if isinstance(edge_label, Tensor) else \
            type(edge_label).__name__
        raise ValueError(f"'edge_label' has {size} entries for "
                         f"{edge_label_index.size(1)} label edges: give one "
                         f"label per column of 'edge_label_index'")


def hetero_label_edges(edge_label_index: Any, edge_label: Any,
                       topology: Any) -> Tuple[Tuple[str, str, str],
                                               Optional[Tensor]]:
    r"""A ``HeteroData``'s label edges as ``(edge type, tensor or None)``
    (``None``: every edge of the type), checked against the type's node
    counts."""
    if isinstance(edge_label_index, (tuple, list)) and \
            len(edge_label_index) == 2 and \
            isinstance(edge_label_index[0], (tuple, list)):
        edge_type, index = tuple(edge_label_index[0]), edge_label_index[1]
    elif isinstance(edge_label_index, (tuple, list)) and \
            len(edge_label_index) == 3:
        edge_type, index = tuple(edge_label_index), None
    else:
        raise ValueError(f"'edge_label_index' of a HeteroData must name the "
                         f"edge type: ('author', 'writes', 'paper') or "
                         f"(edge_type, [2, num_edges] tensor), got "
                         f"{type(edge_label_index).__name__}")
    if edge_type not in topology.edge_types:
        raise ValueError(f"'edge_label_index' names edge type {edge_type}, "
                         f"which the graph does not have (edge types: "
                         f"{topology.edge_types})")
    if index is None:
        count = topology.num_edges_of(edge_type)
        if edge_label is not None and edge_label.size(0) != count:
            raise ValueError(f"'edge_label' has {edge_label.size(0)} "
                             f"entries for the {count} edges of "
                             f"{edge_type}")
        return edge_type, None
    check_label_edges(index, edge_label, topology.num_nodes_of(edge_type[0]),
                      topology.num_nodes_of(edge_type[-1]),
                      f' for edge type {edge_type}')
    return edge_type, index


def check_label_time(edge_label_time: Any, edge_label_index: Any,
                     sampler: Any) -> None:
    r""":obj:`edge_label_time` holds one time per label edge (of
    :obj:`edge_label_index`: a tensor, or ``(edge type, tensor or None)``),
    in the dtype of the graph's times."""
    if edge_label_time is None:
        return
    if isinstance(edge_label_index, tuple):
        edge_type, index = edge_label_index
        count = sampler.topology.num_edges_of(edge_type) if index is None \
            else index.size(1)
    else:
        count = edge_label_index.size(1)
    if not isinstance(edge_label_time, Tensor) or \
            edge_label_time.dim() != 1 or edge_label_time.numel() != count:
        shape = list(edge_label_time.shape) if isinstance(
            edge_label_time, Tensor) else type(edge_label_time).__name__
        raise ValueError(f"'edge_label_time' is {shape}: give one time per "
                         f"label edge, a 1-D tensor of {count}")
    sampler.temporal.cast(edge_label_time, "'edge_label_time'")


def check_negatives(neg_sampling: Optional[NegativeSampling],
                    batch_size: int) -> None:
    r"""A batch of :obj:`batch_size` label edges draws at most
    :data:`MAX_NEGATIVES` negatives (``neg_sampling.amount`` per label
    edge)."""
    if neg_sampling is None:
        return
    amount = neg_sampling.amount
    if math.isfinite(amount) and \
            math.ceil(batch_size * amount) <= MAX_NEGATIVES:
        return
    raise ValueError(f"'neg_sampling.amount' is {amount!r} negatives per "
                     f"label edge: a batch of {batch_size:,} may draw at "
                     f"most {MAX_NEGATIVES:,}; give at most "
                     f"{MAX_NEGATIVES / batch_size:g} per label edge, or a "
                     f"smaller batch_size")
