r"""PaGraph's GNN-aware partitioning (Alg. 1, Eq. 1): training nodes are
streamed, each to the part whose training nodes its L-hop in-neighbourhood
already shares most, weighed against how full the part is; every part then
replicates the whole L-hop in-neighbourhood of its training nodes, so
sampling from them never leaves the part ("self-reliant").

The score is the one PaGraph's reference code computes::

    com[i]   = 1 + |{u in IN_L(v) : u is a training node already in part i}|
    score[i] = com[i] * (TV_avg - p_vnum[i]) / (r_vnum[i] + 1)

with ``p_vnum[i]`` the training nodes of part ``i``, ``r_vnum[i]`` all its
nodes including replicas, and ``TV_avg = |TV| / K`` (the reference
hard-codes ``0.65 |V| / K`` as an approximation of it). Ties go to the part
with fewer training nodes (then the lower index).

A part (:func:`pagraph_rows`, per node type: a homogeneous graph is one)
holds its own nodes in new-id order, then its replicas in new-id order,
keeping the in-edges of its message-flow rows (those fewer hops from its
trained nodes than it replicates), so sampling from its trained nodes
never leaves it; ``global_id`` gives every row's (type-local) new id, and
replicas are never training, validation or test nodes there.
"""
from __future__ import annotations

from itertools import chain
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..graph.ranges import expand_ranges
from ..graph.topology import CSCTopology
from .part_format import row_chunks

__all__ = ['pagraph_assign', 'message_flow_levels', 'pagraph_rows']

_SPLITS = ('train_mask', 'val_mask', 'test_mask')


def _neighbourhood_pairs(topology: CSCTopology, seeds: Tensor,
                         num_hops: int) -> Tuple[Tensor, Tensor]:
    r"""``(which, node)``: the nodes within :obj:`num_hops` in-edges of
    ``seeds[which]``, the seed itself included (a node reached along
    several paths appears several times; all but the last hop are made
    unique, the last is left to the caller)."""
    n = topology.num_nodes
    which = torch.arange(seeds.numel())
    whiches, nodes = [which], [seeds]
    for hop in range(num_hops):
        start = topology.indptr[nodes[-1]]
        degree = topology.indptr[nodes[-1] + 1] - start
        step = topology.indices[expand_ranges(start, degree)].long()
        step_which = whiches[-1].repeat_interleave(degree)
        if hop < num_hops - 1:  # the next hop expands each pair once
            key = (step_which * n + step).unique()
            step_which, step = key // n, key % n
        whiches.append(step_which)
        nodes.append(step)
    return torch.cat(whiches), torch.cat(nodes)


