r"""Checks of the link loader's label edges (``edge_label_index``,
``edge_label``, ``edge_label_time``), homogeneous or of one edge type, and of
the negatives a batch draws, with errors naming the argument, the value and
the fix."""
from __future__ import annotations

import math
from typing import Any, List, Optional, Tuple

import numpy as np
import torch
from torch import Tensor
from torch_geometric.typing import DEFAULT_REL, EdgeType
from torch_geometric.sampler.base import (
    NegativeSampling,
    NegativeSamplingMode,
)

__all__ = ['check_label_edges', 'check_label_time', 'check_negatives',
           'check_negative_spec', 'hetero_label_edges', 'names_edge_type',
           'MAX_NEGATIVES']

#: The values of ``neg_sampling``'s mode.
NEGATIVE_MODES = tuple(mode.value for mode in NegativeSamplingMode)

#: The most negatives one batch may draw: each is a seed whose neighbourhood
#: is sampled, as a label edge's endpoints are (16.8M seeds already take
#: gigabytes of node ids before a feature is gathered).
MAX_NEGATIVES = 2**24


def names_edge_type(edge_label_index: Any) -> bool:
    r"""Whether :obj:`edge_label_index` names an edge type (a string, a
    tuple of strings, or ``(edge type, edges)``), as only a ``HeteroData``'s
    label edges do."""
    if isinstance(edge_label_index, str):
        return True
    if not isinstance(edge_label_index, (tuple, list)) or \
            len(edge_label_index) == 0:
        return False
    first = edge_label_index[0]
    return isinstance(first, str) or (
        isinstance(first, (tuple, list)) and len(first) > 0 and
        all(isinstance(name, str) for name in first))


def _not_a_tensor(value: Any, name: str, shape: str, where: str) -> str:
    r"""The message for :obj:`name` given as a list, tuple or NumPy array,
    which PyG's ``LinkNeighborLoader`` does not take either (it fails on
    the missing ``.clone()``), with the conversion to pass instead."""
    if isinstance(value, np.ndarray):
        kind, fix = 'a NumPy array', f'torch.from_numpy({name})'
    elif isinstance(value, (tuple, list)):
        kind = f'a {type(value).__name__}'
        fix = (f'torch.stack({name})' if len(value) and
               all(isinstance(v, Tensor) for v in value)
               else f'torch.tensor({name})')
    else:
        kind, fix = f'a {type(value).__name__}', None
    text = f"'{name}' must be {shape}{where}, got {kind}"
    if fix is not None:
        text += (f" (PyG's LinkNeighborLoader takes only a tensor too): "
                 f"pass {fix}")
    return text


def check_label_edges(edge_label_index: Any, edge_label: Any, num_src: int,
                      num_dst: int, where: str = '') -> None:
    r"""``edge_label_index`` is ``[2, E]`` integer ids, sources in ``[0,
    num_src)`` and destinations in ``[0, num_dst)``, and ``edge_label`` (if
    given) has one entry per label edge."""
    if not isinstance(edge_label_index, Tensor):
        raise TypeError(_not_a_tensor(edge_label_index, 'edge_label_index',
                                      'a [2, num_edges] tensor', where))
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
    _check_edge_label(edge_label, edge_label_index.size(1), where)


def _check_edge_label(edge_label: Any, count: int, where: str = '') -> None:
    r"""``edge_label`` (if given) is a tensor of one label per label
    edge."""
    if edge_label is None:
        return
    if not isinstance(edge_label, Tensor):
        raise TypeError(_not_a_tensor(edge_label, 'edge_label',
                                      'a tensor of one label per label edge',
                                      where))
    if edge_label.dim() == 0 or edge_label.size(0) != count:
        size = edge_label.size(0) if edge_label.dim() else 'no'
        raise ValueError(f"'edge_label' has {size} entries for {count} "
                         f"label edges{where}: give one label per column of "
                         f"'edge_label_index'")


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
            len(edge_label_index) in (2, 3) and \
            all(isinstance(name, str) for name in edge_label_index):
        edge_type, index = tuple(edge_label_index), None
    else:
        raise ValueError(f"'edge_label_index' of a HeteroData must name the "
                         f"edge type: ('author', 'writes', 'paper') or "
                         f"(edge_type, [2, num_edges] tensor), got "
                         f"{type(edge_label_index).__name__}")
    # two node types no relation joins: PyG's default relation, whose
    # label edges are given (the graph has none of them)
    unjoined = len(edge_type) == 2 and index is not None
    if len(edge_type) == 2:
        edge_type = _edge_type_between(edge_type, topology.edge_types,
                                       topology.node_types)
    if edge_type not in topology.edge_types and not unjoined:
        raise ValueError(f"'edge_label_index' names edge type {edge_type}, "
                         f"which the graph does not have (edge types: "
                         f"{topology.edge_types})")
    if index is None:
        _check_edge_label(edge_label, topology.num_edges_of(edge_type),
                          f' (every edge of {edge_type})')
        return edge_type, None
    check_label_edges(index, edge_label, topology.num_nodes_of(edge_type[0]),
                      topology.num_nodes_of(edge_type[-1]),
                      f' for edge type {edge_type}')
    return edge_type, index


