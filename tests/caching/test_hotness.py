import argparse

import numpy as np
import pytest
import torch

from pyg_fastload import CSCTopology
from pyg_fastload.bench import cache as bench_cache
from pyg_fastload.caching import walks
from pyg_fastload.caching.hotness import (
    access_counts,
    hit_ratio,
    hit_ratio_curve,
    hot_order,
    hotness_scores,
    out_degree_scores,
    presample_scores,
    random_scores,
    reverse_pagerank_scores,
    expected_access_scores,
)
from pyg_fastload.config import POLICIES

from ..helpers import random_graph


def skewed_topology(num_nodes: int = 400, num_edges: int = 4000,
                    seed: int = 0) -> CSCTopology:
    r"""Sources drawn from a power law, destinations uniformly: a few nodes
    sit in many in-neighbour lists."""
    gen = torch.Generator().manual_seed(seed)
    weight = torch.arange(1, num_nodes + 1, dtype=torch.float64).pow(-1.1)
    weight = weight[torch.randperm(num_nodes, generator=gen)]
    src = torch.multinomial(weight, num_edges, replacement=True,
                            generator=gen)
    dst = torch.randint(0, num_nodes, (num_edges, ), generator=gen)
    keep = src != dst
    edge_index = torch.stack([src[keep], dst[keep]])
    return CSCTopology.from_edge_index(edge_index, num_nodes)


def dense_reverse_pagerank(edge_index, n, alpha=0.85, iters=2000):
    src, dst = edge_index
    indeg = np.bincount(dst, minlength=n)
    step = np.zeros((n, n))  # step[v, u]: probability of v -> u
    for u, v in zip(src, dst):
        step[v, u] += 1.0 / indeg[v]
    r = np.full(n, 1.0 / n)
    for _ in range(iters):
        dangling = r[indeg == 0].sum()
        r = alpha * (step.T @ r + dangling / n) + (1 - alpha) / n
    return r


def test_out_degree_is_bincount_of_sources():
    data = random_graph()
    topo = CSCTopology.from_edge_index(data.edge_index, data.num_nodes)
    expected = torch.bincount(data.edge_index[0], minlength=data.num_nodes)
    assert torch.equal(out_degree_scores(topo), expected)
    assert torch.equal(out_degree_scores(data), expected)  # Data works too
    assert torch.equal(hotness_scores('out_degree', topo), expected)


@pytest.mark.parametrize('out_of_core', [False, True])
def test_reverse_pagerank_matches_dense_power_iteration(out_of_core,
                                                        monkeypatch, request):
    if out_of_core:  # its chunks are split over torch's threads
        request.getfixturevalue('two_threads')
    # Node 5 has no in-neighbours (dangling), node 0 feeds many nodes.
    edges = [(0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (2, 0), (3, 0),
             (4, 3), (5, 0), (5, 4), (1, 0)]
    edge_index = torch.tensor(edges).t()
    topo = CSCTopology.from_edge_index(edge_index, 6)
    # chunks of 3 edges: chunk bounds fall inside and between in-lists
    monkeypatch.setattr(walks, 'CHUNK_EDGES', 3)
    ours = reverse_pagerank_scores(topo, max_iters=300, tol=0.0,
                                   out_of_core=out_of_core)
    assert ours.dtype == torch.float64
    expected = dense_reverse_pagerank(edge_index.numpy(), 6)
    np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-9,
                               atol=1e-12)
    assert abs(float(ours.sum()) - 1.0) < 1e-12
    assert int(hot_order(ours)[0]) == 0


def test_out_of_core_is_chosen_when_the_transpose_does_not_fit(monkeypatch,
                                                              two_threads):
    data = random_graph()
    topo = CSCTopology.from_edge_index(data.edge_index, data.num_nodes)
    monkeypatch.setattr(walks, 'CHUNK_EDGES', 300)  # 7 chunks, 2 threads
    train = torch.arange(0, 200, 7)
    results, segments = [], walks.Segments.of(topo)
    for share in (2, 1):  # memory for twice the transpose, then for one
        monkeypatch.setattr(walks, 'available_memory',
                            lambda: walks.transpose_bytes(segments) * share)
        assert walks.ReverseStep(segments).out_of_core == (share == 1)
        results.append((reverse_pagerank_scores(topo),
                        expected_access_scores(topo, train, [3, 2])))
    for in_memory, chunked in zip(*results):
        assert torch.allclose(chunked, in_memory, rtol=1e-9, atol=1e-15)


