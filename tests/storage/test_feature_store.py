import numpy as np
import pytest
import torch

from pyg_fastload import FastNeighborLoader
from pyg_fastload.caching import configure_caches
from pyg_fastload.config import FeatureCache, budget_rows
from pyg_fastload.graph.topology import CSCTopology
from pyg_fastload.storage import (
    AdaptiveReadAhead,
    CSCGraphStore,
    TieredFeatureStore,
    WindowBufferedCache,
)

from ..helpers import random_graph, requires_cuda, requires_torch_sparse

DTYPES = [torch.float32, torch.float16, torch.float64, torch.int64,
          torch.uint8, torch.bool]


def configure(store, scores=None, reserve_bytes=2**30, **settings):
    configure_caches(store, FeatureCache(**settings), scores=scores,
                     reserve_bytes=reserve_bytes)


def make_tensor(dtype, rows=50, cols=6):
    gen = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(rows, cols, generator=gen) > 0.5
    if dtype.is_floating_point:
        return torch.randn(rows, cols, generator=gen).to(dtype)
    return torch.randint(0, 100, (rows, cols), generator=gen).to(dtype)


def tiered(tensor, tmp_path=None, host=0.2, device=0.1, mode='static'):
    store = TieredFeatureStore()
    if tmp_path is None:
        store.put_tensor(tensor, group_name=None, attr_name='x', index=None)
    else:
        path = tmp_path / 'x.bin'
        tensor.numpy().tofile(path)
        store.put_mmap_tensor(str(path), tensor.dtype, tensor.shape, 'x')
    # Node 0 hottest, then 1, 2, ...: device holds 0..4, host 5..14.
    configure(store, scores=-torch.arange(tensor.size(0)).double(),
              host_budget=host, device_budget=device,
              device_cache=mode)
    return store


@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('on_disk', [False, True])
def test_every_tier_returns_the_source_row(tmp_path, dtype, on_disk):
    x = make_tensor(dtype)
    store = tiered(x, tmp_path if on_disk else None)
    gen = torch.Generator().manual_seed(1)
    for ids in (torch.randint(0, 50, (40, ), generator=gen),
                torch.tensor([3, 3, 3, 7, 20, 20, 49]),
                torch.empty(0, dtype=torch.long), torch.arange(50)):
        assert torch.equal(store.gather('x', ids), x[ids])
        assert torch.equal(store.get_tensor(group_name=None, attr_name='x', index=ids),
                           x[ids])
    assert torch.equal(store.get_tensor(group_name=None, attr_name='x', index=None), x)
    assert store.get_tensor_size(group_name=None, attr_name='x') == (50, 6)


def test_counters_add_up(tmp_path):
    x = make_tensor(torch.float32)
    store = tiered(x, tmp_path)
    ids = torch.tensor([0, 1, 6, 6, 30, 31, 31, 49])
    store.gather('x', ids)
    stats = store.stats()['x']
    device, host, storage = stats['device'], stats['host'], stats['storage']
    assert device['requests'] == 8 and device['hits'] == 2
    assert host['requests'] == 6 and host['hits'] == 2
    assert storage['requests'] == 4 and storage['hits'] == 3  # 3 distinct
    assert device['hits'] + host['hits'] + storage['requests'] == 8
    assert storage['bytes'] == 3 * 6 * 4
    assert storage['pages'] == 1  # rows 30, 31, 49 share the first page
    store.reset_counters()
    assert store.stats()['x']['device']['requests'] == 0


def test_window_buffering_keeps_rows_still_needed():
    num_nodes, capacity = 40, 6
    x = make_tensor(torch.float32, rows=num_nodes)
    store = TieredFeatureStore()
    store.put_tensor(x, group_name=None, attr_name='x', index=None)
    configure(store, device_budget=capacity / num_nodes,
              device_cache='window')
    cache = store.tiers('x').get('device')
    assert isinstance(cache, WindowBufferedCache)
    gen = torch.Generator().manual_seed(0)
    batches = [torch.randperm(num_nodes, generator=gen)[:5].unique()
               for _ in range(30)]
    window = 3
    for b in batches[:window]:
        store.announce(b)
    for t, batch in enumerate(batches):
        cached = cache.slot_node[cache.slot_node >= 0]
        needed = cached[cache.pending[cached] > 0]
        store.retire(batch)
        needed_later = needed[cache.pending[needed] > 0]
        assert torch.equal(store.gather('x', batch), x[batch])
        # A cached row that a batch in the window still needs survives:
        assert (cache.slot[needed_later] >= 0).all()
        if t + window < len(batches):
            store.announce(batches[t + window])
    assert cache.evictions > 0
    assert store.stats()['x']['device']['hits'] > 0