def _edge_type_between(ends: Tuple[str, str], edge_types: List[EdgeType],
                       node_types: List[str]) -> EdgeType:
    r"""The one edge type from ``ends[0]`` to ``ends[1]`` (PyG's reading of
    ``(source type, destination type)``); where no relation joins two node
    types, PyG's default ``(ends[0], 'to', ends[1])`` (label edges of a
    graph without such edges)."""
    found = [e for e in edge_types if (e[0], e[-1]) == ends]
    if not found and set(ends) <= set(node_types):
        return (ends[0], DEFAULT_REL, ends[1])
    if len(found) != 1:
        raise ValueError(f"'edge_label_index' names {ends}, but the graph "
                         f"has {len(found)} edge types from {ends[0]!r} to "
                         f"{ends[1]!r}: name one of "
                         f"{found or edge_types} as (source, relation, "
                         f"destination)")
    return found[0]


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
                    batch_size: int,
                    name: str = 'neg_sampling.amount') -> None:
    r"""A batch of :obj:`batch_size` label edges draws at most
    :data:`MAX_NEGATIVES` negatives (``neg_sampling.amount`` per label
    edge; the argument that gave it is :obj:`name`)."""
    if neg_sampling is None:
        return
    amount = neg_sampling.amount
    total = batch_size * amount  # inf where a float amount is huge
    if _finite(total) and math.ceil(total) <= MAX_NEGATIVES:
        return
    raise ValueError(f"'{name}' is {_shown(amount)} negatives "
                     f"per label edge: a batch of {batch_size:,} may draw at "
                     f"most {MAX_NEGATIVES:,}; give at most "
                     f"{MAX_NEGATIVES / batch_size:g} per label edge, or a "
                     f"smaller batch_size")


def _finite(amount: Any) -> bool:
    r"""Whether :obj:`amount` (an int or a float) is finite; an int always
    is, even one too large for a float (where ``math.isfinite`` raises
    ``OverflowError``)."""
    return isinstance(amount, int) or math.isfinite(amount)


def _shown(amount: Any) -> str:
    r""":obj:`amount` as a message shows it (an int beyond 64 bits by its
    size: Python refuses to print one of over 4,300 digits)."""
    if isinstance(amount, int) and amount.bit_length() > 64:
        return (f"{'less than -' if amount < 0 else 'more than '}"
                f"2**{amount.bit_length() - 1}")
    return repr(amount)


def _check_amount(amount: Any, name: str, none: bool = False,
                  whole: bool = False) -> None:
    r"""A finite number of negatives per label edge, above 0 (or 0 too
    where :obj:`none` means no negatives; a whole number where
    :obj:`whole`, as triplet mode draws)."""
    if isinstance(amount, bool) or not isinstance(amount, (int, float)) or \
            not _finite(amount) or not (amount > 0 or
                                        none and amount == 0):
        raise ValueError(f"'{name}' is {_shown(amount)}: give a number of "
                         f"negatives per label edge (finite, e.g. 1 or "
                         f"0.5)")
    if whole and amount != math.floor(amount):
        raise ValueError(f"'{name}' is {_shown(amount)}, but triplet "
                         f"negative sampling draws a whole number of "
                         f"negatives per label edge: give an int, e.g. 1 "
                         f"or 2")


def _check_weight(weight: Any, name: str) -> None:
    if weight is None:
        return
    if not isinstance(weight, Tensor) or weight.dim() != 1 or \
            not weight.dtype.is_floating_point:
        raise TypeError(f"'{name}' must be a 1-D floating-point tensor of "
                        f"one weight per node")
    if not bool(torch.isfinite(weight).all()) or bool((weight < 0).any()) \
            or not bool((weight > 0).any()):
        raise ValueError(f"'{name}' holds a negative, NaN or infinite "
                         f"weight, or no positive one: negatives are drawn "
                         f"in proportion to finite weights >= 0, not all 0")


def check_negative_spec(neg_sampling: Any, neg_sampling_ratio: Any) -> None:
    r"""``neg_sampling`` (a mode, a dict of PyG's ``NegativeSampling``
    arguments or one) and ``neg_sampling_ratio`` are what PyG can cast,
    with errors naming the valid values (PyG's own say less)."""
    if neg_sampling_ratio is not None:
        _check_amount(neg_sampling_ratio, 'neg_sampling_ratio', none=True)
    if neg_sampling is None:
        return
    if isinstance(neg_sampling, NegativeSampling):
        spec = dict(mode=neg_sampling.mode.value, amount=neg_sampling.amount,
                    src_weight=neg_sampling.src_weight,
                    dst_weight=neg_sampling.dst_weight)
    elif isinstance(neg_sampling, str):
        spec = dict(mode=neg_sampling)
    elif isinstance(neg_sampling, dict):
        spec = neg_sampling
    else:
        raise TypeError(f"'neg_sampling' must be one of {NEGATIVE_MODES}, a "
                        f"dict such as dict(mode='binary', amount=2) or a "
                        f"NegativeSampling, got {type(neg_sampling).__name__}")
    unknown = sorted(set(spec) - {'mode', 'amount', 'src_weight',
                                  'dst_weight'})
    if unknown:
        raise ValueError(f"'neg_sampling' has unknown keys {unknown}: give "
                         f"'mode', 'amount', 'src_weight' or 'dst_weight'")
    mode = spec.get('mode')
    if mode not in NEGATIVE_MODES:
        raise ValueError(f"'neg_sampling' mode {mode!r} is not one of "
                         f"{NEGATIVE_MODES}")
    _check_amount(spec.get('amount', 1), 'neg_sampling.amount',
                  whole=mode == 'triplet')
    for key in ('src_weight', 'dst_weight'):
        _check_weight(spec.get(key), f'neg_sampling.{key}')
