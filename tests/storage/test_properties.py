r"""Property-based checks of the tiered store: whatever the budgets, modes
and ids, every row equals its source and the per-tier counters add up."""
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyg_fastload.caching import configure_caches
from pyg_fastload.config import FeatureCache
from pyg_fastload.storage import TieredFeatureStore

ROWS = 60
X = torch.randn(ROWS, 5, generator=torch.Generator().manual_seed(0))


@settings(max_examples=60, deadline=None)
@given(st.floats(0, 1), st.floats(0, 1), st.sampled_from(['static',
                                                         'window']),
       st.lists(st.lists(st.integers(0, ROWS - 1), max_size=40),
                min_size=1, max_size=4),
       st.integers(0, 2**31))
def test_rows_equal_their_source_and_counters_add_up(host, device, mode,
                                                      batches, seed):
    store = TieredFeatureStore()
    store.put_tensor(X, group_name=None, attr_name='x', index=None)
    scores = torch.rand(ROWS, generator=torch.Generator().manual_seed(seed))
    configure_caches(store, FeatureCache(host_budget=host,
                                         device_budget=device,
                                         device_cache=mode),
                     scores=scores.double())
    requested = 0
    for ids in batches:
        ids = torch.tensor(ids, dtype=torch.long)
        store.announce(ids.unique())
        store.retire(ids.unique())
        assert torch.equal(store.gather('x', ids), X[ids])
        requested += ids.numel()
    stats = store.stats()['x']
    tiers = [t for t in ('device', 'host') if t in stats] + ['storage']
    # each tier is asked what the faster ones missed; all rows are served
    asked = requested
    for tier in tiers:
        assert stats[tier]['requests'] == asked
        asked -= stats[tier]['hits']
    assert asked == 0
