r"""PaGraph's self-reliant parts of a heterogeneous graph: the training
nodes of the labelled type are streamed to parts on the homogeneous view of
all node types (:func:`~pyg_fastload.partition.pagraph_link.task_assign`:
every relation counts as an in-edge; for task ``'link'`` every node is
trained), and each part holds, of every node type, its own nodes and
replicas of the rest of its trained nodes' in-neighbourhood over every
relation.

A part is a heterogeneous dataset directory in its own row ids (per node
type: its own nodes in new-id order, then its replicas in new-id order),
keeping the in-edges of every relation into its message-flow rows (those
fewer hops from its trained nodes than it replicates, with their rows of
the relation's edge arrays), so sampling from its trained nodes never
leaves it; ``global_id`` (per node type) gives every
row's type-local new id, and replicas are never training, validation or
test nodes there.
"""
from __future__ import annotations

from itertools import chain
from typing import Any, Callable, Dict, Iterator, Tuple

import torch
from torch import Tensor

from .part_dirs import row_chunks

__all__ = ['pagraph_part']

_SPLITS = ('train_mask', 'val_mask', 'test_mask')


def pagraph_part(dataset: Any, rows: Dict[str, Tuple[Tensor, Tensor]],
                 new_of: Tensor
                 ) -> Tuple[Dict[str, Tensor], Tensor,
                            Dict[str, Dict[str, Any]], Dict[str, Any]]:
    r"""``(held, ids, arrays, counts)``: what a PaGraph part holds in its
    own row ids, for the writer to stream like a disjoint part
    (:func:`~pyg_fastload.partition.hetero.partition_hetero_dataset`). Per
    node type, the type-local original ids of its rows (own, then
    replicas); the id every global original id has as a source of the
    part's edges (its type's ``node_offset`` plus its row here, ``-1``
    where not held: no source of a message-flow row); the arrays whose rows
    are not the dataset's (the splits, false for replicas, as chunk
    sources, and ``global_id``); and the ``owned`` and ``replicas`` counts
    per node type.

    Args:
        dataset: the opened heterogeneous dataset.
        rows: per node type, ``(own, replicas)``: type-local original ids
            of its own nodes and of its replicas, each in new-id order.
        new_of: the global new id of every global original id.
    """
    topo = dataset.topology
    offset = dict(zip(topo.node_types, topo.node_offset.tolist()))
    held = {t: torch.cat(pair) for t, pair in rows.items()}
    ids = torch.full((topo.num_nodes, ), -1, dtype=torch.long)
    for node_type, local in held.items():
        start = offset[node_type]
        ids[local + start] = torch.arange(start, start + local.numel())
    arrays = {}
    for node_type, values in dataset.arrays.items():
        own, replicas = rows[node_type]
        arrays[node_type] = {key: _home_only(values[key], own,
                                             replicas.numel())
                             for key in _SPLITS if key in values}
        arrays[node_type]['global_id'] = \
            new_of[held[node_type] + offset[node_type]] - offset[node_type]
    return held, ids, arrays, {
        'owned': {t: pair[0].numel() for t, pair in rows.items()},
        'replicas': {t: pair[1].numel() for t, pair in rows.items()}}


def _home_only(mask: Tensor, own: Tensor, replicas: int
               ) -> Callable[[], Iterator[Tensor]]:
    r"""Split :obj:`mask`'s rows of :obj:`own` in chunks, then false for
    the :obj:`replicas` (a replica trains, and is evaluated, at home)."""
    chunks = row_chunks(mask, own)
    return lambda: chain(chunks(), [mask.new_zeros((replicas, ) +
                                                   mask.shape[1:])])