def test_expected_accesses_match_hand_values_and_the_sampler():
    # 1..4 -> 0 (in-degree 4), 5 -> 1: no node is reachable twice
    edge_index = torch.tensor([[1, 2, 3, 4, 5], [0, 0, 0, 0, 1]])
    topo = CSCTopology.from_edge_index(edge_index, 7)
    scores = expected_access_scores(topo, torch.tensor([0]), [2, 3])
    assert scores.tolist() == [1.0, .5, .5, .5, .5, .5, 0.0]
    everything = expected_access_scores(topo, torch.tensor([0]), [-1, -1])
    assert everything.tolist() == [1.0, 1, 1, 1, 1, 1, 0]
    # 400 epochs: the standard error of a 1/2 is 0.025 (a wrong fan-out
    # would be 0.25 off)
    sampled = presample_scores(topo, torch.tensor([0]), [2, 3], batch_size=1,
                               epochs=400, progress=False) / 400
    assert torch.allclose(sampled.double(), scores, atol=0.1)
    with pytest.raises(ValueError, match=r"'num_neighbors\[1\]' is -2"):
        expected_access_scores(topo, torch.tensor([0]), [2, -2])
    assert torch.equal(hotness_scores('expected_access', topo,
                                      train_nodes=torch.tensor([0]),
                                      num_neighbors=[2, 3]), scores)


def test_reverse_pagerank_sums_to_one_and_ranks_the_hub_first():
    n = 300
    gen = torch.Generator().manual_seed(1)
    src = torch.randint(0, n, (1500, ), generator=gen)
    dst = torch.randint(0, n, (1500, ), generator=gen)
    hub = 137  # an in-neighbour of every other node
    others = torch.arange(n)[torch.arange(n) != hub]
    edge_index = torch.cat([torch.stack([src, dst]),
                            torch.stack([torch.full_like(others, hub),
                                         others])], dim=1)
    topo = CSCTopology.from_edge_index(edge_index, n)
    score = reverse_pagerank_scores(topo)
    assert abs(float(score.sum()) - 1.0) < 1e-9
    assert bool((score > 0).all())
    assert int(hot_order(score)[0]) == hub
    # Converged: more iterations barely move the scores.
    more = reverse_pagerank_scores(topo, max_iters=500, tol=0.0)
    assert float((score - more).abs().sum()) < 1e-5


def test_reverse_pagerank_edge_cases():
    empty = CSCTopology.from_edge_index(torch.empty(2, 0, dtype=torch.long),
                                        4)
    assert torch.allclose(reverse_pagerank_scores(empty),
                          torch.full((4, ), 0.25, dtype=torch.float64))
    with pytest.raises(ValueError, match="'alpha' = 1.5"):
        reverse_pagerank_scores(empty, alpha=1.5)
    with pytest.raises(ValueError, match="'max_iters' = 0"):
        reverse_pagerank_scores(empty, max_iters=0)
    with pytest.raises(ValueError, match="'tol'"):
        reverse_pagerank_scores(empty, tol=-1.0)
    with pytest.raises(TypeError, match="'topology' must be a CSCTopology"):
        reverse_pagerank_scores('graph')