def test_window_beats_no_reuse_knowledge_on_storage_reads():
    # Every batch repeats the rows of the batch two steps later.
    x = make_tensor(torch.float32, rows=200)
    gen = torch.Generator().manual_seed(3)
    batches = [torch.randperm(200, generator=gen)[:20] for _ in range(10)]
    batches = [torch.cat([b, batches[max(i - 2, 0)]]).unique()
               for i, b in enumerate(batches)]

    def storage_rows(announce):
        store = TieredFeatureStore()
        store.put_tensor(x, group_name=None, attr_name='x', index=None)
        configure(store, device_budget=0.2, device_cache='window')
        for t, b in enumerate(batches):
            if announce:
                for later in batches[t + 1:t + 3]:
                    store.announce(later)
            store.gather('x', b)
            if announce:
                for later in batches[t + 1:t + 3]:
                    store.retire(later)
        return store.stats()['x']['storage']['hits']

    # fixed seed: 158 rows read from storage with the window, 240 without
    assert storage_rows(True) < storage_rows(False)


def memory_stores(data):
    store = TieredFeatureStore()
    store.put_tensor(data.x, group_name=None, attr_name='x', index=None)
    store.put_tensor(data.y, group_name=None, attr_name='y', index=None)
    configure(store, scores=torch.rand(data.num_nodes).double(),
              host_budget=0.3, device_budget=0.1)
    graph_store = CSCGraphStore(
        CSCTopology.from_edge_index(data.edge_index, data.num_nodes))
    return store, graph_store


def test_tuple_works_with_fast_loader():
    data = random_graph(num_features=8)
    store, graph_store = memory_stores(data)
    loader = FastNeighborLoader((store, graph_store), [3, 2],
                                input_nodes=torch.arange(40), batch_size=10)
    for batch in loader:
        assert torch.equal(batch.x, data.x[batch.n_id])
        assert torch.equal(batch.y, data.y[batch.n_id])
        assert torch.equal(data.edge_index[:, batch.e_id],
                           batch.n_id[batch.edge_index])


def test_gather_times_each_tier(tmp_path):
    x = make_tensor(torch.float32)
    store = tiered(x, tmp_path)
    timings = {}
    store.gather('x', torch.tensor([0, 7, 30]), timings=timings)  # 3 tiers
    assert set(timings) == {'device', 'host', 'storage'}
    assert all(seconds > 0 for seconds in timings.values())
    store.gather('x', torch.tensor([0, 1]), timings=timings)  # device only
    plain = TieredFeatureStore()
    plain.put_tensor(x, group_name=None, attr_name='x', index=None)
    only = {}
    plain.gather('x', torch.arange(5), timings=only)
    assert set(only) == {'storage'}


def test_loader_breaks_feature_loading_down_by_tier(tmp_path):
    data = random_graph(num_features=8)
    store, graph_store = memory_stores(data)
    for pipeline in (False, True):
        loader = FastNeighborLoader((store, graph_store), [3, 2],
                                    batch_size=20, pipeline=pipeline)
        for _ in loader:
            pass
        times = loader.time_breakdown
        tiers = [times[f'feature_loading.{t}']
                 for t in ('device', 'host', 'storage')]
        assert all(t > 0 for t in tiers)
        assert sum(tiers) <= times['feature_loading']
    # A Data object's feature matrices count as storage:
    loader = FastNeighborLoader(data, [3, 2], batch_size=20)
    for _ in loader:
        pass
    times = loader.time_breakdown
    assert 0 < times['feature_loading.storage'] <= times['feature_loading']
    assert times['feature_loading.device'] == times['feature_loading.host'] == 0


