r"""Caches over several node types: one byte budget, rows ranked across
types, hotness over every relation."""
import pytest
import torch
from torch_geometric.data import Data, HeteroData

from pyg_fastload import FastNeighborLoader
from pyg_fastload.caching import walks
from pyg_fastload.caching import (
    access_counts,
    open_dataset,
    configure_caches,
    expected_access_scores,
    hotness_scores,
    out_degree_scores,
    presample_scores,
    reverse_pagerank_scores,
    stores_from_data,
)
from pyg_fastload.config import FeatureCache
from pyg_fastload.datasets import generate_hetero
from pyg_fastload.graph.convert import topology_of
from pyg_fastload.sampling import HeteroNeighborSampler
from pyg_fastload.storage import TieredFeatureStore
from pyg_fastload.storage import WindowBufferedCache


def two_types():
    data = HeteroData()
    data['paper'].x = torch.randn(10, 4)        # 16 bytes a row
    data['author'].x = torch.randn(7, 8)        # 32 bytes a row
    data['author', 'writes', 'paper'].edge_index = torch.tensor(
        [[0, 1, 2, 3], [0, 0, 1, 2]])
    data['paper', 'cites', 'paper'].edge_index = torch.tensor(
        [[1, 2, 3], [0, 0, 0]])
    return data


def cached_rows(store, group, tier='host'):
    cache = store.tiers('x', group).get(tier)
    return [] if cache is None else sorted(cache.node_ids.tolist())


@pytest.mark.reliability(
    fault='caches over several node types refused, or filled per type',
    behaviour='one byte budget; the hottest rows of any type fill it')
def test_one_budget_takes_the_hottest_rows_of_any_type():
    data = two_types()
    topo = topology_of(data)
    store = TieredFeatureStore()
    for t in data.node_types:
        store.put_tensor(data[t].x, group_name=t, attr_name='x', index=None)
    # global ids: papers 0..9, authors 10..16
    scores = torch.zeros(17)
    scores[[12, 3, 15, 0, 9]] = torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0])
    # 100 bytes: author 2 (32), paper 3 (16), author 5 (32), paper 0 (16)
    configure_caches(store, FeatureCache(host_budget=100), topo,
                     scores=scores)
    assert cached_rows(store, 'author') == [2, 5]
    assert cached_rows(store, 'paper') == [0, 3]
    # device first, then host, from the same ranking
    configure_caches(store, FeatureCache(device_budget=40, host_budget=48),
                     topo, scores=scores)
    assert cached_rows(store, 'author', 'device') == [2]
    assert cached_rows(store, 'paper', 'device') == []
    assert cached_rows(store, 'paper') == [3]
    assert cached_rows(store, 'author') == [5]


def test_pinned_host_buffers_of_several_types_are_counted_rounded(
        monkeypatch):
    from pyg_fastload.caching import planner
    from pyg_fastload.config import SettingError
    monkeypatch.setattr(planner, 'available_memory', lambda: 120)
    data = two_types()
    scores = torch.zeros(17)
    scores[[12, 3, 15, 0, 9]] = torch.tensor([5.0, 4.0, 3.0, 2.0, 1.0])
    # 112 bytes: authors 2 and 5 (64), papers 3, 0 and 9 (48, pinned 64)
    for device, fits in (('cpu', True), ('cuda', False)):
        store = TieredFeatureStore(device=device)
        store.free_device_bytes = lambda: 2**30
        for t in data.node_types:
            store.put_tensor(data[t].x, group_name=t, attr_name='x',
                             index=None)
        cache = FeatureCache(host_budget=112)
        if fits:
            configure_caches(store, cache, topology_of(data), scores=scores)
            assert cached_rows(store, 'paper') == [0, 3, 9]
            continue
        with pytest.raises(SettingError, match="need 128 B, more than the "
                                               "120 B of memory"):
            configure_caches(store, cache, topology_of(data), scores=scores)


def test_a_fraction_is_one_of_the_bytes_of_every_type():
    data = two_types()
    store = TieredFeatureStore()
    for t in data.node_types:
        store.put_tensor(data[t].x, group_name=t, attr_name='x', index=None)
    scores = torch.arange(17, 0, -1).double()  # papers hotter
    # 10 * 16 + 7 * 32 = 384 bytes; half: 192 = every paper + one author
    configure_caches(store, FeatureCache(host_budget=0.5),
                     topology_of(data), scores=scores)
    assert cached_rows(store, 'paper') == list(range(10))
    assert cached_rows(store, 'author') == [0]


