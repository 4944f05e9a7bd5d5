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
hard-codes ``0.65 |V| / K`` as an approximation of it). Ties between the top
two scores go to the part with fewer training nodes.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from ..graph.ranges import expand_ranges
from ..graph.topology import CSCTopology

__all__ = ['pagraph_assign', 'in_neighbourhood', 'message_flow_levels']


def in_neighbourhood(topology: CSCTopology, nodes: Tensor,
                     num_hops: int) -> Tensor:
    r"""The nodes reachable from :obj:`nodes` within 1 to :obj:`num_hops`
    in-edges (sorted, unique; :obj:`nodes` themselves only when reached)."""
    indptr, indices = topology.indptr, topology.indices
    frontier, reached = nodes, []
    for _ in range(num_hops):
        start = indptr[frontier]
        degree = indptr[frontier + 1] - start
        frontier = indices[expand_ranges(start, degree)].long().unique()
        reached.append(frontier)
    return torch.cat(reached).unique()


def pagraph_assign(topology: CSCTopology, train_nodes: Tensor,
                   num_parts: int, num_hops: int,
                   progress: bool = True) -> Tuple[np.ndarray, Tensor]:
    r"""``(owner, member)``: the part of every node and the ``[K, N]``
    boolean membership of every part (its training nodes and their
    ``num_hops``-hop in-neighbourhoods: replicas included).

    A training node is owned by the part it was streamed to; any other node
    by one of the parts holding it, spread evenly over them; nodes no part
    holds (more than ``num_hops`` hops from every training node) are spread
    round-robin.
    """
    n = topology.num_nodes
    train_owner = torch.full((n, ), -1, dtype=torch.long)
    member = torch.zeros(num_parts, n, dtype=torch.bool)
    p_vnum = torch.zeros(num_parts, dtype=torch.float64)
    r_vnum = torch.zeros(num_parts, dtype=torch.float64)
    average = train_nodes.numel() / num_parts
    for v in tqdm(train_nodes.tolist(), desc='PaGraph streaming',
                  unit='node', disable=not progress, leave=False):
        seed = torch.tensor([v])
        near = in_neighbourhood(topology, seed, num_hops)
        owners = train_owner[near]
        com = torch.bincount(owners[owners >= 0],
                             minlength=num_parts).double() + 1
        score = com * (average - p_vnum) / (r_vnum + 1)
        best = torch.topk(score, min(2, num_parts)).indices
        part = int(best[0])
        if num_parts > 1 and score[best[1]] == score[best[0]] and \
                p_vnum[best[1]] < p_vnum[best[0]]:
            part = int(best[1])
        train_owner[v] = part
        p_vnum[part] += 1
        nodes = torch.cat([seed, near])
        r_vnum[part] += float((~member[part, nodes]).sum())
        member[part, nodes] = True
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