def test_graph_store_layouts():
    data = random_graph()
    topo = CSCTopology.from_edge_index(data.edge_index, data.num_nodes)
    store = CSCGraphStore(topo)
    row, col = store.get_edge_index(edge_type=None, layout='coo')
    assert torch.equal(torch.stack([row, col]), data.edge_index)
    row, colptr = store.get_edge_index(edge_type=None, layout='csc')
    assert torch.equal(row, topo.indices.long())
    rowptr, col = store.get_edge_index(edge_type=None, layout='csr')
    assert rowptr[-1] == data.num_edges
    src = torch.repeat_interleave(torch.arange(data.num_nodes),
                                  rowptr[1:] - rowptr[:-1])
    pairs = set(zip(src.tolist(), col.tolist()))
    assert pairs == set(zip(*data.edge_index.tolist()))
    other = CSCGraphStore()
    other.put_edge_index(data.edge_index, edge_type=None, layout='coo',
                         size=(data.num_nodes, data.num_nodes))
    assert torch.equal(other.topology.indices, topo.indices)


@requires_torch_sparse
def test_pyg_neighbor_loader_over_stores_equals_data():
    from torch_geometric.loader import NeighborLoader
    data = random_graph(num_features=8)
    # Sort edges by (destination, source) and tell PyG (`is_sorted`): its
    # Data path and its GraphStore path then see the same CSC order, so the
    # same seed gives the same draws.
    perm = torch.argsort(data.edge_index[1] * data.num_nodes
                         + data.edge_index[0])
    data.edge_index = data.edge_index[:, perm]
    data.edge_attr = None
    store, graph_store = memory_stores(data)
    kwargs = dict(num_neighbors=[3, 2], batch_size=16,
                  input_nodes=torch.arange(48))
    torch.manual_seed(0)
    ours = list(NeighborLoader((store, graph_store), **kwargs))
    torch.manual_seed(0)
    ref = list(NeighborLoader(data, is_sorted=True, **kwargs))
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert torch.equal(a.n_id, b.n_id)
        assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
        assert torch.equal(a.edge_index, b.edge_index)
        assert torch.equal(a.e_id, b.e_id)


def test_budgets():
    assert budget_rows(None, 100, 8, 'b') == 0
    assert budget_rows(0.25, 100, 8, 'b') == 25
    assert budget_rows('20%', 100, 8, 'b') == 20
    assert budget_rows(80, 100, 8, 'b') == 10
    assert budget_rows('1KiB', 1000, 8, 'b') == 128
    assert budget_rows(10**9, 100, 8, 'b') == 100
    with pytest.raises(ValueError, match="host_budget='lots'"):
        budget_rows('lots', 100, 8, 'host_budget')
    with pytest.raises(ValueError, match='fraction'):
        budget_rows(1.5, 100, 8, 'device_budget')
    with pytest.raises(ValueError, match='>= 0'):
        budget_rows(-1, 100, 8, 'device_budget')


def test_bad_mmap_file_and_unknown_attr(tmp_path):
    path = tmp_path / 'x.bin'
    np.zeros((10, 4), dtype=np.float32).tofile(path)
    store = TieredFeatureStore()
    with pytest.raises(ValueError, match='x.bin.*truncated'):
        store.put_mmap_tensor(str(path), torch.float32, (20, 4), 'x')
    with pytest.raises(KeyError, match="'feat'"):
        store.gather('feat', torch.tensor([0]))
    with pytest.raises(ValueError, match='device_cache'):
        configure(store, device_cache='lru')


