r"""Property-based checks of the node-wise sampler on random graphs: every
sampled edge exists, fan-outs bound the draws, seeds come first."""
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data

from pyg_fastload import FastNeighborSampler


@st.composite
def graphs(draw):
    num_nodes = draw(st.integers(1, 40))
    num_edges = draw(st.integers(0, 150))
    seed = draw(st.integers(0, 2**31))
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(0, num_nodes, (2, num_edges), generator=gen)
    weight = torch.randint(0, 3, (num_edges, ), generator=gen).double()
    return Data(edge_index=edge_index, num_nodes=num_nodes, w=weight,
                x=torch.zeros(num_nodes, 1)), seed


@settings(max_examples=80, deadline=None)
@given(graphs(), st.lists(st.integers(-1, 5), min_size=1, max_size=3),
       st.booleans(), st.booleans(), st.booleans())
def test_sampled_edges_exist_and_respect_fanouts(graph, fanouts, replace,
                                                 weighted, disjoint):
    data, seed = graph
    sampler = FastNeighborSampler(data, fanouts, replace=replace,
                                  disjoint=disjoint,
                                  weight_attr='w' if weighted else None)
    gen = torch.Generator().manual_seed(seed)
    seeds = torch.randint(0, data.num_nodes, (3, ), generator=gen).unique()
    out = sampler.sample(seeds, gen)
    edges = {}
    for (s, d), w in zip(data.edge_index.t().tolist(), data.w.tolist()):
        edges[(s, d)] = max(edges.get((s, d), 0), w)
    src, dst = out.node[out.row], out.node[out.col]
    for s, d in zip(src.tolist(), dst.tolist()):
        assert (s, d) in edges  # a real edge, drawn towards the frontier
        if weighted:
            assert edges[(s, d)] > 0  # zero-weight edges are never drawn
    assert out.node[:seeds.numel()].tolist() == seeds.tolist()
    assert sum(out.num_sampled_nodes) == out.node.numel()
    assert sum(out.num_sampled_edges) == out.row.numel()
    frontier = seeds.numel()
    for hop, k in enumerate(fanouts):
        if k >= 0:  # each frontier node draws at most k in-edges
            assert out.num_sampled_edges[hop] <= k * frontier
        frontier = out.num_sampled_nodes[hop + 1]
