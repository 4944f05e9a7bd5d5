r"""PaGraph's self-reliant parts for link prediction (``pyg-fastload
partition --method pagraph --task link``).

A part trains the label edges whose destination it owns. Every node is a
possible destination, so every node is a training node of its part, and
the part replicates its ``L + 1``-hop in-neighbourhood: a label edge's
source is one hop from its destination, and its ``L``-hop tree must be in
the part too. Sampling from a label edge's endpoints then never leaves the
part, as PaGraph's node training never does. The owners come from METIS
(balanced nodes, few cut edges: :func:`link_assign`): PaGraph's stream
scores each training node against its neighbourhood, which with every node
training is the sum of all ``L + 1``-hop neighbourhoods, out of reach on a
large graph.

Negatives are drawn from the part's *complete* nodes, those whose whole
``L``-hop in-neighbourhood it holds (its own nodes and their
in-neighbours), weighted uniformly: a negative drawn over the whole graph
would need every node's neighbourhood on every rank. PyTorch-BigGraph's
partitioned training draws its uniform negatives within a partition in
the same way. :func:`part_links` builds a part's training graph, label
edges and negative weights at run time from the link split.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Tuple

import numpy as np
import torch
from torch import Tensor

from ..graph.local import row_lookup
from ..graph.topology import CSCTopology
from .methods import assign_parts
from .pagraph import message_flow_levels

__all__ = ['TASK_HOPS', 'check_task', 'link_assign', 'PartLinks',
           'part_links']

#: The hops a self-reliant part replicates beyond the sampled ones, by the
#: task it serves: a label edge's source is one hop from the destination
#: whose part trains it.
TASK_HOPS: Dict[str, int] = {'node': 0, 'link': 1}


def check_task(task: str, method: str, hetero: bool) -> None:
    r"""Refuses a ``--task`` :obj:`task` that partitioning by :obj:`method`
    (of a heterogeneous graph if :obj:`hetero`) cannot serve."""
    if task not in TASK_HOPS:
        raise ValueError(f"unknown --task {task!r}: pass one of "
                         f"{', '.join(TASK_HOPS)}")
    if task == 'node':
        return
    if method != 'pagraph':
        raise ValueError(f"--task {task} shapes PaGraph's self-reliant "
                         f"parts (--method pagraph); the disjoint parts of "
                         f"--method {method} serve every task as they are: "
                         f"leave --task out")
    if hetero:
        raise ValueError(f"--task {task} with --method pagraph is for "
                         f"homogeneous datasets (a heterogeneous one trains "
                         f"links in mode 'dsp' on --method metis parts)")


def link_assign(topology: CSCTopology, num_parts: int, reach: int,
                seed: int = 0, progress: bool = False
                ) -> Tuple[np.ndarray, Tensor, List[Tensor]]:
    r"""``(owner, member, level)`` of parts for link prediction: every
    node's part (METIS), which nodes each part holds (``[num_parts,
    num_nodes]``: its own and their :obj:`reach`-hop in-neighbourhoods)
    and every node's hop distance from each part's own nodes (what
    :func:`~pyg_fastload.partition.pagraph.message_flow_levels` gives)."""
    owner = assign_parts(topology, num_parts, 'metis', seed=seed,
                         progress=progress)
    own = torch.from_numpy(owner)
    level = [message_flow_levels(topology, (own == k).nonzero().view(-1),
                                 reach) for k in range(num_parts)]
    return owner, torch.stack([lv <= reach for lv in level]), level


@dataclass
class PartLinks:
    r"""What a PaGraph part trains links on, in its own rows.

    Attributes:
        edge_index (torch.Tensor): ``[2, E]`` the training message-passing
            edges the part holds (those into its rows that keep their
            in-edges), in its rows.
        passing (torch.Tensor): which of the given message-passing edges
            these are (a mask over them: their times, say).
        label_index (torch.Tensor): ``[2, L]`` the label edges the part
            trains (those into its own nodes), in its rows.
        labels (torch.Tensor): which of the given label edges these are.
        negative_weight (torch.Tensor): one weight per row, 1 for the rows
            a negative may be (whose sampled trees the part holds), else 0.
    """
    edge_index: Tensor
    passing: Tensor
    label_index: Tensor
    labels: Tensor
    negative_weight: Tensor


def part_links(topology: CSCTopology, rows: Tensor, owned: int, reach: int,
               depth: int, passing: Tensor, labels: Tensor,
               index_space: int) -> PartLinks:
    r"""The part's share of a link split (:class:`PartLinks`).

    Args:
        topology (CSCTopology): the part's stored in-neighbour lists, in its
            rows.
        rows (torch.Tensor): the new id of every row, its :obj:`owned` own
            nodes first.
        owned (int): the part's own nodes.
        reach (int): the hops the part replicates around them.
        depth (int): the hops batches sample (at most ``reach - 1``).
        passing (torch.Tensor): ``[2, E]`` the split's training
            message-passing edges, in new ids.
        labels (torch.Tensor): ``[2, L]`` its training label edges, in new
            ids.
        index_space (int): the number of new ids.
    """
    if not 0 < depth < reach:
        raise ValueError(f"a part that replicates {reach} hops serves label "
                         f"edges sampled up to {reach - 1} hops, not "
                         f"{depth}")
    level = message_flow_levels(topology, torch.arange(owned), reach)
    keeps_in_edges = level < reach
    complete = level <= reach - depth
    lookup = row_lookup(rows, index_space)
    src, dst = lookup[passing[0]].long(), lookup[passing[1]].long()
    into = dst >= 0
    into[into.clone()] = keeps_in_edges[dst[into]]
    stray = into & (src < 0)
    if bool(stray.any()):
        raise ValueError(f"{int(stray.sum())} training message-passing "
                         f"edges come from nodes the part does not hold: "
                         f"the split passes edges the graph lacks (a "
                         f"directed graph declared undirected?)")
    label_src, label_dst = lookup[labels[0]].long(), lookup[labels[1]].long()
    mine = (label_dst >= 0) & (label_dst < owned)
    lacking = mine & ((label_src < 0) |
                      ~complete[label_src.clamp(min=0)])
    if bool(lacking.any()):
        raise ValueError(f"{int(lacking.sum())} training label edges come "
                         f"from nodes whose {depth}-hop trees the part does "
                         f"not hold: label edges that are not edges of the "
                         f"graph (a directed graph declared undirected?)")
    return PartLinks(
        edge_index=torch.stack([src[into], dst[into]]), passing=into,
        label_index=torch.stack([label_src[mine], label_dst[mine]]),
        labels=mine, negative_weight=complete.float())