def test_fast_loader_samples_ahead_for_window_cache(tmp_path):
    data = random_graph(num_features=8)
    path = tmp_path / 'x.bin'
    data.x.numpy().tofile(path)
    store = TieredFeatureStore()
    store.put_mmap_tensor(str(path), torch.float32, data.x.shape, 'x')
    configure(store, device_budget=0.2, device_cache='window',
              window=3)
    graph_store = CSCGraphStore(
        CSCTopology.from_edge_index(data.edge_index, data.num_nodes))
    loader = FastNeighborLoader((store, graph_store), [3, 2],
                                batch_size=20, pipeline=False)
    iterator = iter(loader)
    first = next(iterator)
    assert len(iterator.window) == 3  # three batches sampled ahead
    cache = store.tiers('x').get('device')
    assert int(cache.pending.sum()) > 0
    batches = [first] + list(iterator)
    assert sum(b.batch_size for b in batches) == data.num_nodes
    for batch in batches:
        assert torch.equal(batch.x, data.x[batch.n_id])
    assert int(cache.pending.sum()) == 0  # every announced batch retired
    assert store.stats()['x']['device']['hits'] > 0
    # The pipelined loader (sampling and loading threads) does the same:
    loader = FastNeighborLoader((store, graph_store), [3, 2],
                                batch_size=20, pipeline=True)
    for batch in loader:
        assert torch.equal(batch.x, data.x[batch.n_id])
    assert int(cache.pending.sum()) == 0


def test_auto_device_budget_is_set_after_first_step(monkeypatch):
    from pyg_fastload.storage import step_memory
    x = make_tensor(torch.float32, rows=100)
    store = TieredFeatureStore()
    store.put_tensor(x, group_name=None, attr_name='x', index=None)
    assert store.free_device_bytes() > 0
    # 30 rows of 24 bytes free beyond the reserve and a step that took
    # 500 bytes: the cache gets 30 rows.
    store.free_device_bytes = lambda: 10_500 + 30 * 24
    monkeypatch.setattr(step_memory, 'process_memory',
                        lambda: {'peak': 1500, 'rss': 1000})
    configure(store, scores=-torch.arange(100).double(),
              device_budget='auto', reserve_bytes=10_000)
    assert store.tiers('x').get('device') is None
    assert torch.equal(store.gather('x', torch.arange(10)), x[:10])
    assert store.tiers('x').get('device') is None  # no step done yet
    store.first_step_done()
    assert torch.equal(store.gather('x', torch.arange(10)), x[:10])
    device = store.tiers('x').get('device')
    assert device is not None and device.capacity == 30
    assert torch.equal(store.gather('x', torch.arange(100)), x)


def test_auto_on_cuda_counts_the_step_once(monkeypatch):
    # A card simulated through torch.cuda's memory counters: 80 GiB in all,
    # 2 GiB allocated for good, a 3 GiB step whose blocks the caching
    # allocator keeps, so the driver reports 80 - 5 GiB free; the host has
    # less memory than the card.
    from pyg_fastload import config
    from pyg_fastload.caching import planner
    GiB = 2**30
    monkeypatch.setattr(config, 'available_memory', lambda: 8 * GiB)
    card, kept, step = 80 * GiB, 2 * GiB, 3 * GiB
    memory = dict(allocated=kept, peak=kept, reserved=kept)
    for name, value in (
            ('mem_get_info',
             lambda device=None: (card - memory['reserved'], card)),
            ('memory_reserved', lambda device=None: memory['reserved']),
            ('memory_allocated', lambda device=None: memory['allocated']),
            ('max_memory_allocated', lambda device=None: memory['peak']),
            ('reset_peak_memory_stats',
             lambda device=None: memory.update(peak=memory['allocated']))):
        monkeypatch.setattr(torch.cuda, name, value)
    store = TieredFeatureStore('cuda')
    store.put_tensor(make_tensor(torch.float32, rows=100), group_name=None,
                     attr_name='x', index=None)
    configure(store, scores=-torch.arange(100).double(),
              device_budget='auto', reserve_bytes=GiB)
    budgets = []  # the resize's budget, taken before it fills a GPU cache
    monkeypatch.setattr(planner, 'configure_caches',
                        lambda store, cache, *args, **kwargs:
                        budgets.append(cache.device_budget))
    store.gather('x', torch.arange(10))  # the first step's batch
    memory.update(peak=kept + step, reserved=kept + step)  # the step ran
    store.first_step_done()
    store.gather('x', torch.arange(10))
    # all but what stays allocated, the step's peak and the reserve (the
    # old rule took the step twice: 71 GiB; and refused a cache larger than
    # the host's memory)
    assert budgets == [card - kept - step - GiB]


