r"""A part's topology in its own row ids: neighbour lists stored in global
ids, relabelled to the rows the part holds."""
from __future__ import annotations

from typing import Tuple

import torch
from torch import Tensor

from .topology import CSCTopology, index_dtype_for

__all__ = ['local_topology']


def local_topology(topology: CSCTopology, rows: Tensor,
                   index_space: int) -> Tuple[CSCTopology, int]:
    r"""``(local, dropped)``: :obj:`topology` (whose column ``i`` is the
    in-neighbour list of row ``i``, in ids of ``[0, index_space)``) with
    every neighbour id replaced by the row holding it (``rows[j]`` is the
    global id of row ``j``); neighbours no row holds are dropped and
    counted in ``dropped``.

    Args:
        topology (CSCTopology): the stored topology.
        rows (torch.Tensor): the global id of every row (unique).
        index_space (int): the number of global ids.
    """
    if rows.numel() != topology.num_nodes:
        raise ValueError(f"'rows' has {rows.numel()} ids for a topology of "
                         f"{topology.num_nodes} nodes")
    lookup = torch.full((index_space, ), -1, dtype=torch.long)
    lookup[rows] = torch.arange(rows.numel())
    indices = lookup[topology.indices.long()]
    keep = indices >= 0
    dropped = int(keep.numel() - keep.sum())
    indptr = topology.indptr.clone()
    if dropped:  # kept edges before each list's start
        before = torch.zeros(keep.numel() + 1, dtype=torch.long)
        torch.cumsum(keep.long(), 0, out=before[1:])
        indptr, indices = before[indptr], indices[keep]
    dtype = index_dtype_for(topology.num_nodes)
    return CSCTopology(indptr, indices.to(dtype),
                       topology.num_nodes), dropped
