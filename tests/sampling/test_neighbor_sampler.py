from collections import Counter

import pytest
import torch
from scipy.stats import chisquare
from torch_geometric.data import Data

from pyg_fastload import CSCTopology, FastNeighborSampler
from pyg_fastload.sampling import LayerWiseSampler

from ..helpers import random_graph


def edge_set(edge_index):
    return set(zip(edge_index[0].tolist(), edge_index[1].tolist()))


def in_neighbors(data, node):
    return data.edge_index[0, data.edge_index[1] == node].tolist()


@pytest.mark.parametrize('replace', [False, True])
@pytest.mark.parametrize('disjoint', [False, True])
def test_sampled_edges_exist_and_respect_fanout(graph, replace, disjoint):
    fanouts = [4, 3, 2]
    sampler = FastNeighborSampler(graph, fanouts, replace=replace,
                                  disjoint=disjoint)
    seeds = torch.arange(0, 40, 2)
    out = sampler.sample(seeds, torch.Generator().manual_seed(0))
    edges = edge_set(graph.edge_index)
    src, dst = out.node[out.row], out.node[out.col]
    assert all(e in edges for e in zip(src.tolist(), dst.tolist()))
    # `edge` holds the original edge ids of the sampled edges:
    assert torch.equal(graph.edge_index[:, out.edge], torch.stack([src, dst]))
    # Seeds come first, then each hop's new nodes:
    assert torch.equal(out.node[:seeds.numel()], seeds)
    assert sum(out.num_sampled_nodes) == out.node.numel()
    assert sum(out.num_sampled_edges) == out.row.numel()
    deg = torch.bincount(graph.edge_index[1], minlength=graph.num_nodes)
    edge_start = 0
    for hop, k in enumerate(fanouts):
        num_edges = out.num_sampled_edges[hop]
        col = out.col[edge_start:edge_start + num_edges]
        row = out.row[edge_start:edge_start + num_edges]
        per_dst = torch.bincount(col, minlength=out.node.numel())
        targets = per_dst.nonzero().view(-1)
        if replace:
            assert (per_dst[targets] == k).all()
        else:
            assert (per_dst[targets] <= deg[out.node[targets]].clamp(
                max=k)).all()
            # No duplicate neighbour per destination:
            pairs = col * out.node.numel() + row
            assert pairs.unique().numel() == pairs.numel()
        edge_start += num_edges


def test_all_neighbors_with_minus_one(graph):
    sampler = FastNeighborSampler(graph, [-1])
    seeds = torch.tensor([3, 7, 11])
    out = sampler.sample(seeds)
    for i, seed in enumerate(seeds.tolist()):
        got = sorted(out.node[out.row[out.col == i]].tolist())
        assert got == sorted(in_neighbors(graph, seed))


def test_new_nodes_are_unique_and_hop_ordered(graph):
    out = FastNeighborSampler(graph, [5, 5]).sample(torch.arange(10))
    assert out.node.unique().numel() == out.node.numel()
    # Every hop-h node is reached by an edge from a hop-(h-1) node:
    bounds = torch.tensor([0] + out.num_sampled_nodes).cumsum(0)
    for hop in range(1, 3):
        nodes = torch.arange(int(bounds[hop]), int(bounds[hop + 1]))
        assert torch.isin(nodes, out.row).all()


def test_disjoint_trees(graph):
    seeds = torch.tensor([1, 1, 5])
    out = FastNeighborSampler(graph, [3, 3], disjoint=True).sample(seeds)
    assert torch.equal(out.batch[:3], torch.arange(3))
    # Edges never cross trees:
    assert torch.equal(out.batch[out.row], out.batch[out.col])
    # Trees 0 and 1 start from the same seed but are sampled independently.
    assert (out.batch == 0).sum() > 1 and (out.batch == 1).sum() > 1


def test_induced_subgraph_has_every_edge(graph):
    out = FastNeighborSampler(graph, [3], subgraph_type='induced').sample(
        torch.arange(5))
    nodes = set(out.node.tolist())
    expected = {(s, d) for s, d in edge_set(graph.edge_index)
                if s in nodes and d in nodes}
    got = set(zip(out.node[out.row].tolist(), out.node[out.col].tolist()))
    assert got == expected
    assert torch.equal(graph.edge_index[:, out.edge],
                       torch.stack([out.node[out.row], out.node[out.col]]))