def test_read_ahead_merges_reads_of_several_batches(tmp_path, monkeypatch):
    # The depth stays 1: it follows measured read times (the next test),
    # which a loaded machine lengthens; pinned at 4, reads are issued before
    # enough rows are pending and this test fails
    monkeypatch.setattr(AdaptiveReadAhead, 'observe',
                        lambda self, *args: self.depth)
    data = random_graph(num_nodes=2000, num_edges=20000, num_features=64)
    path = tmp_path / 'x.bin'
    data.x.numpy().tofile(path)
    store = TieredFeatureStore()
    store.put_mmap_tensor(str(path), torch.float32, data.x.shape, 'x')
    configure(store, host_budget=0.1, scores=torch.rand(
              2000, generator=torch.Generator().manual_seed(0)).double())
    store.set_read_ahead(batches=4, min_reads=500)
    storage = store.tiers('x')['storage']
    storage.evict_page_cache()
    requests = []  # rows per read-ahead request to the kernel
    prefetch = storage.prefetch
    storage.prefetch = lambda ids: requests.append(ids.numel()) or \
        prefetch(ids)
    graph_store = CSCGraphStore(
        CSCTopology.from_edge_index(data.edge_index, data.num_nodes))
    # The consumer's thread samples the look-ahead's batches before it
    # gathers one ('auto' would move this loader-bound epoch to the
    # pipeline, whose sampling cannot run ahead of a consumer this fast).
    loader = FastNeighborLoader((store, graph_store), [5], batch_size=50,
                                pipeline=False)
    batches = 0
    for batch in loader:
        assert torch.equal(batch.x, data.x[batch.n_id])
        batches += 1
    # Reads were merged: about 250 storage misses per batch, requested
    # min_reads=500 at a time, so one request serves two or three batches
    # (the first and last are issued when due, smaller).
    assert len(requests) <= batches // 2
    assert all(rows >= 500 for rows in requests[1:-1])
    assert storage.prefetched_pages > 0
    with pytest.raises(ValueError, match='min_reads'):
        store.set_read_ahead(2, min_reads=0)


def test_read_ahead_depth_follows_the_storage_share():
    depth = AdaptiveReadAhead(max_batches=8, max_bytes=10_000)
    assert depth.depth == 1
    # Reads take half of each batch's time: the depth doubles to the bound.
    assert [depth.observe(0.05, 0.1, 100) for _ in range(4)] == [2, 4, 8, 8]
    # Hidden reads (1% of the time): one batch shallower per batch.
    shares = []
    for _ in range(20):  # the averaged share falls below 5%, then shrinks
        depth.observe(0.001, 0.1, 100)
        shares.append(depth.depth)
    assert shares[-1] == 1 and all(a - b in (0, 1)
                                   for a, b in zip(shares, shares[1:]))
    # A batch of 4000 bytes: 10 kB hold two batches, however slow the reads.
    capped = AdaptiveReadAhead(max_batches=8, max_bytes=10_000)
    assert max(capped.observe(1.0, 0.1, 4000) for _ in range(5)) == 2
    with pytest.raises(ValueError, match='max_batches'):
        AdaptiveReadAhead(0, 10)
    with pytest.raises(ValueError, match='shrink_share'):
        AdaptiveReadAhead(4, 10, grow_share=0.1, shrink_share=0.2)