def test_window_buffering_over_several_types():
    r"""Each type's window holds the rows the ranking would give its type
    in a static device cache; the host buffer takes the hottest rows."""
    data = two_types()
    store = TieredFeatureStore()
    for t in data.node_types:
        store.put_tensor(data[t].x, group_name=t, attr_name='x', index=None)
    scores = torch.arange(17, 0, -1).double()  # papers hotter
    # 192 of 384 bytes: every paper and one author; the host's 64 bytes:
    # the 4 hottest papers
    configure_caches(store, FeatureCache(host_budget=64, device_budget=192,
                                         device_cache='window', window=2),
                     topology_of(data), scores=scores)
    assert store.window_size == 2
    for t, rows in (('paper', 10), ('author', 1)):
        window = store.tiers('x', t).get('device')
        assert isinstance(window, WindowBufferedCache)
        assert window.capacity == rows
    assert cached_rows(store, 'paper') == [0, 1, 2, 3]
    assert cached_rows(store, 'author') == []


def test_windows_serve_hetero_batches():
    data = generate_hetero('hetero-tiny')
    for t in ('author', 'institution'):
        data[t].x = torch.randn(data[t].num_nodes, 6)
    stores = stores_from_data(data, FeatureCache(
        device_budget=0.3, device_cache='window', window=3))
    kwargs = dict(num_neighbors=[4, 3], input_nodes=('paper', torch.arange(
        100)), batch_size=25, generator=torch.Generator().manual_seed(0))
    plain = list(FastNeighborLoader(data, **kwargs))
    kwargs['generator'] = torch.Generator().manual_seed(0)
    windows = [stores[0].tiers('x', t).get('device')
               for t in ('paper', 'author')]
    iterator = iter(FastNeighborLoader(stores, pipeline=False, **kwargs))
    windowed = [next(iterator)]
    # the batches sampled ahead were announced to each type's window
    assert all(int(w.pending.sum()) > 0 for w in windows)
    windowed += list(iterator)
    assert len(plain) == len(windowed) == 4
    # every batch was announced and retired per type
    assert all(bool((w.pending == 0).all()) for w in windows)
    for a, b in zip(plain, windowed):
        for t in ('paper', 'author', 'institution'):
            assert torch.equal(a[t].x, b[t].x)
    stats = stores[0].stats()
    for t in ('paper', 'author'):
        device = stats[f'{t}.x']['device']
        # the windows admitted the announced rows before they were read
        assert device['requests'] == sum(b[t].n_id.numel()
                                         for b in windowed)
        assert device['hits'] > 0


def test_hotness_of_one_relation_is_the_homogeneous_hotness():
    data = generate_hetero('hetero-tiny')
    edge_index = data['paper', 'cites', 'paper'].edge_index
    n = data['paper'].num_nodes
    hetero = HeteroData()
    hetero['paper'].num_nodes = n
    hetero['paper', 'cites', 'paper'].edge_index = edge_index
    homo = topology_of(Data(edge_index=edge_index, num_nodes=n))
    topo = topology_of(hetero)
    train = torch.arange(0, n, 3)
    for policy in ('out_degree', 'reverse_pagerank', 'expected_access'):
        expected = hotness_scores(policy, homo, train_nodes=train,
                                  num_neighbors=[4, 2], progress=False)
        got = hotness_scores(policy, topo, train_nodes=train,
                             num_neighbors=[4, 2], progress=False)
        assert torch.allclose(got.double(), expected.double()), policy


@pytest.mark.parametrize('out_of_core', [False, True])
def test_typed_hotness_is_the_homogeneous_views(out_of_core, monkeypatch):
    # a walk to an in-neighbour of any relation is the walk of the
    # homogeneous view; so are the accesses when every fan-out takes all
    topo = topology_of(generate_hetero('hetero-tiny'))
    view = topo.homogeneous_view()
    train = torch.arange(0, topo.num_nodes, 5)
    monkeypatch.setattr(walks, 'CHUNK_EDGES', 97)  # chunks inside segments
    typed = reverse_pagerank_scores(topo, out_of_core=out_of_core)
    homo = reverse_pagerank_scores(view, out_of_core=out_of_core)
    assert torch.allclose(typed, homo, rtol=1e-12, atol=0)
    typed = expected_access_scores(topo, train, [-1, -1],
                                   out_of_core=out_of_core)
    homo = expected_access_scores(view, train, [-1, -1],
                                  out_of_core=out_of_core)
    assert torch.allclose(typed, homo, rtol=1e-12, atol=0)
    assert torch.equal(out_degree_scores(topo), out_degree_scores(view))


def test_expected_access_follows_each_relations_fanout():
    data = two_types()
    topo = topology_of(data)
    # seed paper 0: 2 authors (0, 1) and 3 citing papers (1, 2, 3)
    scores = hotness_scores('expected_access', topo,
                            train_nodes=torch.tensor([0]),
                            num_neighbors={('author', 'writes', 'paper'): [1],
                                           ('paper', 'cites', 'paper'): [3]},
                            progress=False)
    expected = torch.zeros(17, dtype=torch.float64)
    expected[0] = 1.0
    expected[[1, 2, 3]] = 1.0     # every citing paper (3 of 3)
    expected[[10, 11]] = 0.5      # one of two authors
    assert torch.equal(scores, expected)


