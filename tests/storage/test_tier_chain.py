r"""A tier is one class: a new link goes into a store's chain with no edit
elsewhere, and the caches the store composes wrap it."""
import time

import torch

from pyg_fastload import FastNeighborLoader
from pyg_fastload.caching import configure_caches
from pyg_fastload.config import FeatureCache
from pyg_fastload.graph.topology import CSCTopology
from pyg_fastload.storage import (
    CSCGraphStore,
    MemoryStorage,
    MmapStorage,
    Tier,
    TieredFeatureStore,
    TierCounters,
)

from ..helpers import random_graph


class SlowReads(Tier):
    r"""Counts and delays every read that reaches it, then passes it on."""
    name = 'slow'
    place = 'the next tier, slowly'

    def __init__(self, fallback, delay=0.0):
        self.fallback = fallback
        self.delay = delay
        self.counters = TierCounters()
        self.announced = 0

    def read(self, ids, out, timings):
        time.sleep(self.delay)
        self.counters.add(ids.numel(), ids.numel(), self.row_bytes)
        return self.fallback.read(ids, out, timings)

    def announce(self, ids, misses=None):
        self.announced += 1
        super().announce(ids, misses)


def _graph_store(data):
    return CSCGraphStore(CSCTopology.from_edge_index(data.edge_index,
                                                     data.num_nodes))


def test_a_new_tier_serves_alone():
    x = torch.randn(30, 4)
    store = TieredFeatureStore()
    store.put_tier(SlowReads(MemoryStorage(x)), 'x')
    ids = torch.tensor([3, 3, 29, 0])
    assert torch.equal(store.gather('x', ids), x[ids])
    assert store.stats()['x']['slow']['requests'] == 4
    assert store.places()['x'] == {'slow': 'the next tier, slowly',
                                   'storage': 'in memory'}


def test_caches_wrap_a_new_tier_and_the_loader_reads_through_it(tmp_path):
    data = random_graph(num_features=8)
    path = tmp_path / 'x.bin'
    data.x.numpy().tofile(path)
    store = TieredFeatureStore()
    slow = SlowReads(MmapStorage(str(path), torch.float32, data.x.shape),
                     delay=0.001)
    store.put_tier(slow, 'x')
    configure_caches(store, FeatureCache(
        host_budget=0.2, device_budget=0.1, device_cache='window', window=2),
        scores=torch.rand(data.num_nodes).double())
    assert list(store.tiers('x')) == ['device', 'host', 'slow', 'storage']
    assert store.stats()['x']['slow']['requests'] == 0  # filling is free
    loader = FastNeighborLoader((store, _graph_store(data)), [3, 2],
                                batch_size=20, pipeline=False)
    for batch in loader:
        assert torch.equal(batch.x, data.x[batch.n_id])
    stats = store.stats()['x']
    # every row the caches missed went through the new tier to storage
    assert stats['slow']['requests'] == stats['storage']['requests'] > 0
    assert slow.announced == len(loader)  # the look-ahead reaches it too
    assert store.cached_ids('x').numel() == 40  # the host buffer's rows
