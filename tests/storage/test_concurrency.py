r"""Several loaders (threads) reading one feature store at once: every row
of every batch must be the source's row."""
import threading
import time

import pytest
import torch
from hypothesis import given, settings, strategies as st

from pyg_fastload import FastNeighborLoader
from pyg_fastload.caching import configure_caches
from pyg_fastload.config import FeatureCache
from pyg_fastload.graph.topology import CSCTopology
from pyg_fastload.storage import CSCGraphStore, TieredFeatureStore
from pyg_fastload.storage.buffer_pool import BufferPool

from ..helpers import random_graph


def window_stores(tmp_path, num_nodes=400, storage='mmap', budget=0.3):
    r"""A graph and stores whose features are on disk behind a small
    window-buffered device cache and a host buffer."""
    data = random_graph(num_nodes=num_nodes, num_edges=4000, num_features=16)
    path = tmp_path / 'x.bin'
    data.x.numpy().tofile(path)
    store = TieredFeatureStore()
    store.put_mmap_tensor(str(path), torch.float32, data.x.shape, 'x',
                          storage=storage)
    configure_caches(store, FeatureCache(host_budget=0.1,
                                         device_budget=budget,
                                         device_cache='window', window=3),
                     scores=-torch.arange(num_nodes).double(),
                     reserve_bytes=0)
    graph = CSCGraphStore(CSCTopology.from_edge_index(data.edge_index,
                                                       num_nodes))
    return data, (store, graph)


def wrong_batches(loader, x, epochs):
    r"""How many batches of :obj:`epochs` epochs hold a row that differs
    from :obj:`x`."""
    wrong = 0
    for _ in range(epochs):
        for batch in loader:
            wrong += not torch.equal(batch.x, x[batch.n_id])
    return wrong


@pytest.mark.reliability(
    fault="two loaders in two threads over one store with "
          "`device_cache='window'`",
    behaviour="every row of every batch is the file's (was: 113-144 of 320 "
              "batches held other rows, no error)")
@pytest.mark.parametrize('storage,pipeline', [('mmap', False),
                                              ('mmap', True),
                                              ('direct', True)])
def test_two_loaders_in_two_threads_read_the_right_rows(tmp_path, storage,
                                                         pipeline):
    data, stores = window_stores(tmp_path, storage=storage)
    loaders = [FastNeighborLoader(stores, [5, 5], batch_size=10,
                                  shuffle=True, pipeline=pipeline,
                                  generator=torch.Generator().manual_seed(i))
               for i in range(2)]
    results = [None, None]
    errors = []

    def run(i):
        try:
            results[i] = wrong_batches(loaders[i], data.x, epochs=4)
        except Exception as error:  # reported below, not lost in a thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, )) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(t.is_alive() for t in threads), 'a loader hung'
    assert not errors, errors
    assert results == [0, 0]  # of 2 x 160 batches
    cache = stores[0].tiers('x').get('device')
    assert cache.evictions > 0  # the window cache did turn over
    assert int(cache.pending.sum()) == 0  # every announced batch retired


@pytest.mark.reliability(
    fault="a pipelined train loader interrupted by a pipelined validation "
          "pass on the same window-cached store (Lightning's "
          "`val_check_interval < 1`)",
    behaviour="every row of every batch is the file's (was: about 1 wrong "
              "batch in 1,600)")
def test_validation_inside_a_training_epoch_reads_the_right_rows(tmp_path):
    data, stores = window_stores(tmp_path)
    train = FastNeighborLoader(stores, [5, 5], batch_size=10, shuffle=True,
                               pipeline=True)
    val = FastNeighborLoader(stores, [5, 5], batch_size=20, pipeline=True,
                             input_nodes=torch.arange(0, 400, 3))
    wrong = checked = 0
    for _ in range(3):
        for step, batch in enumerate(train):
            wrong += not torch.equal(batch.x, data.x[batch.n_id])
            checked += 1
            if step % 8 == 7:  # the train stages keep loading meanwhile
                wrong += wrong_batches(val, data.x, epochs=1)
    assert checked == 120 and wrong == 0


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 64), min_size=8, max_size=40))
def test_buffer_pool_never_hands_one_buffer_to_two_threads(sizes):
    from pyg_fastload.storage import buffer_pool
    pool = BufferPool(max_buffers=2)
    is_free = buffer_pool._is_free

    def slow_is_free(base):  # widen the window between check and hand-out
        free = is_free(base)
        time.sleep(0.0005)
        return free

    clash, held = [], set()
    guard = threading.Lock()
    barrier = threading.Barrier(2)

    def run():
        barrier.wait()
        for size in sizes:
            block = pool.empty((size, ), torch.int64)
            with guard:  # a buffer another thread still holds is a clash
                if block.data_ptr() in held:
                    clash.append(size)
                held.add(block.data_ptr())
            time.sleep(0.0002)
            with guard:
                held.discard(block.data_ptr())
            del block

    threads = [threading.Thread(target=run) for _ in range(2)]
    buffer_pool._is_free = slow_is_free
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        buffer_pool._is_free = is_free
    assert not clash