def test_presample_counts_the_heterogeneous_batches():
    data = generate_hetero('hetero-tiny')
    topo = topology_of(data)
    train = data['paper'].train_mask.nonzero().view(-1)
    counts = presample_scores(topo, train, [3, 2], batch_size=64, seed=1,
                              progress=False)
    # the same epoch by hand: every batch's global n_id counted once
    generator = torch.Generator().manual_seed(1)
    order = train[torch.randperm(train.numel(), generator=generator)]
    sampler = HeteroNeighborSampler(topo, [3, 2])
    expected = torch.zeros(topo.num_nodes, dtype=torch.long)
    for batch in order.split(64):
        expected[sampler.sample(batch, generator).node] += 1
    assert torch.equal(counts, expected)
    first_author = topo.num_nodes_of('paper')
    assert int(counts[first_author:].sum()) > 0  # other types counted too
    trace = access_counts(topo, list(order.split(64)), [3, 2], seed=1)
    assert int(trace.max()) <= len(order.split(64))
    assert int(trace[first_author:].sum()) > 0


@pytest.mark.reliability(
    fault='a cached HeteroData serves wrong rows or counts no type',
    behaviour='same batches as the HeteroData; per-type tier counters')
def test_cached_hetero_stores_serve_the_same_batches():
    data = generate_hetero('hetero-tiny')
    for t in ('author', 'institution'):
        data[t].x = torch.randn(data[t].num_nodes, 6)
    stores = stores_from_data(data, FeatureCache(host_budget=0.3),
                              scores=None)
    store = stores[0]
    assert cached_rows(store, 'paper') and cached_rows(store, 'author')
    kwargs = dict(num_neighbors=[4, 3], input_nodes=('paper', torch.arange(
        100)), batch_size=25, generator=torch.Generator().manual_seed(0))
    plain = list(FastNeighborLoader(data, **kwargs))
    kwargs['generator'] = torch.Generator().manual_seed(0)
    tiered = list(FastNeighborLoader(stores, **kwargs))
    assert len(plain) == len(tiered) == 4
    for a, b in zip(plain, tiered):
        for t in ('paper', 'author', 'institution'):
            assert torch.equal(a[t].n_id, b[t].n_id)
            assert torch.equal(a[t].x, b[t].x)
    stats = store.stats()
    assert {'paper.x', 'author.x', 'institution.x'} <= set(stats)
    author = stats['author.x']
    assert author['host']['requests'] == sum(b['author'].n_id.numel()
                                             for b in tiered)
    assert author['host']['hits'] + author['storage']['requests'] == \
        author['host']['requests']
    assert 0 < author['host']['hits'] < author['host']['requests']


def test_open_dataset_serves_a_hetero_directory_from_disk(tmp_path):
    from pyg_fastload.datasets import write_graph
    data = generate_hetero('hetero-tiny')
    data['author'].x = torch.randn(data['author'].num_nodes, 5)
    write_graph(data, tmp_path / 'ds', name='t', source='t',
                      progress=False)
    features, graph = open_dataset(tmp_path / 'ds', host_budget='9KiB',
                                   policy='out_degree')
    # features on disk, one budget: 9 KiB of the rows of highest
    # out-degree over every relation, papers (64 B) and authors (20 B)
    topo = graph.topology
    degree = torch.bincount(topo.indices.long(), minlength=topo.num_nodes)
    first = {t: int(topo.node_offset[topo.node_types.index(t)])
             for t in ('paper', 'author')}
    rows = [(-int(degree[first[t] + i]), first[t] + i, t, i, size)
            for t, size in (('paper', 64), ('author', 20))
            for i in range(topo.num_nodes_of(t))]
    expected, used = {'paper': [], 'author': []}, 0
    for _, _, t, i, size in sorted(rows):
        if used + size > 9 * 1024:
            break
        used += size
        expected[t].append(i)
    assert expected['paper'] and expected['author']
    for t in ('paper', 'author'):
        assert cached_rows(features, t) == sorted(expected[t])
    kwargs = dict(num_neighbors=[3, 2], input_nodes=('paper', torch.arange(
        60)), batch_size=30, generator=torch.Generator().manual_seed(1))
    got = list(FastNeighborLoader((features, graph), **kwargs))
    kwargs['generator'] = torch.Generator().manual_seed(1)
    for a, b in zip(FastNeighborLoader(data, **kwargs), got, strict=True):
        for t in ('paper', 'author'):
            assert torch.equal(a[t].x, b[t].x)
    # another topology to rank with must be typed as the dataset is
    from pyg_fastload.graph import CSCTopology
    with pytest.raises(ValueError, match="must be a HeteroTopology with the "
                       "node types and counts"):
        open_dataset(tmp_path / 'ds', topology=CSCTopology.from_edge_index(
            torch.tensor([[0], [1]]), 2))