def pagraph_assign(topology: CSCTopology, train_nodes: Tensor,
                   num_parts: int, num_hops: int, progress: bool = True,
                   batch: Optional[int] = None) -> Tuple[np.ndarray, Tensor]:
    r"""``(owner, member)``: the part of every node and the ``[K, N]``
    boolean membership of every part (its training nodes and their
    ``num_hops``-hop in-neighbourhoods: replicas included).

    Training nodes are streamed in batches of :obj:`batch` (default:
    ``min(1024, ceil(|TV| / 256))``; ``1`` is the paper's node-by-node
    stream): the neighbourhoods of a batch and their ``com`` counts are
    taken against the parts as they stood when the batch began, the
    training counts ``p_vnum`` are exact, and the replica counts
    ``r_vnum`` are updated once the batch is placed.

    A training node is owned by the part it was streamed to; any other node
    by one of the parts holding it, spread evenly over them; nodes no part
    holds (more than ``num_hops`` hops from every training node) are spread
    round-robin.
    """
    n, k = topology.num_nodes, num_parts
    if batch is None:
        batch = min(1024, max(1, -(-train_nodes.numel() // 256)))
    train_owner = torch.full((n, ), -1, dtype=torch.long)
    member = torch.zeros(k, n, dtype=torch.bool)
    p_vnum, r_vnum = [0] * k, [0] * k
    average = train_nodes.numel() / k
    bar = tqdm(total=train_nodes.numel(), desc='PaGraph streaming',
               unit='node', disable=not progress, leave=False)
    for seeds in train_nodes.split(batch):
        which, node = _neighbourhood_pairs(topology, seeds, num_hops)
        known = train_owner[node] >= 0  # each training node counted once:
        key = (which[known] * n + node[known]).unique()
        com = torch.bincount(key // n * k + train_owner[key % n],
                             minlength=seeds.numel() * k).view(-1, k)
        chosen = []
        for row in com.tolist():
            best, best_key = 0, None
            for j in range(k):
                score = (row[j] + 1) * (average - p_vnum[j]) / (r_vnum[j] + 1)
                key = (score, -p_vnum[j])  # a tie: fewer training nodes
                if best_key is None or key > best_key:
                    best, best_key = j, key
            chosen.append(best)
            p_vnum[best] += 1
        part = torch.tensor(chosen)
        train_owner[seeds] = part
        member.view(-1)[part[which] * n + node] = True
        r_vnum = member.sum(1).tolist()
        bar.update(seeds.numel())
    bar.close()
    # Other nodes: spread over the parts holding them (the k-th holder for
    # node id k modulo their number), so owned ranges stay balanced.
    holders = member.sum(0)
    pick = torch.arange(n) % holders.clamp(min=1)
    chosen = member & (member.long().cumsum(0) - 1 == pick)
    owner = torch.where(holders > 0, chosen.long().argmax(0),
                        torch.arange(n) % num_parts)
    is_train = train_owner >= 0
    owner[is_train] = train_owner[is_train]
    return owner.numpy(), member


def message_flow_levels(topology: CSCTopology, train_nodes: Tensor,
                        num_hops: int) -> Tensor:
    r"""Each node's hop distance from :obj:`train_nodes` along in-edges
    (``0`` for them, ``num_hops + 1`` beyond). A part keeps the in-edges of
    its nodes below ``num_hops`` whose source is at most one hop further:
    PaGraph's message-flow edges."""
    far = num_hops + 1
    level = torch.full((topology.num_nodes, ), far, dtype=torch.long)
    level[train_nodes] = 0
    frontier = train_nodes
    for hop in range(1, num_hops + 1):
        start = topology.indptr[frontier]
        degree = topology.indptr[frontier + 1] - start
        reached = topology.indices[expand_ranges(start, degree)].long()
        reached = reached[level[reached] == far].unique()
        level[reached] = hop
        frontier = reached
    return level


def pagraph_rows(arrays: Dict[Any, Dict[str, Tensor]],
                 rows: Dict[Any, Tuple[Tensor, Tensor]],
                 first: Dict[Any, int], new_of: Tensor
                 ) -> Tuple[Dict[Any, Tensor], Dict[Any, Dict[str, Any]],
                            Dict[str, Dict[Any, int]]]:
    r"""``(held, extra, counts)``: what a PaGraph part holds, per node type
    (one, say :obj:`None`, on a homogeneous graph), for the writer to
    stream like a disjoint part: the type-local original ids of its rows
    (own, then replicas); the arrays whose rows are not the dataset's (the
    split masks, false for the replicas, as chunk sources, and
    ``global_id``, every row's type-local new id); and the ``owned`` and
    ``replicas`` counts.

    Args:
        arrays: per node type, the dataset's node arrays.
        rows: per node type, ``(own, replicas)``: type-local original ids
            of its own nodes and of its replicas, each in new-id order.
        first: per node type, its first global id.
        new_of: the global new id of every global original id.
    """
    held, extra = {}, {}
    for node_type, (own, replicas) in rows.items():
        values = arrays[node_type]
        held[node_type] = torch.cat([own, replicas])
        extra[node_type] = {key: _home_only(values[key], own,
                                            replicas.numel())
                            for key in _SPLITS if key in values}
        start = first[node_type]
        extra[node_type]['global_id'] = \
            new_of[held[node_type] + start] - start
    return held, extra, {
        'owned': {t: pair[0].numel() for t, pair in rows.items()},
        'replicas': {t: pair[1].numel() for t, pair in rows.items()}}


def _home_only(mask: Tensor, own: Tensor, replicas: int
               ) -> Callable[[], Iterator[Tensor]]:
    r"""Split :obj:`mask`'s rows of :obj:`own` in chunks, then false for
    the :obj:`replicas` (a replica trains, and is evaluated, at home)."""
    chunks = row_chunks(mask, own)
    return lambda: chain(chunks(), [mask.new_zeros((replicas, ) +
                                                   mask.shape[1:])])
