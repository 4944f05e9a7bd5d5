r"""GraphSAINT's subgraph samplers against PyG's: the same normalisation
(``node_norm``, ``edge_norm``) and induced subgraphs as PyG's own
GraphSAINT samplers on the same drawn nodes, nodes drawn with PyG's
probabilities (chi-square), a normalised loss that is an unbiased estimate
of the mean over the loader's seeds, and a PyG GraphSAINT training loop
running on the batches."""
import pytest
import torch
import torch.nn.functional as F
from scipy.stats import chisquare
from torch_geometric.data import Data
from torch_geometric.nn import GraphConv

from pyg_fastload import FastLinkNeighborLoader, FastNeighborLoader
from pyg_fastload.modes.contract import edge_weight, seed_loss
from pyg_fastload.sampling import SamplerChoice, saint
from pyg_fastload.sampling.saint import (SaintEdgeSampler, SaintNodeSampler,
                                         SaintRandomWalkSampler)

from ..helpers import random_graph, random_hetero_graph, requires_torch_sparse

DRAWS = 2000
ALPHA = 1e-3  # chi-square at 0.999
KINDS = {'saint_node': SaintNodeSampler, 'saint_edge': SaintEdgeSampler,
         'saint_rw': SaintRandomWalkSampler}


def _loader(data, name, batch_size=20, **options):
    options.setdefault('progress', False)
    return FastNeighborLoader(
        data, [1, 1], batch_size=batch_size, shuffle=True,
        generator=torch.Generator().manual_seed(0), pipeline=False,
        neighbor_sampler={'class_path': name, 'init_args': options},
        input_nodes=options.pop('input_nodes', None))


def _recording(kind):
    r"""``kind`` whose drawn node sets are recorded (as PyG keeps them:
    unique)."""
    class Recording(kind):
        drawn = []

        def subgraph_nodes(self, seeds, generator):
            nodes = super().subgraph_nodes(seeds, generator)
            self.drawn.append(nodes.unique())
            return nodes
    return Recording


@requires_torch_sparse
@pytest.mark.parametrize('name', list(KINDS))
def test_normalisation_and_subgraphs_are_pygs_on_the_same_nodes(name):
    from torch_geometric.loader import GraphSAINTSampler
    data = random_graph(num_nodes=150, num_edges=1500, seed=2)
    ours = _recording(KINDS[name])(data, [1, 1], sample_coverage=20,
                                   progress=False)
    inputs = FastNeighborLoader(data, [1], batch_size=25).input_data
    ours.prepare(inputs, 25)
    drawn = list(ours.drawn)

    class Replay(GraphSAINTSampler):  # PyG's, drawing our node sets
        def _sample_nodes(self, batch_size):
            return drawn.pop(0)
    pyg = Replay(data, batch_size=25, num_steps=1, sample_coverage=20,
                 log=False)
    assert not drawn  # one PyG sample per subgraph of ours, all used
    torch.testing.assert_close(ours.node_norm, pyg.node_norm)
    by_id = torch.empty_like(pyg.edge_norm)
    by_id[ours.topology.edge_id if ours.topology.edge_id is not None
          else torch.arange(by_id.numel())] = ours.edge_norm
    torch.testing.assert_close(by_id, pyg.edge_norm)
    # a batch is the subgraph PyG induces on its nodes, with PyG's norms
    batch = next(iter(_loader(data, name, batch_size=25,
                              sample_coverage=20)))
    adj, _ = pyg.adj.saint_subgraph(batch.n_id.sort().values)
    assert sorted(batch.e_id.tolist()) == sorted(adj.coo()[2].tolist())
    torch.testing.assert_close(batch.edge_norm, pyg.edge_norm[batch.e_id])
    torch.testing.assert_close(batch.x, data.x[batch.n_id])
    torch.testing.assert_close(batch.edge_attr, data.edge_attr[batch.e_id])


