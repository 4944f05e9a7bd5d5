r"""PaGraph's self-reliant parts for link prediction (``pyg-fastload
partition --method pagraph --task link``).

A part trains the label edges whose destination it owns. Every node is a
possible destination, so every node is a training node of its part, and
the part replicates its ``L + 1``-hop in-neighbourhood: a label edge's
source is one hop from its destination, and its ``L``-hop tree must be in
the part too. Sampling from a label edge's endpoints then never leaves the
part, as PaGraph's node training never does. The owners come from METIS
(balanced nodes, few cut edges: :func:`task_assign`): PaGraph's stream
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

A heterogeneous graph is partitioned on the homogeneous view of all node
types (:meth:`~pyg_fastload.graph.HeteroTopology.homogeneous_view`): every
relation counts as an in-edge, so a part holds its nodes' ``L + 1``-hop
in-neighbourhoods over every relation; the supervised relation's label
edges go to their destination's part, and :class:`PartRows` maps the
typed rows of a part onto that view.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from ..graph.hetero_topology import EdgeType, HeteroTopology, end_types
from ..graph.kind import is_hetero
from ..graph.local import row_lookup
from ..graph.topology import CSCTopology
from .methods import assign_parts
from .pagraph import message_flow_levels, pagraph_assign

__all__ = ['TASK_HOPS', 'check_task', 'task_assign', 'PartLinks',
           'PartRows', 'part_links']

#: The hops a self-reliant part replicates beyond the sampled ones, by the
#: task it serves: a label edge's source is one hop from the destination
#: whose part trains it.
TASK_HOPS: Dict[str, int] = {'node': 0, 'link': 1}


def check_task(task: str, method: str) -> None:
    r"""Refuses a ``--task`` :obj:`task` that partitioning by :obj:`method`
    cannot serve."""
    if task not in TASK_HOPS:
        raise ValueError(f"unknown --task {task!r}: pass one of "
                         f"{', '.join(TASK_HOPS)}")
    if task != 'node' and method != 'pagraph':
        raise ValueError(f"--task {task} shapes PaGraph's self-reliant "
                         f"parts (--method pagraph); the disjoint parts of "
                         f"--method {method} serve every task as they are: "
                         f"leave --task out")


def task_assign(topology: CSCTopology, train_nodes: Optional[Tensor],
                num_parts: int, num_hops: int, task: str, seed: int = 0,
                progress: bool = False
                ) -> Tuple[np.ndarray, Tensor, List[Tensor]]:
    r"""``(owner, member, level)`` of PaGraph's self-reliant parts for
    :obj:`task`: every node's part, which nodes each part holds
    (``[num_parts, num_nodes]``: its own and their replicas) and every
    node's hop distance from each part's trained nodes (what
    :func:`~pyg_fastload.partition.pagraph.message_flow_levels` gives; a
    part keeps the in-edges of the nodes below ``num_hops +
    TASK_HOPS[task]``).

    Task ``'node'`` streams :obj:`train_nodes` to parts (PaGraph's
    :func:`~pyg_fastload.partition.pagraph.pagraph_assign`), task
    ``'link'`` takes every node's METIS part, each part then holding its
    nodes' ``num_hops + 1``-hop in-neighbourhoods."""
    reach = num_hops + TASK_HOPS[task]
    if task == 'link':  # every node trained: a label edge's destination
        owner = assign_parts(topology, num_parts, 'metis', seed=seed,
                             progress=progress)
        own = torch.from_numpy(owner)
        trained = [(own == k).nonzero().view(-1) for k in range(num_parts)]
        member = None
    else:
        owner, member = pagraph_assign(topology, train_nodes, num_parts,
                                       reach, progress)
        own = torch.from_numpy(owner)[train_nodes]
        trained = [train_nodes[own == k] for k in range(num_parts)]
    level = [message_flow_levels(topology, nodes, reach)
             for nodes in trained]
    if member is None:
        member = torch.stack([lv <= reach for lv in level])
    return owner, member, level


@dataclass
class PartLinks:
    r"""What a PaGraph part trains links on, in its own rows.

    Attributes:
        edge_index (dict): ``{relation: [2, E]}`` the training
            message-passing edges the part holds (those into its rows that
            keep their in-edges), in its rows (the relation :obj:`None` on
            a homogeneous graph; on a heterogeneous one the supervised
            relation and its reverse, the part's other relations as
            stored).
        passing (dict): ``{relation: mask}``: which of the given
            message-passing edges these are (their times, say).
        label_index (torch.Tensor): ``[2, L]`` the label edges the part
            trains (those into its own nodes), in its rows.
        labels (torch.Tensor): which of the given label edges these are.
        negative_weight (tuple): the weight of every row of the label
            edges' source and destination types as a negative: 1 for the
            rows whose sampled trees the part holds, else 0.
    """
    edge_index: Dict[Optional[EdgeType], Tensor]
    passing: Dict[Optional[EdgeType], Tensor]
    label_index: Tensor
    labels: Tensor
    negative_weight: Tuple[Tensor, Tensor]


