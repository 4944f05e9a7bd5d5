r"""Streamed aggregation: a layer whose aggregation is the mean or the sum of
its in-neighbours' rows, computed by reading the previous layer's rows once
per range of destination nodes, in file order, instead of gathering every
chunk's in-neighbours.

A chunk of a graph without locality (papers-like's edges join random
communities) gathers rows all over the input; when the
input is a file larger than memory every gathered row is a random read of
storage, while reading the file in order runs at the device's sequential
speed. So for a range of destinations (as many as an accumulator of their
aggregated rows and their sorted in-edges fit :data:`STREAM_SHARE` of the
memory budget left beside the outputs held in memory), the
range's in-edges are sorted by source and the input is read in blocks of
consecutive rows, each block's rows added into the accumulator of the
destinations they point to. The layer then runs on each chunk of the range
with one virtual in-neighbour per destination holding its aggregate (the
mean of one row is that row; so is the sum): ``SAGEConv``, ``GraphConv``
and ``GINConv`` with ``'mean'``, ``'sum'`` or ``'add'`` aggregation
compute exactly what they compute over the real in-edges, up to the order
of float additions.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Tuple

import torch
from torch import Tensor
from torch_geometric.nn import GINConv, GraphConv, SAGEConv

from ..graph import CSCTopology

__all__ = ['streamable', 'stream_ranges', 'aggregate_range', 'apply_virtual']

Rows = Callable[[Tensor], Tensor]

#: Consecutive input rows read at once.
BLOCK_ROWS = 1 << 18
#: The share of the memory budget left beside the outputs held in memory
#: that a range's accumulator and sorted edges take (the rest: this layer's
#: outputs, when they stay in memory, and the blocks read).
STREAM_SHARE = 0.5
#: What a range holds per edge at most, while its in-edges are sorted by
#: source (source and destination as int32, the sorted sources and the
#: destinations in their order, int32, the order, int64), and per
#: destination besides its accumulated row (its degree).
_EDGE_BYTES = 24
_NODE_BYTES = 8
_LINEAR = ('mean', 'sum', 'add')


def streamable(conv: Any) -> bool:
    r"""Whether :obj:`conv` aggregates by the mean or the sum of its
    in-neighbours' rows alone (no edge weights, attention or projection):
    ``SAGEConv`` (without ``project``), ``GraphConv`` and ``GINConv``."""
    if not isinstance(conv, (SAGEConv, GraphConv, GINConv)):
        return False
    if isinstance(conv, SAGEConv) and conv.project:
        return False
    return isinstance(conv.aggr, str) and conv.aggr in _LINEAR


def stream_ranges(topology: CSCTopology, row_bytes: int, budget: int,
                  minimum: int) -> Iterator[Tuple[int, int]]:
    r"""Consecutive destination ranges whose accumulator (:obj:`row_bytes`
    per node), degrees and sorted in-edges take at most
    :data:`STREAM_SHARE` of :obj:`budget` bytes (at least :obj:`minimum`
    nodes each, the chunk size)."""
    share = max(1, int(budget * STREAM_SHARE))
    indptr, n = topology.indptr, topology.num_nodes
    start = 0
    while start < n:
        # nodes by the accumulator alone, then fewer while edges overflow
        end = min(n, start + max(minimum,
                                 share // (row_bytes + _NODE_BYTES)))
        while end - start > minimum and (end - start) * (
                row_bytes + _NODE_BYTES) + _EDGE_BYTES * (
                int(indptr[end]) - int(indptr[start])) > share:
            end = start + max(minimum, (end - start) // 2)
        yield start, end
        start = end


def aggregate_range(topology: CSCTopology, read: Rows, start: int, end: int,
                    mean: bool) -> Tensor:
    r"""The sum (or with :obj:`mean`, the mean) of the in-neighbours' rows
    of every destination in ``[start, end)`` (zeros without any), reading
    the input's rows (:obj:`read` of consecutive ids) block by block in
    order, each block once, only the blocks some in-edge reads."""
    indptr = topology.indptr
    lo, hi = int(indptr[start]), int(indptr[end])
    num_nodes = topology.num_nodes
    degree = indptr[start + 1:end + 1] - indptr[start:end]
    # int32 ids where they fit: a range's edges are most of what it holds
    source = topology.indices[lo:hi].to(_ids(num_nodes))
    target = torch.repeat_interleave(
        torch.arange(end - start, dtype=_ids(end - start)), degree,
        output_size=hi - lo)
    source, order = torch.sort(source, stable=True)
    target = target[order]
    del order
    acc = None
    # the blocks holding some source, each read once
    blocks = torch.unique(torch.div(source, BLOCK_ROWS,
                                    rounding_mode='floor')).tolist()
    bounds = torch.searchsorted(source, torch.tensor(
        [b * BLOCK_ROWS for b in blocks] +
        [blocks[-1] * BLOCK_ROWS + BLOCK_ROWS] if blocks else [0],
        dtype=source.dtype)).tolist()
    for k, block in enumerate(blocks):
        first = block * BLOCK_ROWS
        rows = read(torch.arange(first, min(first + BLOCK_ROWS, num_nodes)))
        if acc is None:
            acc = rows.new_zeros((end - start, *rows.shape[1:]))
        a, b = bounds[k], bounds[k + 1]
        acc.index_add_(0, target[a:b], rows[source[a:b] - first])
    if acc is None:  # no in-edge: a zero row each
        row = read(torch.arange(start, start + 1))
        acc = row.new_zeros((end - start, *row.shape[1:]))
    if mean:
        acc /= degree.clamp(min=1).to(acc.dtype).view(-1, *(
            [1] * (acc.dim() - 1)))
    return acc


def _ids(count: int) -> torch.dtype:
    r"""The integer type of ids below :obj:`count`."""
    return torch.int32 if count <= torch.iinfo(torch.int32).max else \
        torch.int64


def apply_virtual(conv: Any, aggregated: Tensor, x_dst: Tensor) -> Tensor:
    r""":obj:`conv` on destinations whose only in-neighbour is a virtual
    node holding their :obj:`aggregated` rows (row ``i`` for destination
    ``i``): what :obj:`conv` computes over their real in-edges."""
    n = x_dst.size(0)
    loop = torch.arange(n, device=x_dst.device)
    return conv((aggregated, x_dst), torch.stack([loop, loop]))


def is_mean(conv: Any) -> bool:
    r"""Whether :obj:`conv` (:func:`streamable`) averages."""
    return conv.aggr == 'mean'