@pytest.mark.parametrize('pipeline', [False, True])
@pytest.mark.parametrize('max_bytes', [2**30, 1])
def test_adaptive_read_ahead_keeps_batches_and_bounds(tmp_path, pipeline,
                                                      max_bytes):
    data = random_graph(num_nodes=2000, num_edges=20000, num_features=64)
    path = tmp_path / 'x.bin'
    data.x.numpy().tofile(path)
    store = TieredFeatureStore()
    store.put_mmap_tensor(str(path), torch.float32, data.x.shape, 'x')
    # min_reads never reached: only due batches trigger reads.
    store.set_read_ahead(batches=3, min_reads=10**9,
                         max_pending_bytes=max_bytes)
    storage = store.tiers('x')['storage']
    graph_store = CSCGraphStore(
        CSCTopology.from_edge_index(data.edge_index, data.num_nodes))
    loader = FastNeighborLoader((store, graph_store), [5], batch_size=50,
                                shuffle=True, pipeline=pipeline)
    torch.manual_seed(0)
    depths = []
    for batch in loader:
        assert torch.equal(batch.x, data.x[batch.n_id])
        depths.append(store.read_ahead_depth)
        if max_bytes == 1:  # not even one batch fits: issued at once
            with storage._window.lock:  # the sampling thread may be in
                assert not storage._pending
    assert all(1 <= d <= 3 for d in depths)
    assert storage.prefetched_pages > 0
    assert not storage._pending  # all issued by the end
    with pytest.raises(ValueError, match='max_pending_bytes'):
        store.set_read_ahead(2, max_pending_bytes=0)


@requires_cuda
@pytest.mark.parametrize('mode', ['static', 'window'])
def test_device_cache_on_cuda(tmp_path, mode):
    x = make_tensor(torch.float32, rows=200)
    path = tmp_path / 'x.bin'
    x.numpy().tofile(path)
    store = TieredFeatureStore(device='cuda')
    store.put_mmap_tensor(str(path), torch.float32, x.shape, 'x')
    configure(store, scores=-torch.arange(200).double(),
              host_budget=0.2, device_budget=0.1,
              device_cache=mode)
    for ids in (torch.arange(200), torch.tensor([0, 150, 150, 3])):
        out = store.gather('x', ids)
        assert out.is_cuda
        torch.cuda.synchronize()
        assert torch.equal(out.cpu(), x[ids])


@pytest.mark.reliability(
    fault="`device_budget='auto'` on the CPU",
    behaviour=('at most a quarter of the free memory and 4 GiB (was: all free'
               ' RAM minus 1 GiB)'))
def test_auto_on_the_cpu_takes_a_bounded_share(monkeypatch):
    x = make_tensor(torch.float32, rows=100)  # 24 bytes per row
    store = TieredFeatureStore()
    store.put_tensor(x, group_name=None, attr_name='x', index=None)
    store.free_device_bytes = lambda: 4000
    configure(store, scores=-torch.arange(100).double(),
              device_budget='auto', reserve_bytes=0)
    from pyg_fastload.storage import step_memory
    monkeypatch.setattr(step_memory, 'process_memory',  # a step of 0 B
                        lambda: {'peak': 1000, 'rss': 1000})
    store.gather('x', torch.arange(3))
    store.first_step_done()
    store.gather('x', torch.arange(3))
    # a quarter of the 4000 free bytes (the old rule took all 100 rows)
    assert store.tiers('x').get('device').capacity == 1000 // 24


@pytest.mark.reliability(
    fault="cache budgets larger than the machine's memory",
    behaviour='`SettingError` naming the budget, unless `exceed_memory=True`')
def test_caches_larger_than_memory_are_refused(monkeypatch):
    from pyg_fastload.caching import planner
    from pyg_fastload.config import SettingError
    x = make_tensor(torch.float32, rows=100)
    store = TieredFeatureStore()
    store.put_tensor(x, group_name=None, attr_name='x', index=None)
    monkeypatch.setattr(planner, 'available_memory', lambda: 1000)
    with pytest.raises(SettingError, match=r"'host_budget': the caches need "
                       r"1\.9 KiB, more than the 1000 B of memory.*"
                       r"exceed_memory=True"):
        configure(store, scores=-torch.arange(100).double(),
                  host_budget=0.8)
    configure(store, scores=-torch.arange(100).double(), host_budget=0.8,
              exceed_memory=True)  # explicitly allowed
    assert store.tiers('x').get('host').capacity == 80


def pinning_faked(monkeypatch):
    r"""Pinned host tensors as plain ones (no CUDA here), each recorded;
    pinning a finished copy (``Tensor.pin_memory``) is an error."""
    from pyg_fastload.storage import feature_store
    made = []

    def empty_host(shape, dtype, pinned):
        made.append((torch.empty(shape, dtype=dtype), pinned))
        return made[-1][0]

    def pin_memory(self, *args):
        raise AssertionError('a full copy was pinned afterwards')
    monkeypatch.setattr(feature_store, 'empty_host', empty_host)
    monkeypatch.setattr(torch.Tensor, 'pin_memory', pin_memory)
    return made


