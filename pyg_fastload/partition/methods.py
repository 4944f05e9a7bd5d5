r"""Partitioning methods behind one interface: each returns the owning part
of every node.

* ``'metis'``: METIS (pymetis) on the symmetrised topology without self
  loops, exactly ``num_parts`` parts, with two vertex weights per node
  (training node, and 1) so that both training nodes and all nodes are
  balanced (DSP's patches, DistDGL's default).
* ``'pagraph'``: PaGraph's self-reliant parts (:mod:`.pagraph`; through
  :func:`~pyg_fastload.partition.partition_dataset`, as parts overlap).
* ``'bytegnn'``: ByteGNN's GNN-P (:mod:`.bytegnn`): BFS blocks around the
  labelled nodes, assigned for locality and train/val/test balance.
* ``'hash'``: a multiplicative hash of the node id (the control: no
  locality at all, like PyG's and DGL's random partitions).
* ``'random'``: a seeded random balanced assignment.
"""
from __future__ import annotations

import warnings
from typing import Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from ..graph.topology import CSCTopology
from .bytegnn import gnnp_assign

__all__ = ['METHODS', 'assign_parts']

#: The methods :func:`assign_parts` knows.
METHODS = ('metis', 'pagraph', 'bytegnn', 'hash', 'random')

_GOLDEN = 2654435761  # Knuth's multiplicative hash constant


def check_num_parts(num_parts: int, num_nodes: int) -> None:
    r"""Refuses a part count that is not an int in ``[1, num_nodes]``."""
    if isinstance(num_parts, bool) or not isinstance(num_parts, int) or \
            not 1 <= num_parts <= max(num_nodes, 1):
        raise ValueError(f"'num_parts' = {num_parts!r} must be an int in "
                         f"[1, num_nodes = {num_nodes}]")


def _check(num_parts: int, num_nodes: int, method: str) -> None:
    check_num_parts(num_parts, num_nodes)
    if method not in METHODS:
        raise ValueError(f"unknown partitioning 'method' = {method!r}: pass "
                         f"one of {', '.join(METHODS)}")


def symmetric_adjacency(topology: CSCTopology) -> tuple:
    r"""``(xadj, adjncy)``: the graph with every edge in both directions,
    without self loops or duplicates, as METIS wants it (``int64``)."""
    n = topology.num_nodes
    dst = topology.destinations()
    src = topology.indices.long()
    keep = src != dst
    src, dst = src[keep], dst[keep]
    del keep
    keys = torch.cat([src * n + dst, dst * n + src])
    del src, dst
    keys = keys.unique()  # sorted: row-major (row * n + col)
    # Row boundaries by binary search, columns in place: no row array.
    xadj = torch.searchsorted(keys, torch.arange(n + 1) * n)
    return xadj.numpy(), keys.remainder_(n).numpy()


def _metis(topology: CSCTopology, num_parts: int,
           train_mask: Optional[Tensor], seed: int) -> np.ndarray:
    import pymetis

    n = topology.num_nodes
    if num_parts == 1:
        return np.zeros(n, dtype=np.int64)
    xadj, adjncy = symmetric_adjacency(topology)
    vweights = None
    if train_mask is not None:
        vweights = np.stack([train_mask.numpy().astype(np.int64),
                             np.ones(n, dtype=np.int64)], 1).reshape(-1)
    options = pymetis.Options(seed=seed)
    with warnings.catch_warnings():  # xadj/adjncy: the copy-free form
        warnings.simplefilter('ignore', DeprecationWarning)
        result = pymetis.part_graph(num_parts, xadj=xadj, adjncy=adjncy,
                                    vweights=vweights, options=options)
    return np.asarray(result.vertex_part, dtype=np.int64)


def assign_parts(topology: CSCTopology, num_parts: int, method: str = 'metis',
                 masks: Sequence[Optional[Tensor]] = (None, None, None),
                 num_hops: int = 2, seed: int = 0,
                 progress: bool = False) -> np.ndarray:
    r"""The part (``int64`` in ``[0, num_parts)``) of every node.

    Args:
        topology (CSCTopology): the graph.
        num_parts (int): the number of parts, in ``[1, num_nodes]``.
        method (str): ``'metis'``, ``'bytegnn'``, ``'hash'`` or
            ``'random'``.
        masks: the ``(train, val, test)`` boolean node masks (``None`` for
            a missing split): ``'metis'`` balances training nodes,
            ``'bytegnn'`` grows its blocks around all three and balances
            them.
        num_hops (int): the sampling depth (``'bytegnn'``'s blocks).
        seed (int): seed of ``'metis'`` and ``'random'``.
        progress (bool): show a progress bar (``'bytegnn'``).
    """
    n = topology.num_nodes
    _check(num_parts, n, method)
    if method == 'hash':
        ids = np.arange(n, dtype=np.uint64)
        hashed = (ids * np.uint64(_GOLDEN)) % np.uint64(2**32)
        return (hashed % np.uint64(num_parts)).astype(np.int64)
    if method == 'random':
        gen = torch.Generator().manual_seed(seed)
        owner = torch.empty(n, dtype=torch.long)
        owner[torch.randperm(n, generator=gen)] = torch.arange(n) % num_parts
        return owner.numpy()
    if method == 'pagraph':
        raise ValueError("method 'pagraph' replicates nodes across parts: "
                         "use partition_dataset (or pagraph_assign)")
    if method == 'bytegnn':
        if all(m is None for m in masks):
            raise ValueError("method 'bytegnn' grows its blocks around the "
                             "train/val/test nodes: pass 'masks'")
        return gnnp_assign(topology, masks, num_parts, num_hops,
                           progress=progress)
    train = masks[0]
    owner = _metis(topology, num_parts,
                   None if train is None else train.bool(), seed)
    if np.unique(owner).size != num_parts:
        raise RuntimeError(f'METIS returned {np.unique(owner).size} '
                           f'non-empty parts, not {num_parts}: use fewer '
                           f'parts for a graph of {n} nodes')
    return owner
