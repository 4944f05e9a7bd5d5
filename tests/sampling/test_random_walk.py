r"""Random walks as a hop-wise sampler: every step uniform over the walker's
in-edges (chi-square), walks that go on through nodes they visited
before, end at dead ends or with the stop probability, and draw the same
batches under a seed, through the node and link loaders."""
import pytest
import torch
from scipy.stats import chisquare
from torch_geometric.data import Data

from pyg_fastload import FastLinkNeighborLoader, FastNeighborLoader
from pyg_fastload.sampling import RandomWalkSampler

from ..helpers import random_graph, random_hetero_graph

DRAWS = 3000
#: Reject a distribution only below this p-value (chi-square at 0.999).
ALPHA = 1e-3


def _graph(edges, num_nodes):
    edge_index = torch.tensor(edges).t()
    return Data(x=torch.randn(num_nodes, 2), edge_index=edge_index,
                num_nodes=num_nodes)


def _walk(out, tree):
    r"""The nodes of walk :obj:`tree` of a disjoint batch, step by step."""
    mine = (out.batch[out.col] == tree).nonzero().view(-1)
    steps = [int(out.node[out.col[mine[0]]])] if mine.numel() else []
    for edge in mine.tolist():  # (one edge per hop, in hop order)
        assert int(out.node[out.col[edge]]) == steps[-1]
        steps.append(int(out.node[out.row[edge]]))
    return steps


def test_each_step_is_uniform_over_the_walkers_in_edges():
    r"""Two steps from node 0: the first over 0's in-edges, the second over
    the in-edges of the node reached (its frontier is where the walker
    is), every pair as likely as 1 / (deg(0) * deg(a))."""
    edges = [(a, 0) for a in (1, 2, 3)]  # 0 <- 1, 2, 3
    edges += [(b, 1) for b in (4, 5)] + [(b, 2) for b in (4, 5, 6, 7)]
    edges += [(0, 3)] + [(b, 3) for b in (5, 6)]  # 3 <- 0, 5, 6
    data = _graph(edges, 8)
    sampler = RandomWalkSampler(data, [1, 1], disjoint=True)
    expected = {}
    for a, deg_a in ((1, 2), (2, 4), (3, 3)):
        for u, t in edges:
            if t == a:
                expected[(a, u)] = DRAWS / (3 * deg_a)
    counts = dict.fromkeys(expected, 0)
    for draw in range(DRAWS):
        out = sampler.sample(torch.tensor([0]),
                             torch.Generator().manual_seed(draw))
        steps = _walk(out, 0)
        assert len(steps) == 3 and steps[0] == 0
        counts[(steps[1], steps[2])] += 1
    keys = sorted(expected)
    assert chisquare([counts[k] for k in keys],
                     [expected[k] for k in keys]).pvalue > ALPHA


def test_a_walk_goes_on_through_nodes_it_visited():
    r"""On a 2-cycle every walk alternates for all its steps (a walker on a
    node seen before still steps; neighbour sampling's frontier, the new
    nodes alone, would end it); without ``disjoint`` the walks' nodes are
    merged, each walk's steps kept."""
    data = _graph([(0, 1), (1, 0)], 2)
    out = RandomWalkSampler(data, [1] * 5, disjoint=True).sample(
        torch.tensor([0, 1]), torch.Generator().manual_seed(0))
    assert _walk(out, 0) == [0, 1, 0, 1, 0, 1]
    assert _walk(out, 1) == [1, 0, 1, 0, 1, 0]
    assert out.num_sampled_nodes is None  # no per-hop trimming of walks
    merged = RandomWalkSampler(data, [1] * 5).sample(
        torch.tensor([0, 1]), torch.Generator().manual_seed(0))
    assert merged.node.tolist() == [0, 1] and merged.edge.numel() == 10