@pytest.mark.reliability(
    fault="the host buffer of a loader whose batches go to a GPU (pinned) "
          "filled as a whole unpinned copy, pinned afterwards",
    behaviour="filled in place in the pinned buffer, `FILL_CHUNK_BYTES` of "
              "rows at a time: no temporary of the buffer's size (was: "
              "twice the buffer at once)")
def test_a_pinned_host_buffer_is_filled_in_place_chunk_by_chunk(
        monkeypatch):
    from pyg_fastload.storage import feature_store
    from pyg_fastload.storage.memory_storage import MemoryStorage
    made = pinning_faked(monkeypatch)
    monkeypatch.setattr(feature_store, 'FILL_CHUNK_BYTES', 10 * 24)
    gathers = []
    gather = MemoryStorage.gather

    def recorded(self, ids, out, *args, **kwargs):
        gathers.append((ids.numel(), out.data_ptr(), out.nbytes))
        gather(self, ids, out, *args, **kwargs)
    monkeypatch.setattr(MemoryStorage, 'gather', recorded)
    x = make_tensor(torch.float32, rows=100)  # 24 B rows
    store = TieredFeatureStore(device='cuda')  # batches go to a GPU
    store.put_tensor(x, group_name=None, attr_name='x', index=None)
    store.free_device_bytes = lambda: 2**30
    configure(store, scores=-torch.arange(100).double(), host_budget=0.55)
    buffer, pinned = made[0]
    assert pinned and len(made) == 1 and buffer.shape == (55, 6)
    host = store.tiers('x').get('host')
    assert host.values is buffer  # the pinned buffer itself serves
    assert torch.equal(buffer, x[:55])
    start, end = buffer.data_ptr(), buffer.data_ptr() + buffer.nbytes
    assert [rows for rows, _, _ in gathers] == [10] * 5 + [5]
    assert all(start <= ptr and ptr + nbytes <= end
               for _, ptr, nbytes in gathers)  # each chunk in place


@pytest.mark.reliability(
    fault="a pinned host buffer whose size the caching host allocator "
          "rounds up to a power of two (a 5 GiB buffer pins 8 GiB)",
    behaviour="the fit check counts the rounded bytes: `SettingError` "
              "naming `host_budget` where they exceed the memory")
def test_the_fit_check_counts_what_pinning_takes(monkeypatch):
    from pyg_fastload.caching import planner
    from pyg_fastload.config import SettingError
    from pyg_fastload.storage.feature_store import pinned_bytes
    assert [pinned_bytes(n) for n in (0, 1, 2, 3, 1680, 2**20 + 1)] == \
        [0, 1, 2, 4, 2048, 2**21]
    pinning_faked(monkeypatch)
    monkeypatch.setattr(planner, 'available_memory', lambda: 1900)
    x = make_tensor(torch.float32, rows=100)  # 70 rows of 24 B: 1680 B
    for device, fits in (('cpu', True), ('cuda', False)):
        store = TieredFeatureStore(device=device)
        store.put_tensor(x, group_name=None, attr_name='x', index=None)
        store.free_device_bytes = lambda: 2**30
        assert store.host_buffer_bytes([(None, 'x')], 70) == \
            (1680 if fits else 2048)
        if fits:
            configure(store, scores=-torch.arange(100).double(),
                      host_budget=0.7)
            continue
        with pytest.raises(SettingError, match=r"'host_budget': the caches "
                           r"need 2\.0 KiB, more than the 1\.9 KiB"):
            configure(store, scores=-torch.arange(100).double(),
                      host_budget=0.7)


def test_caches_over_several_node_types_need_their_topology():
    store = TieredFeatureStore()
    store.put_tensor(torch.randn(10, 4), group_name='paper', attr_name='x',
                     index=None)
    store.put_tensor(torch.randn(7, 4), group_name='author', attr_name='x',
                     index=None)
    with pytest.raises(ValueError, match=r"several node types \(paper, "
                       r"author\) rank .* pass the graph's HeteroTopology "
                       r"as 'topology'"):
        configure_caches(store, FeatureCache(host_budget=0.5),
                         scores=torch.rand(10))


