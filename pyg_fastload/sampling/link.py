r"""Link-level sampling on a homogeneous graph: the label edges' endpoints,
with negatives drawn from the loader's generator, become the seeds of one
neighbourhood sample, returned in the layout of PyG's
``LinkNeighborLoader`` (``edge_label_index`` / ``edge_label``, or
``src_index`` / ``dst_pos_index`` / ``dst_neg_index``)."""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

import torch
from torch import Tensor
from torch_geometric.sampler import EdgeSamplerInput, SamplerOutput
from torch_geometric.sampler.base import NegativeSampling

__all__ = ['EdgeKeys', 'negative_nodes', 'sample_edges']

#: Redraws of the negatives that hit a true edge before strict negative
#: sampling gives up.
STRICT_ROUNDS = 32


class EdgeKeys:
    r"""Every edge ``u -> v`` of a CSC topology as the sorted key
    ``u * N + v``, to test drawn pairs against (strict negatives)."""

    def __init__(self, topology: Any):
        n = topology.num_nodes
        dst = torch.repeat_interleave(torch.arange(n), topology.indptr.diff())
        self.num_nodes = n
        self.keys = torch.sort(topology.indices.long() * n + dst).values
        self.out_degree = topology.out_degree()

    def contains(self, src: Tensor, dst: Tensor) -> Tensor:
        r"""Whether each pair ``(src[i], dst[i])`` is an edge."""
        key = src * self.num_nodes + dst
        if not self.keys.numel():
            return torch.zeros_like(key, dtype=torch.bool)
        pos = torch.searchsorted(self.keys, key).clamp_(
            max=self.keys.numel() - 1)
        return self.keys[pos] == key


def _strict(src: Tensor, dst: Tensor, keys: EdgeKeys, neg: NegativeSampling,
            redraw_src: bool, generator: torch.Generator) -> None:
    r"""Redraws (in place) the negative pairs that are true edges: the
    destination, and the source too for binary negatives."""
    full = keys.out_degree[src] >= keys.num_nodes
    if not redraw_src and bool(full.any()):
        node = int(src[full][0])
        raise ValueError(f"strict negative sampling: source node {node} "
                         f"has an edge to every node, so it has no negative "
                         f"destination; drop its label edges or use "
                         f"non-strict negatives")
    for _ in range(STRICT_ROUNDS):
        bad = keys.contains(src, dst).nonzero().view(-1)
        if not bad.numel():
            return
        dst[bad] = negative_nodes(bad.numel(), keys.num_nodes, neg, 'dst',
                                  generator)
        if redraw_src:
            src[bad] = negative_nodes(bad.numel(), keys.num_nodes, neg,
                                      'src', generator)
    node = int(src[keys.contains(src, dst)][0])
    raise ValueError(f"strict negative sampling: {STRICT_ROUNDS} draws found "
                     f"no non-edge for source node {node} (it is linked to "
                     f"{int(keys.out_degree[node])} of {keys.num_nodes} "
                     f"nodes); use non-strict negatives on so dense a graph")


def negative_nodes(count: int, num_nodes: int, neg: NegativeSampling,
                   endpoint: str, generator: torch.Generator) -> Tensor:
    r""":obj:`count` nodes drawn uniformly (or by ``neg.src_weight`` /
    ``neg.dst_weight`` for :obj:`endpoint` ``'src'`` / ``'dst'``) with
    replacement; like PyG's default, a drawn pair may be a true edge."""
    weight = neg.src_weight if endpoint == 'src' else neg.dst_weight
    if weight is not None:
        weight = weight.to(torch.float64)
        if weight.numel() != num_nodes:
            raise ValueError(f"'neg_sampling.{endpoint}_weight' has "
                             f"{weight.numel()} entries, the graph "
                             f"{num_nodes} nodes: give one weight per node")
        return torch.multinomial(weight, count, replacement=True,
                                 generator=generator)
    return torch.randint(num_nodes, (count, ), generator=generator)


def sample_edges(sample: Callable[[Tensor, torch.Generator], SamplerOutput],
                 num_nodes: int, disjoint: bool, inputs: EdgeSamplerInput,
                 neg_sampling: Optional[NegativeSampling],
                 generator: torch.Generator,
                 edge_keys: Optional[EdgeKeys] = None) -> SamplerOutput:
    r"""Samples around the label edges of :obj:`inputs` (positives, then
    ``neg_sampling``'s negatives) with :obj:`sample` (seeds, generator) ->
    output; ``metadata`` as PyG's link samplers give it. With
    :obj:`edge_keys`, no negative pair is a true edge (strict)."""
    if inputs.time is not None:
        raise NotImplementedError("temporal link sampling ('edge_label_time')"
                                  " is not supported by pyg_fastload yet")
    src, dst = inputs.row.long(), inputs.col.long()
    label: Any = inputs.label
    num_pos = src.numel()
    num_neg = 0
    triplet = neg_sampling is not None and neg_sampling.is_triplet()
    if neg_sampling is not None:
        num_neg = math.ceil(num_pos * neg_sampling.amount)
        src_neg = src.repeat_interleave(int(neg_sampling.amount)) \
            if triplet else negative_nodes(num_neg, num_nodes, neg_sampling,
                                           'src', generator)
        dst_neg = negative_nodes(num_neg, num_nodes, neg_sampling, 'dst',
                                 generator)
        if edge_keys is not None:
            _strict(src_neg, dst_neg, edge_keys, neg_sampling, not triplet,
                    generator)
        if not triplet:
            src = torch.cat([src, src_neg])
        dst = torch.cat([dst, dst_neg])
        if not triplet:  # binary: negatives labelled 0
            if label is None:
                label = torch.ones(num_pos)
            label = torch.cat([label, label.new_zeros(
                (num_neg, ) + tuple(label.shape[1:]))])
    seeds = torch.cat([src, dst])
    if disjoint:
        index = torch.arange(seeds.numel())
    else:
        seeds, index = seeds.unique(return_inverse=True)
    out = sample(seeds, generator)
    if disjoint:  # PyG's: every tree belongs to a positive edge
        out.batch = out.batch % num_pos
    num_src = src.numel()
    if triplet:
        out.metadata = (inputs.input_id, index[:num_pos],
                        index[num_src:num_src + num_pos],
                        index[num_src + num_pos:].view(num_pos, -1)
                        .squeeze(-1), None)
    else:
        out.metadata = (inputs.input_id, index.view(2, -1), label, None)
    return out