def test_bidirectional_adds_reverse_edges(graph):
    def sample(subgraph_type):
        return FastNeighborSampler(graph, [3, 2],
                                   subgraph_type=subgraph_type).sample(
            torch.arange(5), torch.Generator().manual_seed(0))
    directional, out = sample('directional'), sample('bidirectional')
    # the same draws: the same nodes, and each sampled edge both ways
    assert torch.equal(out.node, directional.node)
    sampled = edge_set(torch.stack([directional.row, directional.col]))
    assert len(sampled) > 10
    both = sampled | {(d, s) for s, d in sampled}
    assert len(both) > len(sampled)  # most reverses were not sampled
    assert edge_set(torch.stack([out.row, out.col])) == both
    assert out.row.numel() == len(both)  # each edge once


def star_graph(deg: int, weight=None) -> Data:
    edge_index = torch.stack([torch.arange(1, deg + 1),
                              torch.zeros(deg, dtype=torch.long)])
    return Data(edge_index=edge_index, num_nodes=deg + 1, weight=weight)


@pytest.mark.parametrize('replace', [False, True])
def test_uniform_chi_square(replace):
    deg, k, trials = 10, 3, 3000
    sampler = FastNeighborSampler(star_graph(deg), [k], replace=replace)
    gen = torch.Generator().manual_seed(1)
    counts = Counter()
    for _ in range(trials):
        out = sampler.sample(torch.tensor([0]), gen)
        counts.update(out.node[out.row].tolist())
    observed = [counts[i] for i in range(1, deg + 1)]
    assert sum(observed) == trials * k
    assert chisquare(observed).pvalue > 1e-3


@pytest.mark.parametrize('replace', [False, True])
def test_weights_respected(replace):
    weight = torch.tensor([0.0, 1.0, 1.0, 2.0, 4.0, 8.0])
    sampler = FastNeighborSampler(star_graph(6, weight), [1],
                                  replace=replace, weight_attr='weight')
    gen = torch.Generator().manual_seed(2)
    counts = Counter()
    trials = 4000
    for _ in range(trials):
        out = sampler.sample(torch.tensor([0]), gen)
        counts.update(out.node[out.row].tolist())
    assert counts[1] == 0  # zero weight is never drawn
    observed = [counts[i] for i in range(2, 7)]
    expected = (weight[1:] / weight[1:].sum() * trials).tolist()
    assert chisquare(observed, expected).pvalue > 1e-3


def test_weighted_without_replacement_takes_distinct():
    weight = torch.tensor([0.0, 1.0, 1.0, 2.0, 4.0, 8.0])
    sampler = FastNeighborSampler(star_graph(6, weight), [3],
                                  weight_attr='weight')
    for seed in range(20):
        out = sampler.sample(torch.tensor([0]),
                             torch.Generator().manual_seed(seed))
        picked = out.node[out.row].tolist()
        assert len(picked) == len(set(picked)) == 3 and 1 not in picked
    out = FastNeighborSampler(star_graph(6, weight), [10],
                              weight_attr='weight').sample(torch.tensor([0]))
    assert sorted(out.node[out.row].tolist()) == [2, 3, 4, 5, 6]


def test_deterministic_under_generator_and_global_seed(graph):
    sampler = FastNeighborSampler(graph, [4, 3])
    seeds = torch.arange(20)
    a = sampler.sample(seeds, torch.Generator().manual_seed(5))
    b = sampler.sample(seeds, torch.Generator().manual_seed(5))
    c = sampler.sample(seeds, torch.Generator().manual_seed(6))
    assert torch.equal(a.node, b.node) and torch.equal(a.row, b.row)
    assert not torch.equal(a.node, c.node)
    torch.manual_seed(3)
    d = sampler.sample(seeds)
    torch.manual_seed(3)
    e = sampler.sample(seeds)
    assert torch.equal(d.node, e.node) and torch.equal(d.edge, e.edge)