def test_an_auto_device_budget_is_sized_over_every_type():
    data = two_types()
    store = TieredFeatureStore()
    for t in data.node_types:
        store.put_tensor(data[t].x, group_name=t, attr_name='x', index=None)
    configure_caches(store, FeatureCache(device_budget='auto',
                                         host_budget=32),
                     topology_of(data), scores=torch.arange(17.0),
                     reserve_bytes=0)
    assert cached_rows(store, 'author', 'device') == []  # until a step
    assert cached_rows(store, 'author') == [6]  # the hottest: 32 bytes
    store.first_step_done()
    out = store.gather('x', torch.tensor([1, 2]), group_name='paper')
    assert torch.equal(out, data['paper'].x[[1, 2]])
    # sized after the first step: this machine has room for everything
    assert cached_rows(store, 'author', 'device') == list(range(7))
    assert cached_rows(store, 'paper', 'device') == list(range(10))


@pytest.mark.parametrize('storage', ['mmap', 'direct'])
def test_read_ahead_serves_a_hetero_directory(tmp_path, storage):
    r"""Storage read-ahead over several node types: each type's rows are
    announced and retired per batch; the batches stay the same, and direct
    reads merge later batches' rows per type."""
    from pyg_fastload.datasets import write_graph
    from pyg_fastload.storage.read_accumulator import AccessModel
    data = generate_hetero('hetero-tiny')
    data['author'].x = torch.randn(data['author'].num_nodes, 5)
    write_graph(data, tmp_path / 'ds', name='t', source='t',
                      progress=False)

    def epoch(read_ahead):
        features, graph = open_dataset(tmp_path / 'ds', storage=storage,
                                       read_ahead=read_ahead,
                                       host_budget='2KiB')
        if read_ahead and storage == 'direct':
            for group in ('paper', 'author'):
                # always merge, up to 4 batches
                features.tiers('x', group)['storage'].accumulator.model = \
                    AccessModel(1000.0, 1.0)
        loader = FastNeighborLoader(
            (features, graph), [3, 2], input_nodes=('paper', torch.arange(
                60)), batch_size=10, shuffle=True, pipeline=False,
            generator=torch.Generator().manual_seed(0))
        return [(b['paper'].x.clone(), b['author'].x.clone())
                for b in loader], features

    plain, _ = epoch(0)
    ahead, features = epoch(4)
    assert len(plain) == len(ahead) == 6
    for (a, b), (c, d) in zip(plain, ahead):
        assert torch.equal(a, c) and torch.equal(b, d)
    if storage == 'direct':
        stats = features.accumulator_stats()
        for group in ('paper', 'author'):
            # 4 batches sampled ahead: each submission serves its batch
            # and 3 more
            assert stats[f'{group}.x']['announced'] == 6
            assert stats[f'{group}.x']['merged_batches'] == 6 - 2
    else:  # the misses of each type were hinted to the kernel ahead
        for group in ('paper', 'author'):
            storage = features.tiers('x', group)['storage']
            assert storage.prefetched_pages > 0


def test_read_ahead_serves_hetero_link_batches(tmp_path):
    from pyg_fastload import FastLinkNeighborLoader
    from pyg_fastload.datasets import write_graph
    data = generate_hetero('hetero-tiny')
    data['author'].x = torch.randn(data['author'].num_nodes, 5)
    write_graph(data, tmp_path / 'ds', name='t', source='t',
                      progress=False)
    relation = ('author', 'writes', 'paper')

    def epoch(read_ahead):
        features, graph = open_dataset(tmp_path / 'ds', storage='direct',
                                       read_ahead=read_ahead)
        loader = FastLinkNeighborLoader(
            (features, graph), [3, 2], edge_label_index=(
                relation, data[relation].edge_index[:, :40]),
            batch_size=8, neg_sampling='binary', shuffle=True,
            pipeline=True, generator=torch.Generator().manual_seed(0))
        return [(b['paper'].x.clone(), b['author'].x.clone())
                for b in loader], features

    plain, _ = epoch(0)
    ahead, features = epoch(3)
    assert len(plain) == len(ahead) == 5
    for (a, b), (c, d) in zip(plain, ahead):
        assert torch.equal(a, c) and torch.equal(b, d)
    stats = features.accumulator_stats()
    assert stats['paper.x']['announced'] == 5
    assert stats['author.x']['announced'] == 5
