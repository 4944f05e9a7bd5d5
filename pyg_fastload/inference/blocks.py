r"""One chunk of destination nodes and its in-neighbours as a bipartite
block: the rows a layer reads, the local ``edge_index`` it aggregates over,
and for ``GCNConv`` the edge weights of its normalisation over the whole
graph."""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from ..graph import CSCTopology

__all__ = ['Block', 'GcnScale', 'chunk_block', 'gcn_scale', 'chunk_generator']

#: Nodes whose self-loops :func:`gcn_scale` counts at once.
_DEGREE_CHUNK = 1 << 16


@dataclass
class Block:
    r"""Destination nodes ``start..end-1`` and what one layer reads for them.

    Attributes:
        start (int): the first destination node.
        end (int): one past the last destination node.
        sources (torch.Tensor): the global id of every source row, the
            chunk's own nodes first (``sources[i] == start + i`` for
            ``i < end - start``), then the other in-neighbours, each once
            (a block between two node types: the in-neighbours alone).
        edge_index (torch.Tensor): ``[2, num_edges]``, row 0 indexes
            :attr:`sources`, row 1 the chunk's nodes (PyG's bipartite
            ``edge_index``), grouped by destination in node order.
        edge_weight (torch.Tensor, optional): ``GCNConv``'s normalised
            weight of every edge (self-loops included), else :obj:`None`.
    """
    start: int
    end: int
    sources: Tensor
    edge_index: Tensor
    edge_weight: Optional[Tensor] = None

    @property
    def num_dst(self) -> int:
        return self.end - self.start

    def adjacency(self, device: torch.device,
                  dtype: torch.dtype = torch.float32) -> Tensor:
        r"""The block as a sparse CSR matrix ``[num_dst, num_sources]``
        (PyG's ``adj_t``), valued by :attr:`edge_weight` (else ones), for
        the layers that aggregate with one sparse-dense product."""
        src, dst = self.edge_index
        crow = torch.zeros(self.num_dst + 1, dtype=torch.long)
        torch.cumsum(torch.bincount(dst, minlength=self.num_dst), 0,
                     out=crow[1:])
        value = self.edge_weight.to(dtype) \
            if self.edge_weight is not None else \
            torch.ones(src.numel(), dtype=dtype)
        with warnings.catch_warnings():  # "in beta state", once
            warnings.simplefilter('ignore', UserWarning)
            return torch.sparse_csr_tensor(
                crow.to(device), src.to(device), value.to(device),
                size=(self.num_dst, self.sources.numel()),
                check_invariants=False)


def chunk_generator(seed: int, layer: int, chunk: int) -> torch.Generator:
    r"""The random stream of one chunk of one layer: the same draws
    whichever thread builds the chunk, and in whichever order."""
    state = np.random.SeedSequence([seed, layer, chunk]).generate_state(2)
    return torch.Generator().manual_seed(
        int(state[0]) << 32 | int(state[1]))


def _draw(dst: Tensor, ptr: Tensor, fanout: int,
          generator: torch.Generator) -> Tensor:
    r"""Positions of at most :obj:`fanout` distinct edges per destination,
    uniformly at random (the edges are grouped by destination, :obj:`ptr`
    their offsets), in edge order."""
    num_edges = dst.numel()
    key = dst.double() + torch.rand(num_edges, generator=generator,
                                    dtype=torch.float64) * 0.5
    order = torch.sort(key, stable=True).indices
    rank = torch.arange(num_edges) - ptr[dst]  # rank within its node
    return order[rank < fanout].sort().values


def chunk_block(topology: CSCTopology, start: int, end: int,
                fanout: int = -1,
                generator: Optional[torch.Generator] = None,
                gcn: Optional['GcnScale'] = None,
                own_first: bool = True) -> Block:
    r"""The bipartite block of destination nodes ``start..end-1``: every
    in-neighbour (:obj:`fanout` ``-1``) or at most :obj:`fanout` of them
    per node, drawn with :obj:`generator`; with :obj:`gcn`, self-loops
    replaced as ``GCNConv`` does and the edges weighted by its
    normalisation over the whole graph. Without :obj:`own_first` (a
    relation between two node types, whose sources are of another id
    space) the sources are the in-neighbours alone, each once, sorted."""
    indptr = topology.indptr
    low, high = int(indptr[start]), int(indptr[end])
    neighbours = topology.indices[low:high].to(torch.long)
    ptr = indptr[start:end + 1] - low
    count = end - start
    dst = torch.repeat_interleave(torch.arange(count), ptr[1:] - ptr[:-1],
                                  output_size=high - low)
    if fanout >= 0 and neighbours.numel():
        keep = _draw(dst, ptr, fanout, generator)
        neighbours, dst = neighbours[keep], dst[keep]
    if not own_first:
        if gcn is not None:
            raise ValueError("GCNConv's normalisation needs the chunk's own "
                             "nodes among the sources (own_first=True)")
        sources, local = torch.unique(neighbours, return_inverse=True)
        return Block(start, end, sources, torch.stack([local, dst]))
    inside = (neighbours >= start) & (neighbours < end)
    local = neighbours - start
    others, inverse = torch.unique(neighbours[~inside], return_inverse=True)
    local[~inside] = inverse + count
    sources = torch.cat([torch.arange(start, end), others])
    weight = None
    if gcn is not None:
        if gcn.add_self_loops:  # GCNConv drops loops, then adds one each
            loop = local == dst
            if bool(loop.any()):
                local, dst = local[~loop], dst[~loop]
            nodes = torch.arange(count)
            order = torch.sort(torch.cat([dst, nodes]), stable=True)
            local = torch.cat([local, nodes])[order.indices]
            dst = order.values  # a node's edges together, its loop last
        weight = gcn.scale[sources[local]] * gcn.scale[dst + start]
    return Block(start, end, sources, torch.stack([local, dst]), weight)


@dataclass
class GcnScale:
    r"""``GCNConv``'s normalisation over the whole graph: edge ``u -> v``
    weighs ``scale[u] * scale[v]``, ``scale = deg ** -0.5`` (0 where the
    degree is 0).

    Attributes:
        scale (torch.Tensor): ``float64``, one per node.
        add_self_loops (bool): whether every node gets one self-loop (its
            own self-loops dropped first).
    """
    scale: Tensor
    add_self_loops: bool


def gcn_scale(topology: CSCTopology, add_self_loops: bool) -> GcnScale:
    r"""The degrees ``gcn_norm`` computes for the whole graph without edge
    weights: every in-edge counts 1; with :obj:`add_self_loops`, a node's
    own self-loops are replaced by one (PyG's ``add_remaining_self_loops``,
    whose loops weigh 1 when the graph has no edge weights, ``improved``
    or not)."""
    degree = topology.in_degree().to(torch.float64)
    if add_self_loops:
        loops = torch.zeros(topology.num_nodes, dtype=torch.float64)
        for start in range(0, topology.num_nodes, _DEGREE_CHUNK):
            end = min(start + _DEGREE_CHUNK, topology.num_nodes)
            low = int(topology.indptr[start])
            high = int(topology.indptr[end])
            count = topology.indptr[start + 1:end + 1] - \
                topology.indptr[start:end]
            dst = torch.repeat_interleave(torch.arange(start, end), count,
                                          output_size=high - low)
            hit = topology.indices[low:high].to(torch.long) == dst
            loops[start:end] = torch.bincount(
                dst[hit] - start, minlength=end - start).to(torch.float64)
        degree = degree - loops + 1
    scale = degree.pow(-0.5)
    scale.masked_fill_(torch.isinf(scale), 0.0)
    return GcnScale(scale, add_self_loops)