def test_a_batch_sampled_in_inference_mode_leaves_reusable_buffers(graph):
    # A prediction loop samples under torch.inference_mode; the relabeler it
    # hands back is recycled by the next batch, sampled outside it (a
    # loader's sampling thread).
    sampler = FastNeighborSampler(graph, [4, 3])
    seeds = torch.arange(20)
    with torch.inference_mode():
        a = sampler.sample(seeds, torch.Generator().manual_seed(5))
    b = sampler.sample(seeds, torch.Generator().manual_seed(5))
    assert torch.equal(a.node, b.node) and torch.equal(a.row, b.row)


def test_unsorted_and_sorted_input_agree():
    data = random_graph(seed=3)
    perm = torch.argsort(data.edge_index[1] * 1000 + data.edge_index[0])
    sorted_data = Data(edge_index=data.edge_index[:, perm],
                       num_nodes=data.num_nodes)
    gen = torch.Generator
    a = FastNeighborSampler(data, [-1, -1]).sample(torch.arange(4),
                                                   gen().manual_seed(0))
    b = FastNeighborSampler(sorted_data, [-1, -1]).sample(
        torch.arange(4), gen().manual_seed(0))
    assert set(a.node.tolist()) == set(b.node.tolist())
    assert torch.equal(data.edge_index[:, a.edge].sort(1).values,
                       sorted_data.edge_index[:, b.edge].sort(1).values)


def test_topology_input_and_errors(graph):
    topo = CSCTopology.from_edge_index(graph.edge_index, graph.num_nodes)
    out = FastNeighborSampler(topo, [2]).sample(torch.tensor([0, 1]))
    assert out.node.numel() >= 2
    seeds = FastNeighborSampler(graph, []).sample(torch.tensor([3, 1]))
    assert seeds.node.tolist() == [3, 1] and seeds.row.numel() == 0
    with pytest.raises(ValueError, match=r"num_neighbors\[1\]"):
        FastNeighborSampler(graph, [3, -2])
    with pytest.raises(TypeError, match='num_neighbors'):
        FastNeighborSampler(graph, 3)
    with pytest.raises(ValueError, match='subgraph_type'):
        FastNeighborSampler(graph, [3], subgraph_type='sideways')
    with pytest.raises(IndexError, match='seed node ids'):
        FastNeighborSampler(graph, [3]).sample(torch.tensor([graph.num_nodes]))
    with pytest.raises(ValueError, match="'time_attr='time'' is not an "
                       "attribute"):
        FastNeighborSampler(graph, [3], time_attr='time')


def test_layer_wise_draws_from_union_of_adjacency_lists():
    # Frontier {0, 1}: node 0 has 2 in-edges, node 1 has 8. One draw per
    # layer must pick each of the 10 edges with probability 1/10.
    src = torch.arange(2, 12)
    dst = torch.tensor([0] * 2 + [1] * 8)
    data = Data(edge_index=torch.stack([src, dst]), num_nodes=12)
    sampler = LayerWiseSampler(data, [1])
    gen = torch.Generator().manual_seed(0)
    counts = Counter()
    for _ in range(3000):
        out = sampler.sample(torch.tensor([0, 1]), gen)
        assert out.row.numel() == 1
        counts.update(out.edge.tolist())
    assert chisquare([counts[e] for e in range(10)]).pvalue > 1e-3


def test_layer_wise_bounds_and_validity(graph):
    sampler = LayerWiseSampler(graph, [30, 20])
    out = sampler.sample(torch.arange(10), torch.Generator().manual_seed(0))
    assert out.num_sampled_edges[0] <= 30 and out.num_sampled_edges[1] <= 20
    assert out.edge.unique().numel() == out.edge.numel()
    assert torch.equal(graph.edge_index[:, out.edge],
                       torch.stack([out.node[out.row], out.node[out.col]]))


@pytest.mark.reliability(
    fault='weighted sampling on a graph without edges',
    behaviour='batches of the seeds alone (was: `IndexError`)')
@pytest.mark.parametrize('replace', [False, True])
def test_weighted_sampling_on_a_graph_without_edges(replace):
    data = Data(x=torch.zeros(5, 1), num_nodes=5, w=torch.empty(0),
                edge_index=torch.empty(2, 0, dtype=torch.long))
    sampler = FastNeighborSampler(data, [2, -1], weight_attr='w',
                                  replace=replace)
    out = sampler.sample(torch.tensor([0, 3]),
                         torch.Generator().manual_seed(0))
    assert out.node.tolist() == [0, 3] and out.row.numel() == 0
