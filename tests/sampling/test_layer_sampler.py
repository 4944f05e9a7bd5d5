import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch_geometric.data import Data

from pyg_fastload.sampling import LayerWiseSampler

from ..helpers import random_graph


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31), st.lists(st.integers(1, 40), min_size=1,
                                       max_size=3))
def test_edges_exist_and_layers_are_bounded(seed, sizes):
    data = random_graph(num_nodes=60, num_edges=300, seed=seed % 7)
    sampler = LayerWiseSampler(data, sizes)
    out = sampler.sample(torch.arange(5), torch.Generator().manual_seed(seed))
    edges = set(map(tuple, data.edge_index.t().tolist()))
    src, dst = out.node[out.row], out.node[out.col]
    assert all((s, d) in edges for s, d in zip(src.tolist(), dst.tolist()))
    assert len(out.num_sampled_edges) == len(sizes)
    for size, count in zip(sizes, out.num_sampled_edges):
        assert count <= size  # repeated draws of one edge are kept once


def test_zero_weight_edges_are_never_drawn():
    edge_index = torch.tensor([[1, 2, 3, 4], [0, 0, 0, 0]])
    data = Data(edge_index=edge_index, num_nodes=5,
                w=torch.tensor([0., 1., 0., 2.]), x=torch.zeros(5, 1))
    sampler = LayerWiseSampler(data, [50], weight_attr='w')
    out = sampler.sample(torch.tensor([0]), torch.Generator().manual_seed(0))
    assert set(out.node[out.row].tolist()) == {2, 4}


def test_minus_one_takes_every_in_edge():
    data = random_graph(num_nodes=30, num_edges=120)
    out = LayerWiseSampler(data, [-1]).sample(
        torch.tensor([3]), torch.Generator().manual_seed(0))
    assert out.num_sampled_edges[0] == int((data.edge_index[1] == 3).sum())
