r"""PaGraph's self-reliant parts of a heterogeneous graph: the training
nodes of the labelled type are streamed to parts on the homogeneous view of
all node types (:func:`~pyg_fastload.partition.pagraph.pagraph_assign`:
every relation counts as an in-edge), and each part holds, of every node
type, its own nodes and replicas of the rest of its training nodes'
``num_hops``-hop in-neighbourhood over every relation.

A part is a heterogeneous dataset directory in its own row ids (per node
type: its own nodes in new-id order, then its replicas in new-id order),
keeping the in-edges of every relation into its message-flow rows (those
fewer than ``num_hops`` hops from its training nodes), so sampling from its
training nodes never leaves it; ``global_id`` (per node type) gives every
row's type-local new id, and replicas are never training, validation or
test nodes there.
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

import numpy as np
import torch
from torch import Tensor

from ..graph.hetero_topology import EdgeType
from ..graph.ranges import expand_ranges
from ..graph.topology import CSCTopology
from .pagraph import message_flow_levels, pagraph_assign

__all__ = ['hetero_pagraph_assign', 'pagraph_part']

_SPLITS = ('train_mask', 'val_mask', 'test_mask')


def hetero_pagraph_assign(view: CSCTopology, train_nodes: Tensor,
                          num_parts: int, num_hops: int, progress: bool
                          ) -> Tuple[np.ndarray, Tensor, List[Tensor]]:
    r"""``(owner, member, expand)`` on the homogeneous view of all node
    types (global ids): the part of every node, the ``[K, N]`` membership
    of every part (replicas included) and, per part, which nodes keep their
    in-edges (fewer than :obj:`num_hops` hops from its training nodes)."""
    owner, member = pagraph_assign(view, train_nodes, num_parts, num_hops,
                                   progress)
    owned = torch.from_numpy(owner)[train_nodes]
    expand = [message_flow_levels(view, train_nodes[owned == k],
                                  num_hops) < num_hops
              for k in range(num_parts)]
    return owner, member, expand


def pagraph_part(dataset: Any, rows: Dict[str, Tuple[Tensor, Tensor]],
                 expand: Tensor, new_of: Tensor
                 ) -> Tuple[Dict[EdgeType, CSCTopology],
                            Dict[str, Dict[str, Tensor]], Dict[str, Any]]:
    r"""``(relations, arrays, counts)`` of a PaGraph part in its own row
    ids: every relation's in-edges of its message-flow rows, every node
    type's rows of every array (and ``global_id``), and the ``owned`` and
    ``replicas`` counts per node type.

    Args:
        dataset: the opened heterogeneous dataset.
        rows: per node type, ``(own, replicas)``: type-local original ids
            of its own nodes and of its replicas, each in new-id order.
        expand: which global original ids keep their in-edges here.
        new_of: the global new id of every global original id.
    """
    topo = dataset.topology
    offset = dict(zip(topo.node_types, topo.node_offset.tolist()))
    held = {t: torch.cat(pair) for t, pair in rows.items()}
    local_of = {}
    for node_type, ids in held.items():
        lookup = torch.full((dataset.num_nodes[node_type], ), -1,
                            dtype=torch.long)
        lookup[ids] = torch.arange(ids.numel())
        local_of[node_type] = lookup
    relations = {}
    for r, edge_type in enumerate(topo.edge_types):
        src, _, dst = edge_type
        first = int(topo.segment_offset[r])
        dst_rows = held[dst]
        begin = topo.indptr[first + dst_rows]
        degree = torch.where(expand[dst_rows + offset[dst]],
                             topo.indptr[first + dst_rows + 1] - begin, 0)
        sources = local_of[src][
            topo.indices[expand_ranges(begin, degree)].long() - offset[src]]
        keep = sources >= 0  # all, for PaGraph's membership
        kept = torch.repeat_interleave(
            torch.arange(dst_rows.numel()), degree)[keep]
        indptr = torch.zeros(dst_rows.numel() + 1, dtype=torch.long)
        torch.cumsum(torch.bincount(kept, minlength=dst_rows.numel()), 0,
                     out=indptr[1:])
        relations[edge_type] = CSCTopology(indptr, sources[keep],
                                           dst_rows.numel())
    arrays = {}
    for node_type, values in dataset.arrays.items():
        own = rows[node_type][0].numel()
        arrays[node_type] = {key: value[held[node_type]]
                             for key, value in values.items()}
        for key in _SPLITS:  # a replica trains (and is evaluated) at home
            if key in arrays[node_type]:
                arrays[node_type][key][own:] = False
        arrays[node_type]['global_id'] = \
            new_of[held[node_type] + offset[node_type]] - offset[node_type]
    return relations, arrays, {
        'owned': {t: pair[0].numel() for t, pair in rows.items()},
        'replicas': {t: pair[1].numel() for t, pair in rows.items()}}