def test_a_walk_ends_at_a_dead_end_or_with_the_stop_probability():
    path = _graph([(1, 0), (2, 1)], 3)  # 2 has no in-edges
    out = RandomWalkSampler(path, [1] * 5, disjoint=True).sample(
        torch.tensor([0]), torch.Generator().manual_seed(0))
    assert _walk(out, 0) == [0, 1, 2]
    ring = _graph([((i + 1) % 10, i) for i in range(10)], 10)
    stop, length = 0.3, 4
    sampler = RandomWalkSampler(ring, [1] * length, disjoint=True,
                                stop_prob=stop)
    seeds = torch.arange(10)
    steps = torch.zeros(length + 1)
    for draw in range(DRAWS // 10):
        out = sampler.sample(seeds, torch.Generator().manual_seed(draw))
        taken = torch.bincount(out.batch[out.col], minlength=10)
        steps += torch.bincount(taken, minlength=length + 1)
    go = 1 - stop
    expected = [go ** k * stop for k in range(length)] + [go ** length]
    assert chisquare(steps.numpy(), steps.sum().item() *
                     torch.tensor(expected).numpy()).pvalue > ALPHA


def test_walks_are_reproducible_and_load_like_any_batch():
    data = random_graph(num_nodes=200, num_edges=2000, seed=1)

    def batches():
        loader = FastNeighborLoader(
            data, [1, 1, 1], batch_size=32, disjoint=True, shuffle=True,
            generator=torch.Generator().manual_seed(3),
            neighbor_sampler='random_walk')
        return list(loader)
    first, again = batches(), batches()
    assert len(first) == len(again) == 7
    for one, two in zip(first, again):
        assert torch.equal(one.n_id, two.n_id)
        assert torch.equal(one.edge_index, two.edge_index)
    batch = first[0]
    assert batch.x.size(0) == batch.n_id.numel()
    assert torch.equal(batch.edge_attr, data.edge_attr[batch.e_id])
    walked = torch.bincount(batch.batch[batch.edge_index[1]], minlength=32)
    assert bool((walked <= 3).all())  # at most 3 steps, one tree per walk
    src, dst = batch.n_id[batch.edge_index]
    pairs = set(zip(data.edge_index[0].tolist(), data.edge_index[1].tolist()))
    assert set(zip(src.tolist(), dst.tolist())) <= pairs


def test_walks_step_back_in_time_and_from_label_edges():
    data = random_graph(num_nodes=300, num_edges=6000, seed=4)
    data.time = torch.randint(0, 100, (300, ),
                              generator=torch.Generator().manual_seed(1))
    loader = FastNeighborLoader(data, [1, 1, 1], batch_size=30,
                                input_nodes=torch.arange(60),
                                time_attr='time',
                                neighbor_sampler='random_walk')
    for batch in loader:
        seed_time = batch.time[:batch.batch_size][batch.batch]
        assert bool((batch.time <= seed_time).all())
    links = FastLinkNeighborLoader(
        data, [1, 1], batch_size=16, edge_label_index=data.edge_index[:, :64],
        neighbor_sampler='random_walk')
    batch = next(iter(links))
    ends = torch.unique(batch.edge_label_index).numel()
    assert batch.num_edges <= 2 * ends  # one step per walker per hop


@pytest.mark.reliability(
    fault='random walks given fan-outs other than 1, a stop probability '
          "outside [0, 1), `temporal_strategy='last'` or a heterogeneous "
          'graph',
    behaviour='`ValueError` naming the argument, the value and the fix')
def test_bad_random_walk_arguments_are_named():
    data = random_graph(num_nodes=50, num_edges=300, seed=0)
    with pytest.raises(ValueError, match=r"'num_neighbors' = \[15, 10\]: a "
                       r"random walk takes one step per hop: give \[1\] \* "
                       r"walk_length"):
        FastNeighborLoader(data, [15, 10], neighbor_sampler='random_walk')
    for bad in (1.0, -0.1, True):
        with pytest.raises(ValueError, match="'stop_prob' must be a "
                           "probability in"):
            RandomWalkSampler(data, [1], stop_prob=bad)
    with pytest.raises(ValueError, match="temporal_strategy='last'"):
        RandomWalkSampler(data, [1], temporal_strategy='last',
                          time_attr='x')
    with pytest.raises(ValueError, match="'data' is a heterogeneous graph: "
                       "a random walk there follows a metapath"):
        FastNeighborLoader(random_hetero_graph(), [1], input_nodes='paper',
                           neighbor_sampler='random_walk')