class PartRows:
    r"""A part's rows of every node type (:obj:`None` on a homogeneous
    graph) as rows of its topology's homogeneous view, own rows first.

    Args:
        topology: the part's stored in-neighbour lists, in its rows
            (a :class:`CSCTopology` or a :class:`HeteroTopology`).
        rows (dict): per node type, the new id of every row, its own
            nodes first.
        owned (dict): per node type, the part's own nodes.
        index_space (dict): per node type, the number of new ids.
    """
    def __init__(self, topology: Union[CSCTopology, HeteroTopology],
                 rows: Dict[Optional[str], Tensor],
                 owned: Dict[Optional[str], int],
                 index_space: Dict[Optional[str], int]):
        hetero = is_hetero(topology)
        types = list(topology.node_types) if hetero else [None]
        self.view = topology.homogeneous_view() if hetero else topology
        self.first = dict(zip(types, topology.node_offset.tolist()
                              if hetero else [0]))
        self.lookup = {t: row_lookup(rows[t], index_space[t]) for t in types}
        self.count = {t: rows[t].numel() for t in types}
        self.own = torch.cat([torch.arange(self.first[t],
                                           self.first[t] + owned[t])
                              for t in types])

    def of(self, ids: Tensor, node_type: Optional[str]) -> Tensor:
        r"""The view row of every new id of :obj:`node_type` (``-1``: the
        part does not hold it)."""
        row = self.lookup[node_type][ids].long()
        return torch.where(row >= 0, row + self.first[node_type], row)

    def edges(self, edges: Tensor, relation: Optional[EdgeType]) -> Tensor:
        r""":obj:`edges` (``[2, E]`` new ids of :obj:`relation`) in view
        rows."""
        src, dst = end_types(relation)
        return torch.stack([self.of(edges[0], src), self.of(edges[1], dst)])

    def local(self, rows: Tensor, node_type: Optional[str]) -> Tensor:
        r"""View :obj:`rows` of :obj:`node_type` in the type's own rows."""
        return rows - self.first[node_type]

    def of_type(self, values: Tensor, node_type: Optional[str]) -> Tensor:
        r"""The slice of per-view-row :obj:`values` of :obj:`node_type`."""
        first = self.first[node_type]
        return values[first:first + self.count[node_type]]


def _refuse(bad: Tensor, what: str) -> None:
    r"""Raises if any of :obj:`bad` is set, counting them: ``N WHAT``."""
    if bool(bad.any()):
        raise ValueError(f"{int(bad.sum())} {what} (a directed graph "
                         f"declared undirected?)")


def part_links(part: PartRows, reach: int, depth: int,
               relation: Optional[Tuple[EdgeType, Optional[EdgeType]]],
               passing: Tensor, labels: Tensor) -> PartLinks:
    r"""The part's share of a link split (:class:`PartLinks`).

    Args:
        part (PartRows): the part's rows.
        reach (int): the hops the part replicates around its own nodes.
        depth (int): the hops batches sample (at most ``reach - 1``).
        relation (tuple, optional): the supervised relation and its
            reverse (:obj:`None` if it has none) on a heterogeneous graph.
        passing (torch.Tensor): ``[2, E]`` the split's training
            message-passing edges (of the relation), in new ids.
        labels (torch.Tensor): ``[2, L]`` its training label edges, in new
            ids.
    """
    if not 0 < depth < reach:
        raise ValueError(f"a part that replicates {reach} hops serves label "
                         f"edges sampled up to {reach - 1} hops, not "
                         f"{depth}")
    level = message_flow_levels(part.view, part.own, reach)
    keeps_in_edges = level < reach
    complete = level <= reach - depth
    edge_type, reverse = relation or (None, None)
    forward = part.edges(passing, edge_type)
    given = [(edge_type, forward)]
    if reverse is not None:
        given.append((reverse, forward.flip(0)))
    edge_index, kept = {}, {}
    for key, (src, dst) in given:
        into = dst >= 0
        into[into.clone()] = keeps_in_edges[dst[into]]
        _refuse(into & (src < 0), "training message-passing edges come "
                "from nodes the part does not hold: the split passes edges "
                "the graph lacks")
        types = end_types(key)
        edge_index[key] = torch.stack([part.local(src[into], types[0]),
                                       part.local(dst[into], types[1])])
        kept[key] = into
    label_src, label_dst = part.edges(labels, edge_type)
    is_own = torch.zeros(level.numel(), dtype=torch.bool)
    is_own[part.own] = True
    mine = (label_dst >= 0) & is_own[label_dst.clamp(min=0)]
    _refuse(mine & ((label_src < 0) | ~complete[label_src.clamp(min=0)]),
            f"training label edges come from nodes whose {depth}-hop trees "
            f"the part does not hold: label edges that are not edges of the "
            f"graph")
    types = end_types(edge_type)
    weight = complete.float()
    return PartLinks(
        edge_index=edge_index, passing=kept,
        label_index=torch.stack([part.local(label_src[mine], types[0]),
                                 part.local(label_dst[mine], types[1])]),
        labels=mine,
        negative_weight=(part.of_type(weight, types[0]),
                         part.of_type(weight, types[1])))