@pytest.mark.reliability(
    fault="'scores' given as a list, or as the wrong number of rows",
    behaviour="an error naming 'scores' and what it takes")
def test_scores_of_the_wrong_kind_are_named():
    store = TieredFeatureStore()
    store.put_tensor(torch.randn(10, 4), group_name=None, attr_name='x',
                     index=None)
    cache = FeatureCache(host_budget=0.5)
    with pytest.raises(TypeError, match="'scores' must be a tensor .* got "
                       "list"):
        configure_caches(store, cache, scores=[1.0] * 10)
    topology = CSCTopology.from_edge_index(torch.tensor([[0], [1]]), 10)
    with pytest.raises(TypeError, match="got str"):
        configure_caches(store, cache, topology,
                         scores=lambda *args: 'hot')
    with pytest.raises(ValueError, match="'scores' has 9 entries, the "
                       "cached tensors have 10 rows"):
        configure_caches(store, cache, scores=torch.rand(9))


class _StepMemory(torch.nn.Module):
    def forward(self, nbytes, device):
        # a step's activations: allocated, touched, freed
        return float(torch.ones(nbytes // 4, device=device).sum())


@pytest.mark.reliability(
    fault="`device_budget='auto'` sized before the model's step ran (after "
          "the first gather), taking the memory its activations need next",
    behaviour="sized after the first training step: the free memory minus "
              "the step's measured transient memory (a 960 MiB step leaves "
              "64 MiB of 1 GiB to the cache, not a quarter); only the host "
              "buffer serves during that step")
@pytest.mark.parametrize('device, pipeline', [
    ('cpu', False), ('cpu', True),
    pytest.param('cuda', False, marks=requires_cuda)])
def test_auto_is_sized_after_the_first_training_step(device, pipeline,
                                                     monkeypatch):
    from pyg_fastload import FastNeighborLoader
    from pyg_fastload.storage import CSCGraphStore
    from torch_geometric.data import Data
    gen = torch.Generator().manual_seed(0)
    data = Data(x=torch.randn(20000, 1024, generator=gen),
                edge_index=torch.randint(20000, (2, 60000), generator=gen))
    store = TieredFeatureStore(device)
    store.put_tensor(data.x, group_name=None, attr_name='x', index=None)
    free = 2**30  # what the machine has free, as the store sees it
    if device == 'cuda':  # a card with 1 GiB beyond what is allocated now;
        # the caching allocator's real counters decide the rest
        card = torch.cuda.memory_allocated() + free
        monkeypatch.setattr(torch.cuda, 'mem_get_info', lambda device=None: (
            card - torch.cuda.memory_reserved(device), card))
    else:
        store.free_device_bytes = lambda: free
    topology = CSCTopology.from_edge_index(data.edge_index, data.num_nodes)
    configure(store, scores=torch.arange(20000.0).double(),
              device_budget='auto', reserve_bytes=0)
    step = 960 * 2**20
    loader = FastNeighborLoader((store, CSCGraphStore(topology)),
                                [3], batch_size=500, pipeline=pipeline,
                                device=device)
    for index, batch in enumerate(loader):
        assert torch.equal(batch.x.cpu(), data.x[batch.n_id.cpu()])
        if index == 0:  # the first step: host only
            assert 'device' not in store.tiers('x')
            _StepMemory()(step, device)
    row = 1024 * 4
    # free - step (measured: within 8 MiB, 16 on CUDA, where the batch held
    # on the GPU counts as allocated; the old CPU rule: a quarter of free,
    # 256 MiB, every row; the old CUDA rule took the step from the card's
    # free memory twice: no cache)
    expected = (free - step) // row
    assert expected < min(free // 4 // row, 20000)
    tolerance = (16 if device == 'cuda' else 8) * 2**20
    capacity = store.tiers('x')['device'].capacity
    assert abs(capacity - expected) * row <= tolerance
