r"""Layer-neighbour sampling (LABOR) against the paper's definition: each
destination expects its fan-out of in-neighbours, each as likely as
neighbour sampling makes it, with one variate per source vertex shared by
the hop's destinations (fewer distinct vertices); LABOR-*'s weighted
aggregate is unbiased."""
import pytest
import torch
from scipy.stats import chi2, chisquare
from torch_geometric.data import Data

from pyg_fastload import FastNeighborLoader, FastNeighborSampler
from pyg_fastload.sampling import (HeteroNeighborSampler, LaborSampler,
                                   SamplerChoice)
from pyg_fastload.sampling import labor
from pyg_fastload.sampling.labor import labor_key, uniform_variates

from ..helpers import random_graph, random_hetero_graph

DRAWS = 3000


def _star_graph():
    r"""Destinations 0..3 with in-degrees 3, 8, 20 and 40 from sources
    10.. (shared between destinations), as one Data."""
    gen = torch.Generator().manual_seed(5)
    src, dst = [], []
    for node, degree in enumerate((3, 8, 20, 40)):
        chosen = torch.randperm(60, generator=gen)[:degree] + 10
        src.append(chosen)
        dst.append(torch.full((degree, ), node))
    edge_index = torch.stack([torch.cat(src), torch.cat(dst)])
    return Data(x=torch.randn(70, 4, generator=gen), edge_index=edge_index,
                num_nodes=70)


def test_variates_are_uniform_and_a_function_of_key_and_id():
    ids = torch.arange(200_000)
    r = uniform_variates(ids, labor_key(11, 0))
    assert r.dtype == torch.float64 and bool((r >= 0).all() & (r < 1).all())
    counts = torch.histc(r.float(), bins=50, min=0, max=1)
    assert chisquare(counts.numpy()).pvalue > 1e-3
    again = uniform_variates(ids[[5, 17, 5]], labor_key(11, 0))
    assert torch.equal(again, r[[5, 17, 5]])
    other = uniform_variates(ids[:1000], labor_key(11, 1))
    assert not torch.equal(other, r[:1000])  # another hop, other variates
    # neighbouring ids are not correlated
    assert abs(float(torch.corrcoef(torch.stack([r[:-1], r[1:]]))[0, 1])) \
        < 0.01


def _candidates(sampler, seeds):
    topo = sampler.topology
    start = topo.indptr[seeds]
    return sampler.inclusion(start, topo.indptr[seeds + 1] - start,
                             sampler.num_neighbors[0], topo.indices)


def _draws(edges, count):
    r"""``[count, candidates]``: which candidates each of :obj:`count`
    batches (keys) takes."""
    return torch.stack([uniform_variates(edges.source, labor_key(i, 0)) <
                        edges.prob for i in range(count)])


@pytest.mark.parametrize('fanout', [5, 12])
def test_each_destination_expects_its_fanout_each_edge_as_likely(fanout):
    data = _star_graph()
    sampler = LaborSampler(data, [fanout])
    seeds = torch.arange(4)
    degree = torch.bincount(data.edge_index[1], minlength=4)
    edges = _candidates(sampler, seeds)
    # LABOR-0: every in-edge of t with probability min(1, k / d_t)
    torch.testing.assert_close(edges.prob, (fanout / degree.double())
                               .clamp(max=1)[edges.segment])
    taken = _draws(edges, DRAWS)
    counts = torch.zeros(DRAWS, 4).index_add_(1, edges.segment,
                                              taken.float())
    expected = degree.clamp(max=fanout).float()
    # count of destination t ~ Binomial(d_t, k / d_t): mean k, variance
    # k (1 - k / d_t); a chi-square of the mean counts over destinations
    variance = expected * (1 - expected / degree)
    sampled = variance > 0
    z = (counts.mean(0) - expected)[sampled] / (
        variance[sampled] / DRAWS).sqrt()
    assert float((z ** 2).sum()) < chi2.ppf(0.999, int(sampled.sum()))
    assert torch.equal(counts[:, ~sampled], expected[~sampled].expand(
        DRAWS, -1))  # every in-edge where d_t <= k
    per_edge = taken.sum(0)
    for node in range(4):  # each in-edge of t as likely as the others
        if degree[node] > fanout:
            at = edges.segment == node
            assert chisquare(per_edge[at].numpy()).pvalue > 1e-3
    # the sampler takes what the variates of its batch's key decide
    out = sampler.sample(seeds, torch.Generator().manual_seed(7))
    want = uniform_variates(edges.source, labor_key(7, 0)) < edges.prob
    assert sorted(out.edge.tolist()) == sorted(edges.pos[want].tolist())


