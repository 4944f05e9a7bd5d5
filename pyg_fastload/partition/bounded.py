r"""METIS in memory bounded by a budget (``max_memory``): multilevel, out of
core.

When METIS's working set on the whole graph (:func:`graph_metis_bytes`)
would exceed the budget, :func:`bounded_partition`

1. coarsens: size-constrained label propagation over chunks of nodes (each
   node joins the cluster it has the most edge weight to, while the
   cluster stays within a weight limit; ties broken by a seeded hash), then
   contracts the clusters into a coarse graph in a scratch directory
   under the temporary directory (``TMPDIR``; entries bucketed by coarse
   node, then merged bucket by bucket), level after level, until METIS's
   working set on the coarse graph fits (the scratch directory is removed
   at the end, and what a killed run left there by the next run:
   :class:`~pyg_fastload.io.staging.ScratchDirectory`);
2. runs METIS (pymetis) on the coarse graph, symmetrised, each coarse node
   weighing the nodes it holds;
3. projects the parts back to the nodes, balances the training nodes by
   swaps (:func:`~pyg_fastload.partition.balance.balance_train`, its gains
   counted in chunks) and refines the boundary: a few passes that move
   nodes to the part holding most of their neighbours while no part
   exceeds ``1.03x`` the mean of nodes or of training nodes.

Clustering and refinement read a node's in-neighbours (the CSC lists): its
whole neighbourhood on a symmetric graph, as ``prepare`` writes the presets
and OGB's undirected graphs; the coarse graphs count the edges of both
directions, so METIS sees every edge of a directed graph too.

Memory, for ``N`` nodes and ``E`` stored edges: the topology as read
(``8 (N + 1) + 4 E`` bytes, memory-mapped pages counted as they become
resident), at most :data:`NODE_BYTES` = 64 bytes per node (cluster ids,
node and cluster weights: int32 below 2**31 nodes; a coarse level's int64
``indptr``; the int64 result; the swaps' candidates and gains), at most
:data:`CHUNK_EDGE_BYTES` = 96 bytes per edge of a chunk (its ids, weights,
keys and their sort), chunks sized by the budget (at most
:data:`MAX_CHUNK_EDGES` edges, at least the largest in-degree), and METIS
on the coarsest graph (:func:`metis_bytes`), which runs when no chunk is
held. The coarse graphs lie on disk (16 bytes per entry while bucketed, 12
after: an int32 id and an int64 weight), read in chunks, never mapped.
Every bound is checked before the work (:func:`check_budget`), and a graph
that cannot be coarsened into the budget is refused with the budget it
would need.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, List, Optional, Tuple, Union

import numpy as np
import pymetis
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..config import format_bytes, parse_budget
from ..graph.topology import CSCTopology, index_dtype_for
from ..io.staging import ScratchDirectory
from .balance import TRAIN_TOLERANCE, balance_train

__all__ = ['bounded_partition', 'BoundedPartition', 'check_budget',
           'check_max_memory', 'graph_metis_bytes', 'max_memory_type',
           'metis_bytes', 'parse_max_memory']

#: METIS's working set, inputs included, per adjacency entry and per node
#: (pymetis 2025.2, 64-bit ids, on random graphs of 20K to 2M nodes and
#: 4M to 16M entries: at most 96 + 16 per entry, 336 + 16 per node).
METIS_ENTRY_BYTES = 112
METIS_NODE_BYTES = 352
#: What the bounded path holds per node of the graph (see the module
#: docstring).
NODE_BYTES = 64
#: What the bounded path holds per edge of a chunk.
CHUNK_EDGE_BYTES = 96
#: The most edges a chunk takes (larger ones are no faster).
MAX_CHUNK_EDGES = 2**22
#: The fewest edges a chunk may take: a smaller budget is refused.
MIN_CHUNK_EDGES = 2**12
#: The first level's clusters hold at most ``1 / (COARSEN_FACTOR *
#: num_parts)`` of the nodes, so that METIS can balance them.
COARSEN_FACTOR = 16
#: Label propagation rounds per level, and refinement passes at the end.
CLUSTER_ROUNDS = 4
REFINE_PASSES = 3
#: The most nodes (and training nodes) a part may take in refinement, over
#: their mean (METIS's default load imbalance).
NODE_TOLERANCE = 1.03
#: A level keeping more than this share of its nodes doubles the weight
#: limit of the clusters of the next.
MIN_SHRINK = 0.9

_GOLDEN = 2654435761  # Knuth's multiplicative hash constant
_FIX = "give bytes: an int or a size such as '2GiB' or '500MB'"
#: How errors name the budget: the argument and the command's option.
_NAME = 'max_memory (--max-memory)'


def parse_max_memory(value: Union[None, int, str],
                     name: str = _NAME) -> Optional[int]:
    r"""A memory budget in bytes: :obj:`None` (no bound), an int, or a size
    string such as ``'2GiB'`` or ``'500MB'``; refuses anything else,
    naming :obj:`name`."""
    if value is None:
        return None
    if isinstance(value, (bool, float)) or (
            isinstance(value, str) and value.strip().endswith('%')):
        raise ValueError(f"{name} = {value!r} is not a size: {_FIX}")
    try:
        size = parse_budget(value, name)
    except (TypeError, ValueError):
        raise ValueError(f"{name} = {value!r} is not a size: {_FIX}") \
            from None
    if not isinstance(size, int) or size <= 0:
        raise ValueError(f"{name} = {value!r} is not more than 0 bytes: "
                         f"{_FIX}, or leave it out for no bound")
    return size


def max_memory_type(text: str) -> int:
    r"""``--max-memory`` of ``argparse``: bytes (:func:`parse_max_memory`)."""
    try:
        return parse_max_memory(text, '--max-memory')
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def check_max_memory(max_memory: Union[None, int, str], method: str,
                     name: str = _NAME) -> Optional[int]:
    r"""The budget of :obj:`method` in bytes (:func:`parse_max_memory`);
    refuses one for a method it does not bound."""
    budget = parse_max_memory(max_memory, name)
    if budget is not None and method != 'metis':
        raise ValueError(f"{name} bounds method 'metis' only, not "
                         f"{method!r}: leave it out, or use 'metis'")
    return budget


def metis_bytes(num_nodes: int, num_entries: int) -> int:
    r"""METIS's working set on a graph of :obj:`num_nodes` nodes and
    :obj:`num_entries` adjacency entries (both directions of every edge),
    its input arrays included."""
    return METIS_NODE_BYTES * num_nodes + METIS_ENTRY_BYTES * num_entries


def graph_metis_bytes(topology: CSCTopology) -> int:
    r"""What METIS on :obj:`topology` takes at most: its topology and METIS
    on ``2 E`` entries (every stored edge in both directions; a symmetric
    graph's adjacency has half as many)."""
    return _topology_bytes(topology) + metis_bytes(topology.num_nodes,
                                                   2 * topology.num_edges)


def _topology_bytes(topology: CSCTopology) -> int:
    r"""The bytes of the arrays the method reads: ``indptr`` and
    ``indices``."""
    return sum(a.numel() * a.element_size()
               for a in (topology.indptr, topology.indices))


def _held_bytes(topology: CSCTopology) -> int:
    return _topology_bytes(topology) + NODE_BYTES * topology.num_nodes


def _max_degree(indptr: Tensor) -> int:
    step = MAX_CHUNK_EDGES
    return max((int(indptr[i:i + step + 1].diff().max())
                for i in range(0, indptr.numel() - 1, step)), default=0)


def check_budget(topology: CSCTopology, max_memory: int,
                 name: str = _NAME) -> int:
    r"""The edges one chunk may take within :obj:`max_memory` bytes; refuses
    a budget smaller than the topology, :data:`NODE_BYTES` per node and a
    chunk of :data:`MIN_CHUNK_EDGES` edges (or the largest in-degree),
    naming :obj:`name` and the smallest budget that works."""
    least = max(MIN_CHUNK_EDGES, _max_degree(topology.indptr))
    need = _held_bytes(topology) + CHUNK_EDGE_BYTES * least
    if max_memory < need:
        raise ValueError(
            f"{name} = {max_memory} ({format_bytes(max_memory)}) is too "
            f"small to partition {topology.num_nodes:,} nodes and "
            f"{topology.num_edges:,} edges: their topology, {NODE_BYTES} "
            f"bytes per node and a chunk of {least:,} edges take "
            f"{format_bytes(need)}; give at least {need} bytes")
    return min(MAX_CHUNK_EDGES, max(least, (max_memory - _held_bytes(
        topology)) // CHUNK_EDGE_BYTES))


@dataclass(frozen=True)
class BoundedPartition:
    r"""What :func:`bounded_partition` found.

    Attributes:
        owner (np.ndarray): the part (``int64``) of every node.
        levels (tuple): ``(nodes, entries)`` of every coarse graph, the
            first level first (entries as stored: in-neighbour lists).
        metis_nodes (int): the nodes of the graph METIS partitioned.
        metis_entries (int): its adjacency entries (symmetrised).
        metis_bytes (int): METIS's working set on it
            (:func:`metis_bytes`), within the budget less what the method
            holds besides.
        chunk_edges (int): the edges of one chunk.
    """
    owner: np.ndarray
    levels: Tuple[Tuple[int, int], ...]
    metis_nodes: int
    metis_entries: int
    metis_bytes: int
    chunk_edges: int


class _Level:
    r"""One graph of the hierarchy: in-neighbour lists (CSC) with edge
    weights (:obj:`None`: all 1) and node weights. The graph itself reads
    the topology's arrays; a coarse one reads its files in chunks."""

    def __init__(self, indptr: Tensor, node_weight: Tensor,
                 topology: Optional[CSCTopology] = None, *,
                 folder: Optional[Path] = None):
        self.indptr = indptr
        self.node_weight = node_weight
        self.num_nodes = indptr.numel() - 1
        self.num_entries = int(indptr[-1])
        self._topology = topology
        self._folder = folder

    def edges(self, begin: int, end: int) -> Tuple[Tensor, Optional[Tensor]]:
        r"""Sources (``int64``) and weights of the lists of nodes
        ``[begin, end)``."""
        lo, hi = int(self.indptr[begin]), int(self.indptr[end])
        if self._topology is not None:
            return self._topology.indices[lo:hi].long(), None
        dtype = _file_dtype(self.num_nodes)
        src = np.fromfile(self._folder / 'indices.bin', dtype=dtype,
                          count=hi - lo, offset=dtype.itemsize * lo)
        weight = np.fromfile(self._folder / 'weights.bin', dtype=np.int64,
                             count=hi - lo, offset=8 * lo)
        return torch.from_numpy(src).long(), torch.from_numpy(weight)

    def chunks(self, max_edges: int, max_nodes: Optional[int] = None
               ) -> List[Tuple[int, int]]:
        r"""Consecutive node ranges of at most :obj:`max_edges` entries
        (one node at least) and :obj:`max_nodes` nodes (default
        ``max_edges // 8``)."""
        if max_nodes is None:
            max_nodes = max(1, max_edges // 8)
        bounds, begin, n = [], 0, self.num_nodes
        while begin < n:
            end = int(torch.searchsorted(
                self.indptr, int(self.indptr[begin]) + max_edges,
                right=True)) - 1
            end = min(n, max(begin + 1, min(end, begin + max_nodes)))
            bounds.append((begin, end))
            begin = end
        return bounds


def _file_dtype(num_nodes: int) -> np.dtype:
    r"""The dtype of a coarse graph's ids on disk."""
    return np.dtype(np.int32 if index_dtype_for(num_nodes) == torch.int32
                    else np.int64)


def _hash(ids: Tensor, salt: int) -> Tensor:
    r"""A seeded pseudo-random key in ``[0, 2**31)`` per id (tie-breaks):
    the id xor the salt, mixed by multiplications and shifts."""
    key = ((ids ^ salt) * _GOLDEN) % 2**32
    key = ((key ^ (key >> 16)) * 0x85EBCA6B) % 2**32
    return (key ^ (key >> 13)) >> 1


def _grouped_cumsum(group: Tensor, value: Tensor) -> Tensor:
    r"""Running sum of :obj:`value` within runs of equal :obj:`group`
    (sorted), each run from its first element."""
    total = torch.cumsum(value, 0)
    first = torch.ones_like(group, dtype=torch.bool)
    first[1:] = group[1:] != group[:-1]
    start = torch.cummax(torch.where(first, torch.arange(group.numel()), 0),
                         0).values
    return total - total[start] + value[start]


def _cluster_chunk(level: _Level, begin: int, end: int, label: Tensor,
                   cluster_weight: Tensor, limit: int, salt: int) -> None:
    r"""One label-propagation step of nodes ``[begin, end)``: each moves to
    the cluster its edges weigh most to, if more than to its own and the
    cluster stays within :obj:`limit` (moves into one cluster taken in
    node order)."""
    n = level.num_nodes
    degree = level.indptr[begin + 1:end + 1] - level.indptr[begin:end]
    src, weight = level.edges(begin, end)
    if src.numel() == 0:
        return
    local = torch.repeat_interleave(torch.arange(end - begin), degree,
                                    output_size=src.numel())
    key, inverse = torch.unique(local * n + label[src].long(),
                                return_inverse=True)
    del local, src
    total = torch.zeros(key.numel(), dtype=torch.long).index_add_(
        0, inverse, torch.ones_like(inverse) if weight is None else weight)
    del inverse, weight
    node, cand = key // n, key % n
    del key
    own = label[begin:end].long()
    mine = cand == own[node]
    own_total = torch.zeros(end - begin, dtype=torch.long)
    own_total[node[mine]] = total[mine]
    node_weight = level.node_weight[begin:end].long()
    fits = cluster_weight[cand].long() + node_weight[node] <= limit
    better = ~mine & fits & (total > own_total[node])
    node, cand, total = node[better], cand[better], total[better]
    if node.numel() == 0:
        return
    score = total * 2**31 + _hash(cand, salt)
    best = torch.full((end - begin,), -1, dtype=torch.long).scatter_reduce_(
        0, node, score, 'amax')
    pick = score == best[node]
    node, cand = node[pick], cand[pick]
    keep = torch.ones_like(node, dtype=torch.bool)
    keep[1:] = node[1:] != node[:-1]  # the first best of every node
    node, cand = node[keep], cand[keep]
    order = torch.argsort(cand, stable=True)
    node, cand = node[order], cand[order]
    moved = node_weight[node]
    ok = cluster_weight[cand].long() + _grouped_cumsum(cand, moved) <= limit
    node, cand, moved = node[ok], cand[ok], moved[ok]
    cluster_weight.index_add_(0, own[node], -moved.to(cluster_weight.dtype))
    cluster_weight.index_add_(0, cand, moved.to(cluster_weight.dtype))
    label[begin + node] = cand.to(label.dtype)


def _cluster(level: _Level, limit: int, chunk_edges: int, salt: int,
             desc: str, progress: bool) -> Tensor:
    r"""The cluster (a node id) of every node of :obj:`level`: label
    propagation within :obj:`limit`, then the nodes left alone without
    in-edges packed into clusters of about :obj:`limit` in id order."""
    n = level.num_nodes
    label = torch.arange(n, dtype=level.node_weight.dtype)
    cluster_weight = level.node_weight.clone()
    bounds = level.chunks(chunk_edges)
    steps = tqdm(total=CLUSTER_ROUNDS * len(bounds), desc=desc,
                 unit='chunk', disable=not progress)
    for round_ in range(CLUSTER_ROUNDS):
        for begin, end in bounds:
            _cluster_chunk(level, begin, end, label, cluster_weight, limit,
                           salt + round_)
            steps.update()
    steps.close()
    alone = (level.indptr[1:] == level.indptr[:-1]) & \
        (label == torch.arange(n)) & (cluster_weight == level.node_weight)
    alone = alone.nonzero().view(-1)
    if alone.numel():
        weight = level.node_weight[alone].long()
        group = (torch.cumsum(weight, 0) - weight) // limit
        head = torch.ones_like(group, dtype=torch.bool)
        head[1:] = group[1:] != group[:-1]
        label[alone] = alone[head][torch.cumsum(head, 0) - 1].to(label.dtype)
    return label


def _compact(label: Tensor) -> Tuple[Tensor, int]:
    r"""Clusters renumbered ``0, 1, ...`` in order of their ids, and their
    count."""
    present = torch.zeros(label.numel(), dtype=torch.bool)
    present[label.long()] = True
    new = torch.cumsum(present, 0) - 1
    return new[label.long()].to(label.dtype), int(present.sum())


def _merge(file: Path, rows: int) -> Tuple[Tensor, Tensor]:
    r"""The ``(key, weight)`` rows of a bucket file, read :obj:`rows` at a
    time, with equal keys summed (sorted by key)."""
    size = file.stat().st_size // 16
    key = torch.empty(0, dtype=torch.long)
    total = torch.empty(0, dtype=torch.long)
    for at in range(0, size, rows):
        piece = torch.from_numpy(np.fromfile(
            file, dtype=np.int64, count=2 * min(rows, size - at),
            offset=16 * at).reshape(-1, 2))
        key, inverse = torch.unique(torch.cat([key, piece[:, 0]]),
                                    return_inverse=True)
        total = torch.zeros(key.numel(), dtype=torch.long).index_add_(
            0, inverse, torch.cat([total, piece[:, 1]]))
    return key, total


def _write(file: BinaryIO, array: np.ndarray) -> None:
    r"""Appends :obj:`array`'s bytes to :obj:`file` through the file's own
    ``write``, so a full disk raises ``OSError`` (ENOSPC), on the write or
    on closing: ``ndarray.tofile`` gives a large write's error without
    ``errno`` and loses a small one's."""
    file.write(np.ascontiguousarray(array).reshape(-1).view(np.uint8))


def _contract(level: _Level, cluster: Tensor, num_clusters: int,
              chunk_edges: int, folder: Path, desc: str,
              progress: bool) -> _Level:
    r"""The graph of the clusters: an edge weighing the edges between two
    clusters (self loops dropped), a node weighing its cluster's nodes.
    Chunk by chunk, the edges go to bucket files by their coarse
    destination (buckets of at most :obj:`chunk_edges` fine entries); each
    bucket is then merged and appended to the coarse graph's files."""
    folder.mkdir()
    n_c = num_clusters
    cluster_l = cluster.long()
    node_weight = torch.zeros(n_c, dtype=level.node_weight.dtype).index_add_(
        0, cluster_l, level.node_weight)
    load = torch.zeros(n_c, dtype=torch.long).index_add_(
        0, cluster_l, level.indptr[1:] - level.indptr[:-1])
    bucket = torch.unique_consecutive((torch.cumsum(load, 0) - load) //
                                      chunk_edges, return_inverse=True)[1]
    del load
    first = torch.searchsorted(bucket, torch.arange(int(bucket[-1]) + 2))
    bounds = level.chunks(chunk_edges)
    for begin, end in tqdm(bounds, desc=desc, unit='chunk',
                           disable=not progress):
        src, weight = level.edges(begin, end)
        dst = torch.repeat_interleave(
            cluster_l[begin:end], level.indptr[begin + 1:end + 1] -
            level.indptr[begin:end], output_size=src.numel())
        src = cluster_l[src]
        keep = dst != src
        key, inverse = torch.unique(dst[keep] * n_c + src[keep],
                                    return_inverse=True)
        del dst, src
        total = torch.zeros(key.numel(), dtype=torch.long).index_add_(
            0, inverse, torch.ones_like(inverse) if weight is None
            else weight[keep])
        del inverse, keep, weight
        ids, counts = torch.unique_consecutive(bucket[key // n_c],
                                               return_counts=True)
        rows = torch.stack([key, total], 1).numpy()
        at = 0
        for b, count in zip(ids.tolist(), counts.tolist()):
            with open(folder / f'bucket-{b}.bin', 'ab') as f:
                _write(f, rows[at:at + count])
            at += count
    indptr = torch.zeros(n_c + 1, dtype=torch.long)
    dtype = _file_dtype(n_c)
    with open(folder / 'indices.bin', 'wb') as ids_file, \
            open(folder / 'weights.bin', 'wb') as weights_file:
        for b in range(first.numel() - 1):
            file = folder / f'bucket-{b}.bin'
            if not file.exists():
                continue
            key, total = _merge(file, chunk_edges)
            file.unlink()
            lo, hi = int(first[b]), int(first[b + 1])
            dst = key // n_c
            indptr[lo + 1:hi + 1] = torch.bincount(dst - lo, minlength=hi - lo)
            _write(ids_file, (key % n_c).numpy().astype(dtype))
            _write(weights_file, total.numpy())
    torch.cumsum(indptr, 0, out=indptr)
    return _Level(indptr, node_weight, folder=folder)


def _metis_input(level: _Level, allowance: int
                 ) -> Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    r"""``(xadj, adjncy, eweights)`` of :obj:`level` symmetrised (the
    weights of both directions summed), or :obj:`None` where METIS's
    working set on it would exceed :obj:`allowance` bytes (the
    symmetrisation itself takes less)."""
    n = level.num_nodes
    if metis_bytes(n, level.num_entries) > allowance:
        return None
    src, weight = level.edges(0, n)
    dst = torch.repeat_interleave(torch.arange(n), level.indptr.diff(),
                                  output_size=src.numel())
    key, inverse = torch.unique(torch.cat([dst * n + src, src * n + dst]),
                                return_inverse=True)
    del src, dst
    if weight is None:
        weight = torch.ones(level.num_entries, dtype=torch.long)
    total = torch.zeros(key.numel(), dtype=torch.long).index_add_(
        0, inverse, torch.cat([weight, weight]))
    del inverse, weight
    if metis_bytes(n, key.numel()) > allowance:
        return None
    xadj = torch.searchsorted(key, torch.arange(n + 1) * n)
    return xadj.numpy(), key.remainder_(n).numpy(), total.numpy()


def _refine(level: _Level, owner: Tensor, train: Optional[Tensor],
            num_parts: int, chunk_edges: int, progress: bool) -> None:
    r"""Moves nodes of :obj:`owner` (in place) to the part holding most of
    their in-neighbours, where that is more than their own part holds, in
    :data:`REFINE_PASSES` passes over chunks of nodes; a part takes moves
    (largest gain first) while it holds at most :data:`NODE_TOLERANCE`
    times the mean of nodes and ``TRAIN_TOLERANCE`` times the mean of
    training nodes."""
    k, n = num_parts, level.num_nodes
    size = torch.bincount(owner, minlength=k)
    node_cap = int(np.ceil(NODE_TOLERANCE * n / k))
    if train is None:
        train = torch.zeros(n, dtype=torch.bool)
    train_size = torch.bincount(owner[train], minlength=k)
    mean = int(train_size.sum()) / k
    train_cap = max(int(np.ceil(TRAIN_TOLERANCE * mean)), int(np.ceil(mean)))
    bounds = level.chunks(chunk_edges, max(1, chunk_edges // max(8, k)))
    for pass_ in range(REFINE_PASSES):
        moves = 0
        for begin, end in tqdm(bounds, desc=f'refining ({pass_ + 1}/'
                               f'{REFINE_PASSES})', unit='chunk',
                               disable=not progress):
            src, weight = level.edges(begin, end)
            local = torch.repeat_interleave(
                torch.arange(end - begin), level.indptr[begin + 1:end + 1] -
                level.indptr[begin:end], output_size=src.numel())
            near = torch.bincount(local * k + owner[src], weight,
                                  minlength=(end - begin) * k).view(-1, k)
            del local, src
            own = owner[begin:end]
            best, target = near.max(1)
            gain = best - near.gather(1, own[:, None]).squeeze(1)
            node = (gain > 0).nonzero().view(-1)
            if node.numel() == 0:
                continue
            target, gain = target[node], gain[node]
            order = torch.argsort(target * (int(gain.max()) + 1) - gain,
                                  stable=True)
            node, target = begin + node[order], target[order]
            trained = train[node].long()
            ok = (size[target] + _grouped_cumsum(
                target, torch.ones_like(target)) <= node_cap) & \
                (train_size[target] + _grouped_cumsum(target, trained)
                 <= train_cap)
            node, target, trained = node[ok], target[ok], trained[ok]
            size.index_add_(0, owner[node], -torch.ones_like(node))
            size.index_add_(0, target, torch.ones_like(node))
            train_size.index_add_(0, owner[node], -trained)
            train_size.index_add_(0, target, trained)
            owner[node] = target
            moves += node.numel()
        if moves == 0:
            break


def bounded_partition(topology: CSCTopology, num_parts: int,
                      max_memory: int, train: Optional[Tensor] = None,
                      seed: int = 0, progress: bool = False,
                      name: str = _NAME) -> BoundedPartition:
    r"""METIS's partition of :obj:`topology` into :obj:`num_parts` parts
    in at most :obj:`max_memory` bytes (see the module docstring), the
    training nodes (:obj:`train`) balanced.

    Args:
        topology (CSCTopology): the graph (memory-mapped or in memory).
        num_parts (int): the number of parts.
        max_memory (int): the budget in bytes (:func:`check_budget`).
        train (torch.Tensor, optional): the boolean training mask.
        seed (int): seed of the clustering's tie-breaks and of METIS.
        progress (bool): show progress bars.
        name (str): the budget's name in error messages.
    """
    chunk_edges = check_budget(topology, max_memory, name)
    allowance = max_memory - _held_bytes(topology)
    n = topology.num_nodes
    top = level = _Level(topology.indptr,
                         torch.ones(n, dtype=index_dtype_for(n)), topology)
    limit = -(-n // (COARSEN_FACTOR * num_parts))
    fine = torch.empty(0)  # the node of `level` of every node
    levels: List[Tuple[int, int]] = []
    coarse_dir = Path(tempfile.gettempdir()) / \
        f'pyg-fastload-coarse-{os.getuid()}'
    with ScratchDirectory(
            coarse_dir, f'the coarse graphs of {name}',
            'set TMPDIR to a directory on another disk') as scratch:
        graph = None
        while graph is None:
            depth = len(levels) + 1
            label = _cluster(level, limit, chunk_edges,
                             (seed * 7919 + depth * 104729) % 2**31,
                             f'coarsening (level {depth})', progress)
            cluster, n_c = _compact(label)
            del label
            if n_c > MIN_SHRINK * level.num_nodes:
                if limit >= n // num_parts:
                    raise ValueError(_too_small(name, max_memory, topology,
                                                level))
                limit = min(2 * limit, n // num_parts)
                if n_c == level.num_nodes:
                    continue
            coarse = _contract(level, cluster, n_c, chunk_edges,
                               scratch.dir / f'level-{depth}',
                               f'contracting (level {depth})', progress)
            _remove(level)
            fine = cluster if level is top else cluster[fine.long()]
            del cluster
            level = coarse
            levels.append((level.num_nodes, level.num_entries))
            graph = _metis_input(level, allowance)
        xadj, adjncy, eweights = graph
        del graph
        with warnings.catch_warnings():  # xadj/adjncy: the copy-free form
            warnings.simplefilter('ignore', DeprecationWarning)
            result = pymetis.part_graph(
                num_parts, xadj=xadj, adjncy=adjncy,
                vweights=level.node_weight.long().numpy(),
                eweights=eweights, options=pymetis.Options(seed=seed))
        entries = adjncy.size
        del xadj, adjncy, eweights
    owner = torch.as_tensor(np.asarray(result.vertex_part,
                                       dtype=np.int64))[fine.long()]
    del result, fine
    if train is not None and int(torch.unique(owner).numel()) == num_parts:
        owner = torch.from_numpy(balance_train(
            owner.numpy(), topology.indptr.numpy(), topology.indices.numpy(),
            train.numpy(), num_parts, chunk_edges=chunk_edges))
    _refine(top, owner, train, num_parts, chunk_edges, progress)
    _release_heap()
    return BoundedPartition(owner.numpy(), tuple(levels), level.num_nodes,
                            entries, metis_bytes(level.num_nodes, entries),
                            chunk_edges)


def _release_heap() -> None:
    r"""Hands the heap memory the chunks freed back to the system (glibc's
    ``malloc_trim``; elsewhere nothing): allocations of a chunk's size come
    from the heap, and without this the process would keep their pages
    resident into what follows (writing the parts)."""
    try:
        ctypes.CDLL('libc.so.6').malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _remove(level: _Level) -> None:
    r"""Deletes a coarse level's files (the graph's own are kept)."""
    if level._folder is not None:
        shutil.rmtree(level._folder)


def _too_small(name: str, max_memory: int, topology: CSCTopology,
               level: _Level) -> str:
    need = _held_bytes(topology) + metis_bytes(level.num_nodes,
                                               2 * level.num_entries)
    return (f"{name} = {max_memory} ({format_bytes(max_memory)}) is too "
            f"small for this graph: it coarsens to no fewer than "
            f"{level.num_nodes:,} nodes and {level.num_entries:,} entries, "
            f"and METIS on them with the nodes' arrays takes up to "
            f"{format_bytes(need)}; give at least {need} bytes")
