r"""Link-level sampling on a heterogeneous graph: the label edges of one
edge type ``(src, rel, dst)`` and their negatives (drawn over the source and
destination types) become the seeds of one sample, in the layout of PyG's
``LinkNeighborLoader`` on a ``HeteroData``: shared trees, or one tree per
label edge endpoint (``disjoint``, which temporal sampling needs)."""
from __future__ import annotations

from typing import Any, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.sampler import EdgeSamplerInput, HeteroSamplerOutput
from torch_geometric.sampler.base import NegativeSampling

from .link import EdgeKeys, add_negatives, label_times, negatives_drawer
from .ops import arange_as

__all__ = ['sample_hetero_edges']


def _edge_keys(sampler: Any, edge_type: Tuple[str, str, str]) -> EdgeKeys:
    r"""The relation's edge keys (strict negatives), built once."""
    keys = sampler.relation_keys.get(edge_type)
    if keys is None:
        topo = sampler.topology
        keys = EdgeKeys(topo.relation_topology(edge_type),
                        num_sources=topo.num_nodes_of(edge_type[0]))
        sampler.relation_keys[edge_type] = keys
    return keys


def _seeds(src: Tensor, dst: Tensor, first: Tuple[int, int], one_type: bool,
           disjoint: bool) -> Tuple[Tensor, Tensor, Tensor]:
    r"""The seeds (global ids) and every label edge's source and destination
    index among the seeds of its type: one set if both ends have one type,
    distinct ids unless :obj:`disjoint` (one tree per endpoint)."""
    if one_type:
        seeds = torch.cat([src, dst])
        index = arange_as(seeds)
        if not disjoint:
            seeds, index = seeds.unique(return_inverse=True)
        return (seeds + first[0], index[:src.numel()],
                index[src.numel():])
    if disjoint:
        return (torch.cat([src + first[0], dst + first[1]]),
                arange_as(src), arange_as(dst))
    src_seeds, src_index = src.unique(return_inverse=True)
    dst_seeds, dst_index = dst.unique(return_inverse=True)
    return (torch.cat([src_seeds + first[0], dst_seeds + first[1]]),
            src_index, dst_index)


def sample_hetero_edges(sampler: Any, inputs: EdgeSamplerInput,
                        neg_sampling: Optional[NegativeSampling],
                        generator: torch.Generator,
                        strict: bool = False) -> HeteroSamplerOutput:
    r"""Samples around the label edges of :obj:`inputs` (``input_type`` an
    edge type) with :obj:`sampler` (a
    :class:`~pyg_fastload.sampling.HeteroNeighborSampler`); ``metadata`` as
    PyG's link samplers give it. :obj:`strict`: no negative pair is an edge
    of the relation. A temporal sampler gives both endpoints of every label
    edge the edge's time and draws negatives not later than it."""
    if inputs.input_type is None or len(inputs.input_type) != 3:
        raise ValueError("heterogeneous link sampling needs the label "
                         "edges' edge type, e.g. ('author', 'writes', "
                         "'paper')")
    edge_type = tuple(inputs.input_type)
    src_type, _, dst_type = edge_type
    topo = sampler.topology
    first = (int(topo.node_offset[topo.node_types.index(src_type)]),
             int(topo.node_offset[topo.node_types.index(dst_type)]))
    num_pos = inputs.row.numel()
    src, dst, label = inputs.row.long(), inputs.col.long(), inputs.label
    time, temporal = inputs.time, sampler.temporal
    if time is not None or temporal is not None:
        if time is None:
            raise ValueError("a temporal link sampler needs every label "
                             "edge's time: give 'edge_label_time'")
        time = sampler.seed_time(src + first[0], time, 'edge_label_time')
    triplet = neg_sampling is not None and neg_sampling.is_triplet()
    if neg_sampling is not None:
        draw = negatives_drawer(
            {'src': (first[0], topo.num_nodes_of(src_type)),
             'dst': (first[1], topo.num_nodes_of(dst_type))},
            neg_sampling, generator, temporal, time)
        exact = neg_sampling.dst_weight is None and (
            temporal is None or temporal.node_time is None)
        src, dst, label = add_negatives(
            src, dst, label, neg_sampling, draw,
            _edge_keys(sampler, edge_type) if strict else None, exact,
            generator)
    seeds, src_index, dst_index = _seeds(src, dst, first,
                                         src_type == dst_type,
                                         sampler.disjoint)
    times = None
    if time is not None:  # every label edge's endpoints at its time
        times = torch.cat([label_times(time, src.numel()),
                           label_times(time, dst.numel())])
    out = sampler.sample_global(seeds, generator, times)
    if sampler.disjoint:  # PyG's: a seed's position modulo num_pos
        for node_type, batch in out.batch.items():
            out.batch[node_type] = batch % num_pos
    src_time = None if times is None else times[:src.numel()]
    if triplet:
        out.metadata = (inputs.input_id, src_index, dst_index[:num_pos],
                        dst_index[num_pos:].view(-1, num_pos).t()
                        .contiguous().squeeze(-1), src_time)
    else:
        out.metadata = (inputs.input_id, torch.stack([src_index, dst_index]),
                        label, src_time)
    return out