def test_presample_is_deterministic_and_follows_out_degree():
    topo = skewed_topology()
    train = torch.arange(0, topo.num_nodes, 2)
    kwargs = dict(num_neighbors=[5, 3], batch_size=16, progress=False)
    a = presample_scores(topo, train, seed=3, **kwargs)
    b = presample_scores(topo, train, seed=3, **kwargs)
    c = presample_scores(topo, train, seed=4, **kwargs)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    num_batches = -(-train.numel() // 16)
    assert int(a.max()) <= num_batches
    assert bool((a[train] >= 1).all())  # every seed is fetched
    # A mask gives the same as ids; more epochs count more batches.
    mask = torch.zeros(topo.num_nodes, dtype=torch.bool)
    mask[train] = True
    assert torch.equal(presample_scores(topo, mask, seed=3, **kwargs), a)
    two = presample_scores(topo, train, seed=3, epochs=2, **kwargs)
    assert int(two.sum()) > int(a.sum())
    # The hottest presampled nodes are high out-degree nodes.
    deg = out_degree_scores(topo).double()
    top = hot_order(a)[:topo.num_nodes // 10]
    assert float(deg[top].mean()) > 2.5 * float(deg.mean())
    rank_a = torch.empty(topo.num_nodes).scatter_(
        0, hot_order(a), torch.arange(topo.num_nodes, dtype=torch.float))
    rank_d = torch.empty(topo.num_nodes).scatter_(
        0, hot_order(deg), torch.arange(topo.num_nodes, dtype=torch.float))
    spearman = float(torch.corrcoef(torch.stack([rank_a, rank_d]))[0, 1])
    assert spearman > 0.6


def test_hot_order_breaks_ties_by_node_id():
    scores = torch.tensor([1.0, 3.0, 3.0, 0.0, 3.0, 1.0])
    assert hot_order(scores).tolist() == [1, 2, 4, 0, 5, 3]
    ints = torch.tensor([2, 2, 2, 2], dtype=torch.uint8)
    assert hot_order(ints).tolist() == [0, 1, 2, 3]
    assert hot_order(random_scores(50, seed=1)).sort().values.tolist() == \
        list(range(50))
    with pytest.raises(ValueError, match='NaN'):
        hot_order(torch.tensor([1.0, float('nan')]))
    with pytest.raises(ValueError, match='1-D'):
        hot_order(torch.zeros(2, 2))


def test_random_scores_are_seeded():
    assert torch.equal(random_scores(10, seed=5), random_scores(10, seed=5))
    assert not torch.equal(random_scores(10, seed=5), random_scores(10))
    assert torch.equal(hotness_scores('random', skewed_topology(), seed=2),
                       random_scores(400, seed=2))


def test_hit_ratio_hand_example():
    counts = torch.tensor([4, 0, 3, 1, 2])  # 10 accesses
    assert hit_ratio(counts, torch.tensor([0, 2])) == pytest.approx(0.7)
    mask = torch.tensor([False, True, False, True, True])
    assert hit_ratio(counts, mask) == pytest.approx(0.3)
    assert hit_ratio(counts, torch.tensor([0, 0, 0])) == pytest.approx(0.4)
    assert hit_ratio(counts, torch.tensor([], dtype=torch.long)) == 0.0
    assert hit_ratio(torch.zeros(3, dtype=torch.long),
                     torch.tensor([1])) == 0.0
    order = hot_order(counts)
    assert hit_ratio_curve(counts, order, [0.0, 0.2, 0.4, 1.0]) == \
        pytest.approx([0.0, 0.4, 0.7, 1.0])
    with pytest.raises(ValueError, match="'cached' is a boolean mask of 2"):
        hit_ratio(counts, torch.tensor([True, False]))
    with pytest.raises(ValueError, match="'cached' holds node id 9"):
        hit_ratio(counts, torch.tensor([9]))
    with pytest.raises(ValueError, match="'counts' holds negative"):
        hit_ratio(torch.tensor([1, -1]), torch.tensor([0]))
    with pytest.raises(ValueError, match="'order' repeats"):
        hit_ratio_curve(counts, torch.tensor([0, 0]), [0.5])
    with pytest.raises(ValueError, match="'fractions' holds 20"):
        hit_ratio_curve(counts, order, [20])


def test_oracle_beats_every_policy_at_every_fraction():
    topo = skewed_topology(seed=1)
    train = torch.arange(topo.num_nodes)[::3]
    gen = torch.Generator().manual_seed(0)
    batches = train[torch.randperm(train.numel(), generator=gen)].split(8)
    counts = access_counts(topo, batches, [4, 2], seed=0)
    assert int(counts.max()) <= len(batches)
    assert bool((counts[train] >= 1).all())
    assert torch.equal(counts, access_counts(topo, batches, [4, 2], seed=0))
    fractions = [i / 20 for i in range(21)]
    oracle = hit_ratio_curve(counts, hot_order(counts), fractions)
    for policy in POLICIES:
        scores = hotness_scores(policy, topo, train_nodes=train,
                                num_neighbors=[4, 2], batch_size=8, seed=1,
                                progress=False)
        order = hot_order(scores)
        curve = hit_ratio_curve(counts, order, fractions)
        for f, ours, best in zip(fractions, curve, oracle):
            assert ours <= best + 1e-12, (policy, f)
        k = int(round(0.3 * topo.num_nodes))
        assert curve[6] == pytest.approx(hit_ratio(counts, order[:k]))
    assert oracle[0] == 0.0 and oracle[-1] == pytest.approx(1.0)


def test_hotness_scores_errors():
    topo = skewed_topology()
    with pytest.raises(ValueError, match="'out_degree', 'reverse_pagerank', "
                       "'expected_access', 'presample', 'random'"):
        hotness_scores('lru', topo)
    with pytest.raises(ValueError, match="'train_nodes' and 'num_neighbors'"):
        hotness_scores('presample', topo)
    with pytest.raises(ValueError, match="needs 'num_neighbors'"):
        hotness_scores('presample', topo, train_nodes=torch.arange(4))
    with pytest.raises(ValueError, match="'expected_access' follows"):
        hotness_scores('expected_access', topo)
    with pytest.raises(ValueError, match="'train_nodes' holds node id 400"):
        presample_scores(topo, torch.tensor([400]), [2], progress=False)
    with pytest.raises(ValueError, match="'train_nodes' is a boolean mask"):
        presample_scores(topo, torch.ones(3, dtype=torch.bool), [2],
                         progress=False)
    with pytest.raises(ValueError, match="'batch_size' = 0"):
        presample_scores(topo, torch.arange(4), [2], batch_size=0,
                         progress=False)
    with pytest.raises(ValueError, match="'num_neighbors' is empty"):
        access_counts(topo, [torch.arange(4)], [])


def test_bench_cache_hit_ratio_section(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    bench_cache.add_arguments(parser)
    args = parser.parse_args([
        '--preset', 'tiny', '--fanout', '4', '2', '--batch-size', '32',
        '--fractions', '0', '10', '20', '50', '100', '--cache-dir',
        str(tmp_path),
        '--skip-disk'
    ])
    result = bench_cache.run(args)['hit_ratio']
    out = capsys.readouterr().out
    assert 'oracle' in out and 'x random' in out and 'top-20%' in out
    at_20 = result['at_20']
    # a random cache of 10%, 50% of the rows serves about that share
    for fraction, ratio in zip(result['fractions'],
                               result['hit_ratio']['random']):
        assert ratio == pytest.approx(fraction / 100, abs=0.02)
    # degree-aware policies beat random clearly on this skewed graph
    for policy in ('out_degree', 'reverse_pagerank', 'presample'):
        assert at_20[policy] >= 2 * at_20['random']
    # seed 0: out-degree reaches 0.93x the oracle, short of the 0.95x target
    assert result['vs_oracle']['out_degree'] == pytest.approx(
        at_20['out_degree'] / at_20['oracle'])
    assert result['passed'] == {'out_degree': False, 'presample': False}
    assert 'FALL SHORT (>= 0.95x oracle' in out
    assert result['fractions'] == [0.0, 10.0, 20.0, 50.0, 100.0]
    assert set(result['hit_ratio']) == set(POLICIES) | {'oracle'}
    for name, curve in result['hit_ratio'].items():
        assert curve[0] == 0.0 and curve[-1] == pytest.approx(1.0)
        assert all(a <= b + 1e-12
                   for a, b in zip(curve, result['hit_ratio']['oracle']))
    assert set(result['passed']) == {'out_degree', 'presample'}
    with pytest.raises(SystemExit):
        parser.parse_args(['--fractions', '120'])
