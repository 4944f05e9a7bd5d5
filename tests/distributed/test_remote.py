r"""The remote tier: a rank's rows of the other parts, fetched from their
owners (``PartitionedFeatureStore``), each once per gather, counted."""
from datetime import timedelta

import numpy as np
import pytest
import torch

from pyg_fastload.distributed import (
    Collectives,
    DistContext,
    PartitionedFeatureStore,
)
from pyg_fastload.distributed.rank_part import open_rank_part
from pyg_fastload.io import open_dataset_dir

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(180)


def _collectives(seconds=30):
    return Collectives(DistContext.current(timedelta(seconds=seconds)))


def _remote_rows(rank, world, parts_dir):
    coll = _collectives()
    features, _, book, _ = open_rank_part(parts_dir, coll)
    store = PartitionedFeatureStore(features, book, rank, coll)
    gen = torch.Generator().manual_seed(rank)
    ids = torch.randint(0, book.num_nodes, (300, ), generator=gen)
    ids = torch.cat([ids, ids[:50]])  # repeats
    rows = store.gather('x', ids)
    # each remote row is fetched once, however often it is asked for
    remote = int(ids[book.owner(ids) != rank].unique().numel())
    return (ids.numpy(), rows.numpy(), remote,
            coll.counters.snapshot()['features'],
            store.stats()['x']['remote'])


def test_remote_tier_serves_rows_of_the_original_graph(hash_parts):
    dataset_dir, root = hash_parts
    x = open_dataset_dir(dataset_dir).arrays['x']
    order = torch.argsort(torch.from_numpy(np.load(root / 'a' /
                                                   'new_id.npy')))
    results = run_ranks(_remote_rows, 2, root / 'a')
    remote = [results[rank][1][2] for rank in range(2)]
    row_bytes = x.size(1) * x.element_size()
    for rank in range(2):
        status, (ids, rows, _, traffic, stats) = results[rank]
        assert status == 'ok'
        ids, rows = torch.from_numpy(ids), torch.from_numpy(rows)
        assert torch.equal(rows, x[order[ids]])  # through the book
        # ids out (int64) and rows back, one message per direction
        mine, theirs = remote[rank], remote[1 - rank]
        assert traffic == {'bytes_sent': mine * 8 + theirs * row_bytes,
                           'bytes_received': theirs * 8 + mine * row_bytes,
                           'messages': 2}
        assert stats == {'requests': mine, 'hits': mine,
                         'bytes': mine * row_bytes}
        assert 0 < mine < 300


def _any_ids(rank, world, parts_dir, dataset_dir):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from pyg_fastload.config import FeatureCache
    coll = _collectives()
    cache = FeatureCache(host_budget='8KiB', policy='out_degree')
    features, _, book, _ = open_rank_part(parts_dir, coll, cache)
    store = PartitionedFeatureStore(features, book, rank, coll)
    x = open_dataset_dir(dataset_dir).arrays['x']
    order = torch.argsort(torch.from_numpy(np.load(parts_dir /
                                                   'new_id.npy')))

    # The same examples on every rank (each gather is a collective).
    @settings(derandomize=True, max_examples=40, deadline=None,
              database=None)
    @given(st.lists(st.integers(0, book.num_nodes - 1), max_size=60))
    def check(ids):
        ids = torch.tensor(ids, dtype=torch.long)
        assert torch.equal(store.gather('x', ids), x[order[ids]])

    check()
    stats = store.stats()['x']
    # every row this rank served, for itself or others, came from its
    # host buffer or its storage, and it served some to the other rank
    total = stats['host']['requests']
    served = stats['served']['cache'] + stats['served']['storage']
    return (stats['host']['hits'] + stats['storage']['requests'] == total,
            0 < served < total)


def test_partitioned_cache_returns_the_rows_for_any_ids(hash_parts):
    dataset_dir, root = hash_parts
    results = run_ranks(_any_ids, 2, root / 'a', dataset_dir)
    for rank in range(2):
        assert results[rank] == ('ok', (True, True))


def _cold_rows(rank, world, parts_dir, mode):
    from pyg_fastload.config import FeatureCache
    from pyg_fastload.distributed.cold_rows import ColdRows
    coll = _collectives()
    cache = FeatureCache(host_budget=0.3, policy='out_degree')
    features, _, book, meta = open_rank_part(parts_dir, coll, cache)
    cold = ColdRows(parts_dir, book, rank, coll, features, mode, meta)
    store = PartitionedFeatureStore(features, book, rank, coll, cold)
    gen = torch.Generator().manual_seed(rank)
    ids = torch.randint(0, book.num_nodes, (400, ), generator=gen)
    rows = store.gather('x', ids)
    remote = ids[book.owner(ids) != rank].unique()
    other = 1 - rank
    start, _ = book.part_range(other)
    cached = cold.cached[other][(None, 'x')][remote - start]
    stats = store.stats()['x']
    store.close()
    return (ids.numpy(), rows.numpy(), int(cached.sum()),
            int((~cached).sum()), stats.get('remote', {}).get('hits', 0),
            stats.get('remote_disk', {}).get('hits', 0),
            coll.counters.snapshot()['features']['bytes_received'])


@pytest.mark.reliability(
    fault="other parts' cold rows (in no cache of their owner) fetched "
          "through the owner, which reads its storage for them",
    behaviour="ranks on one machine read them from the owner's part files "
              "beside the exchange of the hot rows (DSP's direct cold "
              "reads): the same rows, only the cached ones cross ranks; "
              "cold_rows='owner' keeps the owner path")
@pytest.mark.parametrize('parts', ['a', 'source'])
def test_cold_rows_are_read_directly_on_one_machine(hash_parts, parts):
    dataset_dir, root = hash_parts
    x = open_dataset_dir(dataset_dir).arrays['x']
    order = torch.argsort(torch.from_numpy(np.load(root / parts /
                                                   'new_id.npy')))
    row_bytes = x.size(1) * x.element_size()
    for mode in ('auto', 'owner'):
        results = run_ranks(_cold_rows, 2, root / parts, mode)
        for rank in range(2):
            status, (ids, rows, hot, cold, remote, direct, received) = \
                results[rank]
            assert status == 'ok'
            ids, rows = torch.from_numpy(ids), torch.from_numpy(rows)
            assert torch.equal(rows, x[order[ids]])
            assert hot > 0 and cold > 0
            theirs = results[1 - rank][1]
            if mode == 'auto':  # only the cached rows come over the wire
                assert (remote, direct) == (hot, cold)
                assert received == theirs[2] * 8 + hot * row_bytes
            else:
                assert (remote, direct) == (hot + cold, 0)