def test_weighted_edges_are_taken_in_proportion_to_their_weight():
    data = _star_graph()
    gen = torch.Generator().manual_seed(2)
    data.w = torch.rand(data.edge_index.size(1), generator=gen)
    data.w[::7] = 0  # never taken
    sampler = LaborSampler(data, [5], weight_attr='w')
    edges = _candidates(sampler, torch.arange(4))
    weight = sampler.topology.edge_weight[edges.pos].double()
    mass = torch.zeros(4, dtype=torch.float64).index_add_(
        0, edges.segment, weight)
    degree = torch.bincount(edges.segment, minlength=4)
    whole = (degree <= 5)[edges.segment]
    want = torch.where(whole, (weight > 0).double(),
                       (5 * weight / mass[edges.segment]).clamp(max=1))
    torch.testing.assert_close(edges.prob, want)
    assert not bool(_draws(edges, 200)[:, weight == 0].any())
    # LABOR-*'s weights on a weighted graph: the weighted mean, exactly
    star = _candidates(LaborSampler(data, [5], weight_attr='w',
                                    importance_sampling=2), torch.arange(4))
    value = torch.randn(70, dtype=torch.float64, generator=gen)
    exact = torch.zeros(4, dtype=torch.float64).index_add_(
        0, star.segment, star.prob * star.weight * value[star.source])
    torch.testing.assert_close(exact, torch.zeros(
        4, dtype=torch.float64).index_add_(0, edges.segment, weight *
                                           value[edges.source]) / mass)


def test_labor_samples_no_more_vertices_than_neighbour_sampling():
    data = random_graph(num_nodes=2000, num_edges=60_000, seed=3)
    fanouts = [10, 5, 3]
    nodes = {'neighbor': [], 'labor': [], 'layer': []}
    samplers = {'neighbor': FastNeighborSampler(data, fanouts),
                'labor': LaborSampler(data, fanouts),
                'layer': LaborSampler(data, fanouts, layer_dependency=True)}
    for draw in range(20):
        seeds = torch.randperm(2000, generator=torch.Generator()
                               .manual_seed(draw))[:128]
        for name, sampler in samplers.items():
            out = sampler.sample(seeds, torch.Generator().manual_seed(draw))
            nodes[name].append(out.node.numel())
    mean = {k: sum(v) / len(v) for k, v in nodes.items()}
    assert mean['labor'] < 0.8 * mean['neighbor'], mean
    assert mean['layer'] <= mean['labor'], mean


def test_layer_dependency_reuses_the_variates_of_every_hop(monkeypatch):
    keys = []
    real = labor.uniform_variates
    monkeypatch.setattr(labor, 'uniform_variates',
                        lambda ids, key: keys.append(key) or real(ids, key))
    data = random_graph(num_nodes=300, num_edges=3000, seed=1)
    LaborSampler(data, [5, 5, 5], layer_dependency=True).sample(
        torch.arange(20), torch.Generator().manual_seed(4))
    assert len(keys) == 3 and len(set(keys)) == 1
    keys.clear()
    LaborSampler(data, [5, 5, 5]).sample(
        torch.arange(20), torch.Generator().manual_seed(4))
    assert len(keys) == 3 and len(set(keys)) == 3


@pytest.mark.parametrize('iterations', [1, -1])
def test_importance_sampling_weights_give_an_unbiased_mean(iterations):
    data = _star_graph()
    value = torch.randn(70, dtype=torch.float64,
                        generator=torch.Generator().manual_seed(9))
    seeds = torch.arange(4)
    edges = _candidates(LaborSampler(data, [4],
                                     importance_sampling=iterations), seeds)
    zero = _candidates(LaborSampler(data, [4]), seeds)
    truth = torch.stack([value[data.edge_index[0, data.edge_index[1] == t]]
                         .mean() for t in range(4)])
    # E[sum of the taken edges' w * x] = sum of prob * w * x: the mean
    exact = torch.zeros(4, dtype=torch.float64).index_add_(
        0, edges.segment, edges.prob * edges.weight * value[edges.source])
    torch.testing.assert_close(exact, truth)
    taken = _draws(edges, DRAWS).double()
    estimates = torch.zeros(DRAWS, 4, dtype=torch.float64).index_add_(
        1, edges.segment, taken * edges.weight * value[edges.source])
    error = (estimates.mean(0) - truth) / (estimates.std(0) /
                                           DRAWS ** 0.5).clamp(min=1e-9)
    assert float((error ** 2).sum()) < chi2.ppf(0.999, 4), error
    # the iterations lower the expected number of distinct vertices (a
    # vertex is taken when its one variate is below its largest probability)
    def expected_vertices(candidates):
        vertex, inverse = candidates.source.unique(return_inverse=True)
        return float(torch.zeros(vertex.numel(), dtype=torch.float64)
                     .scatter_reduce_(0, inverse, candidates.prob, 'amax')
                     .sum())
    assert expected_vertices(edges) < expected_vertices(zero)
    # and a batch carries the weights of the edges it took
    out = LaborSampler(data, [4], importance_sampling=iterations).sample(
        seeds, torch.Generator().manual_seed(3))
    want = uniform_variates(edges.source, labor_key(3, 0)) < edges.prob
    assert sorted(out.edge.tolist()) == sorted(edges.pos[want].tolist())
    order = torch.argsort(edges.pos[want])
    torch.testing.assert_close(
        out.edge_weight[torch.argsort(out.edge)],
        edges.weight[want][order].float())


