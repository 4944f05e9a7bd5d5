import dataclasses
import json
import warnings

import numpy as np
import pytest
import torch

from pyg_fastload.datasets import (
    PRESETS,
    SyntheticGraph,
    SyntheticGraphConfig,
    degree_stats,
    generate,
    load_synthetic,
)
from pyg_fastload.datasets import synthetic_cache as synthetic_module
from pyg_fastload.graph import topology_of
from pyg_fastload.graph.topology import CSCTopology

TENSORS = ('x', 'y', 'train_mask', 'val_mask', 'test_mask')

SMALL = SyntheticGraphConfig(num_nodes=300, num_edges=1_200, num_features=8,
                             num_classes=3, num_communities=5,
                             train_fraction=0.6, val_fraction=0.1,
                             test_fraction=0.2)


@pytest.fixture(scope='module')
def tiny() -> SyntheticGraph:
    return generate('tiny', seed=0, progress=False)


def assert_same_graph(a: SyntheticGraph, b: SyntheticGraph) -> None:
    assert torch.equal(a.topology.indptr, b.topology.indptr)
    assert torch.equal(a.topology.indices, b.topology.indices)
    assert a.topology.num_nodes == b.topology.num_nodes
    for name in TENSORS:
        ta, tb = getattr(a, name), getattr(b, name)
        assert ta.dtype == tb.dtype and ta.shape == tb.shape, name
        assert torch.equal(ta, tb), name


def test_determinism_and_seed(tiny):
    state = torch.random.get_rng_state()
    again = generate('tiny', seed=0, progress=False)
    assert torch.equal(torch.random.get_rng_state(), state)  # global RNG
    assert_same_graph(tiny, again)
    assert tiny.x.numpy().tobytes() == again.x.numpy().tobytes()

    other = generate('tiny', seed=1, progress=False)
    assert not torch.equal(tiny.topology.indices, other.topology.indices)
    assert not torch.equal(tiny.x, other.x)
    assert not torch.equal(tiny.y, other.y)
    assert not torch.equal(tiny.train_mask, other.train_mask)


def test_shapes_and_dtypes(tiny):
    cfg = PRESETS['tiny']
    n, f = cfg.num_nodes, cfg.num_features
    topo = tiny.topology
    assert isinstance(topo, CSCTopology)
    assert topo.num_nodes == n == tiny.num_nodes
    assert topo.indptr.dtype == torch.int64 and topo.indptr.shape == (n + 1,)
    assert topo.indices.dtype == torch.int32
    assert topo.num_edges == 2 * cfg.num_edges
    assert topo.edge_id is None and topo.edge_weight is None
    assert tiny.x.dtype == torch.float32 and tiny.x.shape == (n, f)
    assert tiny.y.dtype == torch.int64 and tiny.y.shape == (n,)
    assert set(tiny.y.unique().tolist()) == set(range(cfg.num_classes))
    for name in ('train_mask', 'val_mask', 'test_mask'):
        mask = getattr(tiny, name)
        assert mask.dtype == torch.bool and mask.shape == (n,)
    assert tiny.config == cfg and tiny.seed == 0


@pytest.mark.parametrize('which', ['tiny', 'small', 'dense'])
def test_graph_is_valid_undirected(tiny, which):
    if which == 'tiny':
        graph = tiny
    elif which == 'small':
        graph = generate(SMALL, seed=3, progress=False)
    else:  # close to complete: exercises the extra rounds and trimming
        cfg = dataclasses.replace(SMALL, num_nodes=40, num_edges=600,
                                  num_communities=3, max_degree_fraction=1.0,
                                  homophily=0.3)
        graph = generate(cfg, seed=0, progress=False)
    cfg = graph.config
    topo = graph.topology
    n = topo.num_nodes
    indptr, indices = topo.indptr, topo.indices.long()
    assert int(indptr[0]) == 0 and int(indptr[-1]) == indices.numel()
    assert bool((indptr[1:] >= indptr[:-1]).all())
    assert int(indices.min()) >= 0 and int(indices.max()) < n
    assert topo.num_edges == 2 * cfg.num_edges

    dst = topo.destinations()
    src = indices
    assert not bool((src == dst).any()), 'self loop'
    key = dst * n + src
    assert bool((key[1:] > key[:-1]).all()), 'duplicate or unsorted edge'
    reverse = torch.sort(src * n + dst).values
    assert torch.equal(reverse, key), 'graph is not symmetric'


