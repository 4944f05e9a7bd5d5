r"""Link-level sampling on a heterogeneous graph: the label edges of one
edge type ``(src, rel, dst)`` and their negatives (drawn over the source and
destination types) become the seeds of one sample, in the layout of PyG's
``LinkNeighborLoader`` on a ``HeteroData``."""
from __future__ import annotations

import math
from typing import Any, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.sampler import EdgeSamplerInput, HeteroSamplerOutput
from torch_geometric.sampler.base import NegativeSampling

from .link import negative_nodes

__all__ = ['sample_hetero_edges']


def _endpoints(src: Tensor, dst: Tensor, label: Any, num_src: int,
               num_dst: int, neg: Optional[NegativeSampling],
               generator: torch.Generator) -> Tuple[Tensor, Tensor, Any]:
    r"""The label edges' endpoints with the negatives appended (binary:
    pairs over both types, labelled 0; triplet: destinations), negative
    ``j`` belonging to positive ``j % num_pos``."""
    if neg is None:
        return src, dst, label
    num_pos = src.numel()
    num_neg = math.ceil(num_pos * neg.amount)
    dst = torch.cat([dst, negative_nodes(num_neg, num_dst, neg, 'dst',
                                         generator)])
    if neg.is_triplet():
        return src, dst, label
    src = torch.cat([src, negative_nodes(num_neg, num_src, neg, 'src',
                                         generator)])
    if label is None:
        label = torch.ones(num_pos)
    label = torch.cat([label, label.new_zeros(
        (num_neg, ) + tuple(label.shape[1:]))])
    return src, dst, label


def sample_hetero_edges(sampler: Any, inputs: EdgeSamplerInput,
                        neg_sampling: Optional[NegativeSampling],
                        generator: torch.Generator) -> HeteroSamplerOutput:
    r"""Samples around the label edges of :obj:`inputs` (``input_type`` an
    edge type) with :obj:`sampler` (a
    :class:`~pyg_fastload.sampling.HeteroNeighborSampler`); the seeds are
    the distinct source and destination nodes (one set if both ends have
    one type), ``metadata`` as PyG's link samplers give it."""
    if inputs.input_type is None or len(inputs.input_type) != 3:
        raise ValueError("heterogeneous link sampling needs the label "
                         "edges' edge type, e.g. ('author', 'writes', "
                         "'paper')")
    if inputs.time is not None:
        raise NotImplementedError("temporal link sampling on heterogeneous "
                                  "graphs is not supported yet")
    if sampler.disjoint:
        raise NotImplementedError("'disjoint=True' link sampling on "
                                  "heterogeneous graphs is not supported "
                                  "yet")
    src_type, _, dst_type = inputs.input_type
    topo = sampler.topology
    offset = {t: int(topo.node_offset[i])
              for i, t in enumerate(topo.node_types)}
    num_pos = inputs.row.numel()
    src, dst, label = _endpoints(
        inputs.row.long(), inputs.col.long(), inputs.label,
        topo.num_nodes_of(src_type), topo.num_nodes_of(dst_type),
        neg_sampling, generator)
    if src_type == dst_type:  # one seed set
        seeds, inverse = torch.cat([src, dst]).unique(return_inverse=True)
        src_index, dst_index = inverse[:src.numel()], inverse[src.numel():]
        out = sampler.sample_global(seeds + offset[src_type], generator)
    else:
        src_seeds, src_index = src.unique(return_inverse=True)
        dst_seeds, dst_index = dst.unique(return_inverse=True)
        out = sampler.sample_global(torch.cat(
            [src_seeds + offset[src_type], dst_seeds + offset[dst_type]]),
            generator)
    if neg_sampling is not None and neg_sampling.is_triplet():
        out.metadata = (inputs.input_id, src_index, dst_index[:num_pos],
                        dst_index[num_pos:].view(-1, num_pos).t()
                        .contiguous().squeeze(-1), None)
    else:
        out.metadata = (inputs.input_id, torch.stack([src_index, dst_index]),
                        label, None)
    return out