def test_a_hetero_graph_gets_the_typed_engine_with_weights_per_relation():
    data = random_hetero_graph()
    sampler = LaborSampler(data, [4, 3], importance_sampling=1)
    assert isinstance(sampler, LaborSampler) and \
        isinstance(sampler, HeteroNeighborSampler)
    assert isinstance(FastNeighborSampler(data, [4, 3]),
                      HeteroNeighborSampler)  # one name for both kinds
    loader = FastNeighborLoader(data, [4, 3], input_nodes=('paper', None),
                                batch_size=32, neighbor_sampler=sampler)
    batch = next(iter(loader))
    for edge_type in batch.edge_types:
        store = batch[edge_type]
        assert store.edge_weight.numel() == store.edge_index.size(1)
        assert bool((store.edge_weight > 0).all())


def test_the_loader_builds_labor_by_name_and_weights_reach_the_batch():
    data = random_graph(num_nodes=400, num_edges=8000, seed=2)
    kwargs = dict(num_neighbors=[6, 4], batch_size=50,
                  input_nodes=torch.arange(100), pipeline=False)
    batch = next(iter(FastNeighborLoader(data, neighbor_sampler='labor',
                                         **kwargs)))
    assert 'edge_weight' not in batch  # LABOR-0 needs no weights
    weighted = FastNeighborLoader(data, neighbor_sampler={
        'class_path': 'labor', 'init_args': {'importance_sampling': 2}},
        **kwargs)
    assert isinstance(weighted.node_sampler, LaborSampler)
    assert weighted.node_sampler.importance_sampling == 2
    batch = next(iter(weighted))
    assert batch.edge_weight.numel() == batch.edge_index.size(1)
    # the same batches pipelined (the weights follow their edges)
    gen = torch.Generator().manual_seed(0)
    plain = next(iter(FastNeighborLoader(
        data, neighbor_sampler='labor', generator=gen, **kwargs)))
    gen = torch.Generator().manual_seed(0)
    piped = next(iter(FastNeighborLoader(
        data, neighbor_sampler='labor', generator=gen,
        **{**kwargs, 'pipeline': True})))
    assert torch.equal(plain.n_id, piped.n_id)
    assert torch.equal(plain.edge_index, piped.edge_index)


def test_labor_in_time_takes_no_later_neighbour():
    data = random_graph(num_nodes=300, num_edges=6000, seed=4)
    data.time = torch.randint(0, 100, (300, ),
                              generator=torch.Generator().manual_seed(1))
    loader = FastNeighborLoader(data, [5, 5], batch_size=30,
                                input_nodes=torch.arange(60),
                                time_attr='time', neighbor_sampler='labor')
    for batch in loader:
        seed_time = batch.time[:batch.batch_size][batch.batch]
        assert bool((batch.time <= seed_time).all())


@pytest.mark.reliability(
    fault="LABOR given `replace=True`, `temporal_strategy='last'`, "
          "`importance_sampling` with an induced subgraph or of -2, or an "
          "unknown sampler name",
    behaviour='`ValueError` naming the argument, the value and the fix')
def test_bad_labor_arguments_are_named():
    data = random_graph(num_nodes=50, num_edges=300, seed=0)
    with pytest.raises(ValueError, match="'replace=True': LABOR"):
        LaborSampler(data, [3], replace=True)
    with pytest.raises(ValueError, match="temporal_strategy='last'"):
        LaborSampler(data, [3], temporal_strategy='last', time_attr='x')
    with pytest.raises(ValueError, match="'importance_sampling=1' weighs .*"
                       "directional"):
        LaborSampler(data, [3], importance_sampling=1,
                     subgraph_type='induced')
    with pytest.raises(ValueError, match="'importance_sampling' must be an "
                       "int >= -1"):
        LaborSampler(data, [3], importance_sampling=-2)
    with pytest.raises(ValueError, match="'neighbor_sampler' = 'labour' is "
                       "not a sampler: give one of neighbor, labor"):
        FastNeighborLoader(data, [3], neighbor_sampler='labour')
    with pytest.raises(ValueError, match="'sampler' = 'os.system' is not a "
                       "sampler class"):
        SamplerChoice.of('os.system', 'sampler')
