r"""``TieredFeatureStore.fill_caches`` takes the caches as a list of layers,
each wrapping the tiers below it (GraphBolt's wrapper style)."""
import torch

from pyg_fastload.storage import (DeviceCache, HostBuffer, StaticCache,
                                  TieredFeatureStore, WindowCache)
from pyg_fastload.storage.feature_store import fill_static

X = torch.arange(40, dtype=torch.float32).view(20, 2)


def _store():
    store = TieredFeatureStore()
    store.put_tensor(X, group_name=None, attr_name='x', index=None)
    return store


def test_layers_wrap_in_the_order_given():
    store = _store()
    store.fill_caches([(None, 'x')], [HostBuffer(torch.arange(6)),
                                      DeviceCache(torch.tensor([1, 2]))])
    tiers = store.tiers('x')
    assert list(tiers) == ['device', 'host', 'storage']
    assert tiers['device'].fallback is tiers['host']
    assert store.cached_ids('x').tolist() == list(range(6))
    ids = torch.tensor([2, 5, 9])
    assert torch.equal(store.gather('x', ids), X[ids])
    hits = {name: tier.counters.hits for name, tier in tiers.items()
            if name != 'storage'}
    assert hits == {'device': 1, 'host': 1}  # row 2, then row 5
    # filled anew: the old caches go, a layer holding nothing adds no tier
    store.fill_caches([(None, 'x')], [HostBuffer(torch.empty(0).long()),
                                      DeviceCache(torch.tensor([9]))])
    assert list(store.tiers('x')) == ['device', 'storage']
    assert store.lookahead_depth == 0


def test_a_window_layer_asks_for_its_look_ahead():
    store = _store()
    store.fill_caches([(None, 'x')], [WindowCache(rows=4, lookahead=3)])
    assert list(store.tiers('x')) == ['device', 'storage']
    assert store.lookahead_depth == 3
    store.fill_caches([(None, 'x')], [WindowCache(rows=0, lookahead=2)])
    assert list(store.tiers('x')) == ['storage'] and \
        store.lookahead_depth == 2


class EvenRows:
    r"""A new kind of cache, written by a user: the even rows in host
    memory, under the name 'even'."""
    lookahead = 0

    def wrap(self, below, base, device, pinned):
        even = torch.arange(0, base.shape[0], 2)
        cache = fill_static(base, below, even, torch.device('cpu'), 'even')
        assert isinstance(cache, StaticCache)
        return cache


def test_a_cache_of_ones_own_is_one_class():
    store = _store()
    store.fill_caches([(None, 'x')], [EvenRows(),
                                      DeviceCache(torch.tensor([1]))])
    assert list(store.tiers('x')) == ['device', 'even', 'storage']
    ids = torch.tensor([1, 4, 7])
    assert torch.equal(store.gather('x', ids), X[ids])
    assert store.tiers('x')['even'].counters.hits == 1