def test_masks(tiny):
    cfg = PRESETS['tiny']
    n = cfg.num_nodes
    masks = torch.stack([tiny.train_mask, tiny.val_mask, tiny.test_mask])
    assert int(masks.sum(0).max()) <= 1, 'masks overlap'
    for mask, frac in zip(masks, (cfg.train_fraction, cfg.val_fraction,
                                  cfg.test_fraction)):
        assert abs(int(mask.sum()) - frac * n) <= 1

    graph = generate(SMALL, seed=0, progress=False)
    masks = torch.stack([graph.train_mask, graph.val_mask, graph.test_mask])
    assert int(masks.sum(0).max()) <= 1
    assert int(masks.sum()) == pytest.approx(0.9 * SMALL.num_nodes, abs=2)


def test_presets_match_real_sizes():
    arxiv, products = PRESETS['arxiv-like'], PRESETS['products-like']
    assert (arxiv.num_nodes, arxiv.num_edges) == (169_343, 1_166_243)
    assert (arxiv.num_features, arxiv.num_classes) == (128, 40)
    assert (products.num_nodes, products.num_edges) == (2_449_029, 61_859_140)
    assert (products.num_features, products.num_classes) == (100, 47)
    for cfg in PRESETS.values():
        total = cfg.train_fraction + cfg.val_fraction + cfg.test_fraction
        assert total <= 1.0 + 1e-9


def test_degree_stats(tiny):
    stats = degree_stats(tiny.topology)
    cfg = PRESETS['tiny']
    assert stats['num_nodes'] == cfg.num_nodes
    assert stats['num_edges'] == 2 * cfg.num_edges
    assert stats['mean_degree'] == pytest.approx(2 * cfg.num_edges /
                                                 cfg.num_nodes)
    assert stats['max_degree'] == int(tiny.topology.in_degree().max())
    # Heavy tail: the top 20% of nodes hold clearly more than 20% of edges.
    assert 0.35 < stats['top20_edge_share'] < 0.9
    assert stats['max_degree'] > 4 * stats['mean_degree']


def test_to_data(tiny):
    data = tiny.to_data()
    n = tiny.num_nodes
    assert data.num_nodes == n
    assert torch.equal(data.edge_index, tiny.topology.to_edge_index())
    assert data.edge_index.dtype == torch.int64
    for name in TENSORS:
        assert torch.equal(getattr(data, name), getattr(tiny, name))
    assert topology_of(data) is tiny.topology  # reused, not rebuilt
    assert '_fastload_topology' not in data.keys()
    data.edge_index = data.edge_index.clone()  # another graph: rebuilt
    assert topology_of(data) is not tiny.topology
    rebuilt = CSCTopology.from_edge_index(data.edge_index, n)
    assert rebuilt.edge_id is None  # already sorted by destination
    assert torch.equal(rebuilt.indptr, tiny.topology.indptr)
    assert torch.equal(rebuilt.indices, tiny.topology.indices)


def test_cache_round_trip(tmp_path, monkeypatch):
    first = load_synthetic(SMALL, root=tmp_path, seed=5, progress=False)
    dirs = [p for p in tmp_path.iterdir()]
    assert len(dirs) == 1 and dirs[0].name.startswith('custom-seed5-')
    meta = json.loads((dirs[0] / 'meta.json').read_text())
    assert meta['seed'] == 5 and meta['config']['num_nodes'] == 300

    def fail(*args, **kwargs):
        raise AssertionError('the cached graph was regenerated')

    monkeypatch.setattr(synthetic_module, 'generate', fail)
    with warnings.catch_warnings():
        warnings.simplefilter('error', RuntimeWarning)
        second = load_synthetic(SMALL, root=tmp_path, seed=5, progress=False)
    assert_same_graph(first, second)
    assert second.config == SMALL and second.seed == 5
    second.x.add_(1.0)  # copy-on-write mapping: in-place ops are fine...
    third = load_synthetic(SMALL, root=tmp_path, seed=5, progress=False)
    assert torch.equal(third.x, first.x)  # ...and never reach the file
    # Presets get their name in the directory; seeds get their own entry.
    monkeypatch.undo()
    load_synthetic('tiny', root=tmp_path, seed=0, progress=False)
    load_synthetic(SMALL, root=tmp_path, seed=6, progress=False)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 3
    assert any(name.startswith('tiny-seed0-') for name in names)


def test_cache_env_root(tmp_path, monkeypatch):
    monkeypatch.setenv('PYG_FASTLOAD_CACHE', str(tmp_path / 'env'))
    load_synthetic(SMALL, progress=False)
    assert len(list((tmp_path / 'env').iterdir())) == 1


@pytest.mark.parametrize('damage', ['truncate', 'delete', 'wrong_length',
                                    'meta'])
