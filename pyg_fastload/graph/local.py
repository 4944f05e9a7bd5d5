r"""A part's topology in its own row ids: neighbour lists stored in global
ids, relabelled to the rows the part holds."""
from __future__ import annotations

from typing import Dict, List, Tuple

import torch
from torch import Tensor

from .hetero_topology import HeteroTopology, offsets_of
from .topology import CSCTopology, index_dtype_for

__all__ = ['row_lookup', 'local_topology', 'local_hetero_topology']


#: Edges relabelled at a time by :func:`local_topology` (module attribute:
#: read at call time, so tests can shrink it).
RELABEL_CHUNK = 2**24


def row_lookup(rows: Tensor, index_space: int) -> Tensor:
    r"""The row of every global id of ``[0, index_space)`` (``-1``: no row
    holds it), where ``rows[j]`` is the global id of row ``j``; ``int32``
    where the rows fit."""
    dtype = index_dtype_for(rows.numel())
    lookup = torch.full((index_space, ), -1, dtype=dtype)
    lookup[rows] = torch.arange(rows.numel(), dtype=dtype)
    return lookup


def local_topology(topology: CSCTopology, rows: Tensor,
                   index_space: int) -> Tuple[CSCTopology, int]:
    r"""``(local, dropped)``: :obj:`topology` (whose column ``i`` is the
    in-neighbour list of row ``i``, in ids of ``[0, index_space)``) with
    every neighbour id replaced by the row holding it (``rows[j]`` is the
    global id of row ``j``); neighbours no row holds are dropped and
    counted in ``dropped``.

    Memory: a lookup of one row id per global id (``int32`` where the rows
    fit), the result, and :data:`RELABEL_CHUNK` edges at a time (a part of
    papers-like, 200M edges, by arithmetic: a 0.22 GB lookup, the 0.8 GB
    ``int32`` result and about 0.3 GB per chunk, where relabelling all edges
    at once would hold several ``int64`` arrays of 1.6 GB).

    Args:
        topology (CSCTopology): the stored topology.
        rows (torch.Tensor): the global id of every row (unique).
        index_space (int): the number of global ids.
    """
    if rows.numel() != topology.num_nodes:
        raise ValueError(f"'rows' has {rows.numel()} ids for a topology of "
                         f"{topology.num_nodes} nodes")
    lookup = row_lookup(rows, index_space)
    indptr = topology.indptr
    num_edges = int(indptr[-1])
    # kept edges before each list's start, counted chunk by chunk
    kept_before = torch.full_like(indptr, -1)
    kept: List[Tensor] = []
    total = 0
    for lo in range(0, num_edges, RELABEL_CHUNK):
        hi = min(num_edges, lo + RELABEL_CHUNK)
        ids = lookup[topology.indices[lo:hi].long()]
        keep = ids >= 0
        run = torch.cumsum(keep, 0)
        first, end = torch.searchsorted(
            indptr, torch.tensor([lo, hi])).tolist()
        at = indptr[first:end] - lo  # lists starting in this chunk
        kept_before[first:end] = total + torch.where(
            at > 0, run[(at - 1).clamp(min=0)], 0)
        total += int(run[-1])
        kept.append(ids[keep])
    kept_before[indptr == num_edges] = total
    indices = torch.cat(kept) if kept else \
        torch.empty(0, dtype=lookup.dtype)
    return CSCTopology(kept_before, indices, topology.num_nodes), \
        num_edges - total


def local_hetero_topology(topology: HeteroTopology,
                          rows: Dict[str, Tuple[int, int]]
                          ) -> HeteroTopology:
    r""":obj:`topology` (a part of a heterogeneous partition: every
    relation's in-edges into the part's nodes, sources in the whole graph's
    ids) in the part's own ids: node type ``t`` holds the type-local ids
    ``rows[t] = (start, end)`` of the whole graph, which become ``0, 1,
    ...``; in-edges from nodes the part does not hold are dropped (what a
    cache ranks the part's rows on).

    Args:
        topology (HeteroTopology): the part's topology.
        rows (Dict[str, Tuple[int, int]]): per node type, the ``[start,
            end)`` of the type-local ids the part holds.
    """
    types = topology.node_types
    starts = torch.tensor([rows[t][0] for t in types], dtype=torch.long)
    counts = [rows[t][1] - rows[t][0] for t in types]
    node_offset = offsets_of(counts)
    src = topology.indices.long()
    kind = topology.node_type_of(src)
    local = src - topology.node_offset[kind] - starts[kind]
    keep = (local >= 0) & (local < torch.tensor(counts)[kind])
    kept = torch.zeros(keep.numel() + 1, dtype=torch.long)
    torch.cumsum(keep.long(), 0, out=kept[1:])  # kept edges before each
    relation = topology.relation_of(torch.arange(keep.numel()))
    edges = torch.bincount(relation[keep], minlength=len(
        topology.edge_types)).tolist()
    return HeteroTopology(
        node_types=list(types), edge_types=list(topology.edge_types),
        node_offset=node_offset, segment_offset=topology.segment_offset,
        edge_offset=offsets_of(edges), indptr=kept[topology.indptr],
        indices=(local + node_offset[kind])[keep].to(
            index_dtype_for(max(int(node_offset[-1]) - 1, 0))),
        edge_id=topology.edge_id[keep])