def test_the_node_sampler_draws_nodes_by_out_degree():
    data = random_graph(num_nodes=40, num_edges=300, seed=3)
    sampler = SaintNodeSampler(data, [1], sample_coverage=0)
    seeds = torch.arange(10)
    counts = torch.zeros(40)
    for draw in range(DRAWS // 10):
        nodes = sampler.subgraph_nodes(seeds,
                                       torch.Generator().manual_seed(draw))
        counts += torch.bincount(nodes, minlength=40)
    degree = torch.bincount(data.edge_index[0], minlength=40).double()
    seen = degree > 0
    assert counts[~seen].sum() == 0
    expected = counts.sum() * degree[seen] / degree.sum()
    assert chisquare(counts[seen].numpy(), expected.numpy()).pvalue > ALPHA


def test_the_edge_sampler_draws_edges_by_inverse_degrees():
    r"""Edge ``(u, v)`` as likely as ``1 / deg_out(u) + 1 / deg_in(v)``
    (the paper's probability), both endpoints in the subgraph."""
    data = random_graph(num_nodes=30, num_edges=120, seed=4)
    sampler = SaintEdgeSampler(data, [1], sample_coverage=0)
    src, dst = data.edge_index
    index = {(int(u), int(v)): e for e, (u, v) in enumerate(zip(src, dst))}
    counts = torch.zeros(120)
    for draw in range(DRAWS // 5):
        nodes = sampler.subgraph_nodes(torch.arange(5),
                                       torch.Generator().manual_seed(draw))
        for u, v in zip(nodes[:5].tolist(), nodes[5:].tolist()):
            counts[index[u, v]] += 1
    deg_out = torch.bincount(src, minlength=30).double()
    deg_in = torch.bincount(dst, minlength=30).double()
    prob = 1 / deg_out[src] + 1 / deg_in[dst]
    expected = counts.sum() * prob / prob.sum()
    assert chisquare(counts.numpy(), expected.numpy()).pvalue > ALPHA


def test_a_walk_subgraph_is_every_edge_between_the_walks_nodes():
    data = random_graph(num_nodes=200, num_edges=1500, seed=5)
    loader = _loader(data, 'saint_rw', sample_coverage=0, walk_length=3,
                     input_nodes=torch.arange(100))
    edges = data.edge_index
    for batch in loader:
        nodes = set(batch.n_id.tolist())
        inside = [e for e in range(edges.size(1))
                  if int(edges[0, e]) in nodes and int(edges[1, e]) in nodes]
        assert sorted(batch.e_id.tolist()) == inside
        src, dst = batch.n_id[batch.edge_index]
        assert torch.equal(src, edges[0, batch.e_id])
        assert torch.equal(dst, edges[1, batch.e_id])
        # its seeds (the nodes among the loader's) first, the roots there
        seeds = batch.n_id[:batch.batch_size]
        assert bool((seeds < 100).all())
        assert bool((batch.n_id[batch.batch_size:] >= 100).all())
        assert torch.equal(batch.input_id, seeds)  # (positions = ids here)
        assert 'node_norm' not in batch  # sample_coverage=0: none


@pytest.mark.parametrize('name', list(KINDS))
def test_the_normalised_loss_is_an_unbiased_mean_over_the_seeds(name):
    r"""A fixed loss per node (its out-degree, which walks along in-edges
    and degree sampling favour, on a graph of skewed out-degrees):
    ``sum(node_norm * loss) / loss_norm`` over a batch's seeds averages,
    over fresh batches, to the mean over the loader's seeds (a plain mean
    over them would not)."""
    gen = torch.Generator().manual_seed(6)
    skew = 1.0 / torch.arange(1, 121).double()
    edge_index = torch.stack([
        torch.multinomial(skew, 700, True, generator=gen),
        torch.randint(0, 120, (700, ), generator=gen)])
    data = Data(x=torch.randn(120, 4), edge_index=edge_index)
    seeds = torch.arange(0, 120, 2)
    loader = _loader(data, name, sample_coverage=200, input_nodes=seeds)
    loss = torch.bincount(edge_index[0], minlength=120).double()
    truth = float(loss[seeds].mean())
    estimates, plain = [], []
    for _ in range(40):
        for batch in loader:
            mine = loss[batch.n_id[:batch.batch_size]]
            estimates.append(float((mine * batch.node_norm[
                :batch.batch_size]).sum()) / batch.loss_norm)
            plain.append(float(mine.mean()))
    estimates = torch.tensor(estimates)
    error = float(estimates.std()) / len(estimates) ** 0.5
    assert abs(float(estimates.mean()) - truth) < 4 * error, (
        float(estimates.mean()), truth, error)
    assert abs(float(torch.tensor(plain).mean()) - truth) > 4 * error


@pytest.mark.parametrize('name', list(KINDS))
def test_the_last_smaller_batch_gets_a_normalisation_of_its_size(name):
    r"""70 seeds in batches of 20: the last batch's 10 seeds draw smaller
    subgraphs; its normalised loss, too, averages over fresh epochs to the
    mean over the seeds (with the full batches' normalisation it came out
    about halved)."""
    gen = torch.Generator().manual_seed(6)
    data = Data(x=torch.randn(120, 4), edge_index=torch.randint(
        0, 120, (2, 700), generator=gen))
    loader = _loader(data, name, sample_coverage=200,
                     input_nodes=torch.arange(70))
    assert len(loader) == 4
    loss = torch.rand(120, generator=gen).double() + 0.5
    truth = float(loss[:70].mean())
    last = []
    for _ in range(30):
        *_, batch = loader  # (its seeds in the subgraph come first)
        mine = loss[batch.n_id[:batch.batch_size]]
        last.append(float((mine * batch.node_norm[:batch.batch_size]).sum())
                    / batch.loss_norm)
    last = torch.tensor(last)
    error = float(last.std()) / len(last) ** 0.5
    assert abs(float(last.mean()) - truth) < 4 * error, (
        float(last.mean()), truth, error)
    sampler = loader.node_sampler
    assert sorted(sampler.norms) == [10, 20]
    assert sampler.node_norm is sampler.norms[20][0]


def _counting(data, sizes):
    r"""A node sampler (one node per seed, coverage 20) that appends each
    subgraph's seed count to :obj:`sizes`."""
    class Counting(SaintNodeSampler):
        def subgraph_nodes(self, seeds, generator):
            sizes.append(seeds.numel())
            return super().subgraph_nodes(seeds, generator)
    return Counting(data, [1], sample_coverage=20, progress=False)


def test_a_small_last_batch_costs_no_more_subgraphs_than_the_full_ones():
    r"""101 seeds in batches of 25: the last batch's estimate (1 seed, 1
    node per subgraph) stops at as many subgraphs as the full batches'
    estimate drew, short of its coverage (it would draw 3,000)."""
    data = random_graph(num_nodes=150, num_edges=1500, seed=2)
    sizes = []
    sampler = _counting(data, sizes)
    inputs = FastNeighborLoader(data, [1], batch_size=25,
                                input_nodes=torch.arange(101)).input_data
    sampler.prepare(inputs, 25)
    assert set(sizes) == {25, 1} and sorted(sampler.norms) == [1, 25]
    assert sizes.count(1) == sizes.count(25) < 150 * 20


def test_a_loader_dropping_its_last_batch_draws_no_estimate_for_it():
    r"""101 seeds in batches of 25 with ``drop_last``: the estimate draws
    no 1-seed subgraph (without ``drop_last`` it does), and the batches
    are the first four of the loader that keeps the last one."""
    data = random_graph(num_nodes=150, num_edges=1500, seed=2)
    data.x = torch.randn(150, 3)

    def loader(drop_last):
        sizes = []
        sampler = _counting(data, sizes)
        return sizes, FastNeighborLoader(
            data, [1], batch_size=25, input_nodes=torch.arange(101),
            shuffle=True, generator=torch.Generator().manual_seed(0),
            pipeline=False, neighbor_sampler=sampler, drop_last=drop_last)
    kept_sizes, kept = loader(False)
    dropped_sizes, dropped = loader(True)
    assert kept_sizes.count(1) == kept_sizes.count(25) > 0
    assert set(dropped_sizes) == {25}
    assert dropped_sizes == kept_sizes[:len(dropped_sizes)]
    assert sorted(dropped.node_sampler.norms) == [25]
    first, second = list(kept), list(dropped)
    assert (len(first), len(second)) == (5, 4)
    for a, b in zip(first, second):
        for key in ('n_id', 'edge_index', 'node_norm', 'edge_norm'):
            assert torch.equal(a[key], b[key]), key

def test_the_contracts_loss_and_aggregation_weights():
    batch = Data(edge_index=torch.tensor([[1, 2, 0], [0, 0, 1]]),
                 num_nodes=3, node_norm=torch.tensor([0.5, 0.25, 2.0]),
                 edge_norm=torch.tensor([2.0, 1.0, 4.0]), loss_norm=0.5)
    # C_v / C_uv: edge_norm (C_u / C_uv) times node_norm[u] (~ 1 / C_u),
    # normalised over each node's in-edges
    raw = torch.tensor([2.0 * 0.25, 1.0 * 2.0, 4.0 * 0.5])
    torch.testing.assert_close(edge_weight(batch), torch.tensor(
        [raw[0] / (raw[0] + raw[1]), raw[1] / (raw[0] + raw[1]), 1.0]))
    logits = torch.randn(2, 3)
    y = torch.tensor([2, 0])
    want = (F.cross_entropy(logits, y, reduction='none') *
            torch.tensor([0.5, 0.25])).sum() / 0.5
    torch.testing.assert_close(seed_loss(logits, y, batch), want)


def test_a_pyg_graphsaint_training_loop_runs_on_the_batches():
    r"""PyG's ``examples/graph_saint.py`` loop: ``edge_norm`` times the
    graph's own ``edge_weight`` in ``GraphConv`` sums, the loss weighed by
    ``node_norm`` over ``train_mask``."""
    data = random_graph(num_nodes=200, num_edges=2000, seed=7)
    row, col = data.edge_index
    data.edge_weight = 1.0 / torch.bincount(col, minlength=200)[col].float()
    loader = _loader(data, 'saint_rw', batch_size=40, sample_coverage=20)
    torch.manual_seed(0)
    conv = GraphConv(8, 4, aggr='add')
    optimizer = torch.optim.Adam(conv.parameters(), lr=0.01)
    losses = []
    for _ in range(3):
        for batch in loader:
            optimizer.zero_grad()
            out = conv(batch.x, batch.edge_index,
                       batch.edge_norm * batch.edge_weight)
            loss = F.cross_entropy(out, batch.y, reduction='none')
            loss = (loss * batch.node_norm)[batch.train_mask].sum()
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
    assert all(torch.isfinite(torch.tensor(losses)))
    # the graph's edge_weight arrives sliced, not replaced
    torch.testing.assert_close(batch.edge_weight,
                               data.edge_weight[batch.e_id])


def test_the_normalisation_is_reproducible_and_shown_when_asked(
        monkeypatch):
    data = random_graph(num_nodes=100, num_edges=800, seed=8)
    bars = []
    real = saint.tqdm

    def bar(**kwargs):
        bars.append(kwargs['disable'])
        return real(**kwargs)
    monkeypatch.setattr(saint, 'tqdm', bar)
    one = next(iter(_loader(data, 'saint_rw', sample_coverage=10, seed=4)))
    two = next(iter(_loader(data, 'saint_rw', sample_coverage=10, seed=4)))
    other = next(iter(_loader(data, 'saint_rw', sample_coverage=10,
                              seed=5, progress=True)))
    assert torch.equal(one.n_id, two.n_id)
    assert torch.equal(one.node_norm, two.node_norm)
    assert not torch.equal(one.node_norm, other.node_norm)
    assert bars == [True, True, False]  # a bar where progress is on


def test_batches_from_worker_processes_carry_the_normalisation():
    data = random_graph(num_nodes=100, num_edges=800, seed=9)
    torch.manual_seed(0)
    loader = FastNeighborLoader(data, [1, 1], batch_size=25, num_workers=1,
                                neighbor_sampler={
                                    'class_path': 'saint_rw', 'init_args': {
                                        'sample_coverage': 5,
                                        'progress': False}})
    sampler = loader.node_sampler
    for batch in loader:  # (the workers' own random streams)
        assert batch.batch_size == batch.num_nodes  # every node a seed
        torch.testing.assert_close(batch.node_norm,
                                   sampler.node_norm[batch.n_id])
        assert batch.loss_norm == 1.0


@pytest.mark.reliability(
    fault='a GraphSAINT sampler given a heterogeneous graph, link label '
          'edges, `replace`, `disjoint`, `time_attr`, `weight_attr`, a '
          "bidirectional subgraph, a bad `sample_coverage`, `walk_length`, "
          "`seed` or `progress`, or shared by loaders with different seeds",
    behaviour='`ValueError` naming the argument, the value and the fix')
def test_bad_graphsaint_arguments_are_named():
    data = random_graph(num_nodes=60, num_edges=400, seed=0)
    with pytest.raises(ValueError, match="'data' is a heterogeneous graph: "
                       "SaintRandomWalkSampler samples homogeneous ones"):
        FastNeighborLoader(random_hetero_graph(), [1], input_nodes='paper',
                           neighbor_sampler='saint_rw')
    with pytest.raises(ValueError, match=r"'neighbor_sampler' \("
                       r"SaintNodeSampler\) draws subgraphs whose nodes "
                       r"carry the loss .* neighbor_sampler='neighbor'"):
        FastLinkNeighborLoader(data, [1], batch_size=8,
                               neighbor_sampler='saint_node')
    for key, value in (('replace', True), ('disjoint', True),
                       ('time_attr', 'x'), ('weight_attr', 'edge_attr')):
        with pytest.raises(ValueError, match=f"'{key}={value!r}' with "
                           f"SaintNodeSampler: .*: leave it out"):
            SaintNodeSampler(data, [1], **{key: value})
    with pytest.raises(ValueError, match="'subgraph_type='bidirectional'' "
                       "with SaintRandomWalkSampler: its subgraph is "
                       "induced"):
        SaintRandomWalkSampler(data, [1], subgraph_type='bidirectional')
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="'sample_coverage' must be an "
                           "int >= 0"):
            SaintNodeSampler(data, [1], sample_coverage=bad)
    with pytest.raises(ValueError, match="'walk_length' must be a positive "
                       "int"):
        SaintRandomWalkSampler(data, [1], walk_length=0)
    with pytest.raises(ValueError, match="'seed' must be an int, got 'x'"):
        SaintNodeSampler(data, [1], seed='x')
    with pytest.raises(ValueError, match="'progress' must be True or False"):
        SaintNodeSampler(data, [1], progress='yes')
    shared = SaintRandomWalkSampler(data, [1], sample_coverage=2,
                                    progress=False)
    FastNeighborLoader(data, [1], batch_size=8, neighbor_sampler=shared,
                       input_nodes=torch.arange(30))
    with pytest.raises(ValueError, match="estimated its normalisation for "
                       "another loader's seeds, batch size or drop_last: "
                       "give each loader its own"):
        FastNeighborLoader(data, [1], batch_size=8, neighbor_sampler=shared,
                           input_nodes=torch.arange(30, 60))
    # its last batch's estimate serves a loader that drops it, not back
    FastNeighborLoader(data, [1], batch_size=8, neighbor_sampler=shared,
                       input_nodes=torch.arange(30), drop_last=True)
    dropping = SaintRandomWalkSampler(data, [1], sample_coverage=2,
                                      progress=False)
    FastNeighborLoader(data, [1], batch_size=8, neighbor_sampler=dropping,
                       input_nodes=torch.arange(30), drop_last=True)
    with pytest.raises(ValueError, match="batch size or drop_last"):
        FastNeighborLoader(data, [1], batch_size=8, neighbor_sampler=dropping,
                           input_nodes=torch.arange(30))
    assert SamplerChoice.of('saint_rw').gives_edge_weight
    assert not SamplerChoice.of({'class_path': 'saint_rw', 'init_args': {
        'sample_coverage': 0}}).gives_edge_weight