def test_corrupted_cache_is_regenerated(tmp_path, damage):
    first = load_synthetic(SMALL, root=tmp_path, seed=1, progress=False)
    (cache_dir, ) = tmp_path.iterdir()
    if damage == 'truncate':
        path = cache_dir / 'x.npy'
        path.write_bytes(path.read_bytes()[:-100])
    elif damage == 'delete':
        (cache_dir / 'indices.npy').unlink()
    elif damage == 'wrong_length':
        np.save(cache_dir / 'y.npy', first.y.numpy()[:-1])
    else:
        (cache_dir / 'meta.json').write_text('{"format_version": ')
    with pytest.warns(RuntimeWarning, match='regenerating'):
        again = load_synthetic(SMALL, root=tmp_path, seed=1, progress=False)
    assert_same_graph(first, again)
    with warnings.catch_warnings():  # the repaired cache loads cleanly
        warnings.simplefilter('error', RuntimeWarning)
        assert_same_graph(first, load_synthetic(SMALL, root=tmp_path, seed=1,
                                                progress=False))
    assert [p.name for p in tmp_path.iterdir()] == [cache_dir.name]


@pytest.mark.parametrize('changes, match', [
    (dict(num_nodes=1), r"'num_nodes' = 1.*at least 2"),
    (dict(num_edges=50_000), r"'num_edges' = 50000.*at most .* 44850"),
    (dict(train_fraction=0.7, val_fraction=0.2, test_fraction=0.3),
     r"fractions must sum to at most 1"),
    (dict(num_communities=2), r"'num_communities' = 2.*num_classes = 3"),
    (dict(degree_exponent=1.0), r"'degree_exponent' = 1.0"),
    (dict(homophily=1.5), r"'homophily' = 1.5"),
    (dict(max_degree_fraction=0.0), r"'max_degree_fraction' = 0.0"),
])
def test_bad_config(changes, match):
    with pytest.raises(ValueError, match=match):
        dataclasses.replace(SMALL, **changes)


def test_bad_names_and_seed(tmp_path):
    with pytest.raises(ValueError, match=r"'arxiv'.*'tiny', 'arxiv-like', "
                       r"'products-like'"):
        generate('arxiv')
    with pytest.raises(ValueError, match=r"'arxiv'"):
        load_synthetic('arxiv', root=tmp_path)
    with pytest.raises(ValueError, match=r"'seed' = -1"):
        generate('tiny', seed=-1)
    with pytest.raises(TypeError):
        generate(42)


def _mean_neighbours(h, src, dst, inv_deg):
    return torch.zeros_like(h).index_add_(0, dst, h[src]) * inv_deg


class _TwoLayer(torch.nn.Module):
    r"""GraphSAGE-style mean model; with ``graph=None`` a plain MLP of the
    same width."""
    def __init__(self, in_dim, hidden, out_dim, graph):
        super().__init__()
        self.graph = graph
        factor = 1 if graph is None else 2
        self.lin1 = torch.nn.Linear(factor * in_dim, hidden)
        self.lin2 = torch.nn.Linear(factor * hidden, out_dim)

    def _mix(self, h):
        if self.graph is None:
            return h
        return torch.cat([h, _mean_neighbours(h, *self.graph)], dim=1)

    def forward(self, x):
        h = self.lin1(self._mix(x)).relu()
        return self.lin2(self._mix(h))


def _test_accuracy(graph, use_graph, epochs=60):
    topo = graph.topology
    inv_deg = 1.0 / topo.in_degree().clamp(min=1).float().unsqueeze(1)
    adj = (topo.indices.long(), topo.destinations(), inv_deg)
    torch.manual_seed(0)
    model = _TwoLayer(graph.x.size(1), 32, int(graph.y.max()) + 1,
                      adj if use_graph else None)
    opt = torch.optim.Adam(model.parameters(), lr=0.02, weight_decay=5e-4)
    for _ in range(epochs):
        opt.zero_grad()
        out = model(graph.x)
        loss = torch.nn.functional.cross_entropy(out[graph.train_mask],
                                                 graph.y[graph.train_mask])
        loss.backward()
        opt.step()
    with torch.no_grad():
        pred = model(graph.x).argmax(dim=1)
    mask = graph.test_mask
    return float((pred[mask] == graph.y[mask]).float().mean())


def test_the_graph_matters(tiny):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny workload: threads only add overhead
    try:
        with torch.random.fork_rng():
            mlp = _test_accuracy(tiny, use_graph=False)
            gnn = _test_accuracy(tiny, use_graph=True)
    finally:
        torch.set_num_threads(threads)
    assert gnn >= mlp + 0.10, (mlp, gnn)
    assert gnn > 0.8, (mlp, gnn)
