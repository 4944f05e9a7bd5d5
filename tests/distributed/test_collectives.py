import os
import time
from datetime import timedelta

import numpy as np
import pytest
import torch

from pyg_fastload.distributed import (
    Collectives,
    DistContext,
    DistributedError,
    PartitionedFeatureStore,
)
from pyg_fastload.distributed.parts import open_rank_part
from pyg_fastload.io import open_dataset_dir
from pyg_fastload.partition import partition_dataset

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(180)


def _collectives(seconds=30):
    return Collectives(DistContext.current(timedelta(seconds=seconds)))


def _exchange(rank, world):
    coll = _collectives()
    send = [torch.full((rank + r, 2), float(10 * rank + r))
            for r in range(world)]
    got = coll.exchange(send, 'features', 'test exchange')
    return [g.tolist() for g in got], coll.counters.snapshot()['features']


def test_exchange_sends_each_rank_its_rows_and_counts_bytes():
    results = run_ranks(_exchange, 3)
    for rank in range(3):
        status, (got, traffic) = results[rank]
        assert status == 'ok'
        # rank r sent (r + rank) rows of value 10 r + rank to this rank
        assert got == [[[10.0 * r + rank] * 2] * (r + rank)
                       for r in range(3)]
        rows_out = sum(rank + r for r in range(3) if r != rank)
        assert traffic == {'bytes_sent': rows_out * 8,
                           'bytes_received': rows_out * 8,
                           'messages': sum(1 for r in range(3)
                                           if r != rank and rank + r)}


def _skip_collective(rank, world, report):
    coll = _collectives(seconds=2)
    if rank == 1:
        if report:
            coll.report_failure('ValueError: bad batch 7')
        time.sleep(5)
        return 'skipped'
    started = time.monotonic()
    try:
        coll.max_int(1, 'agree on the steps per epoch')
    except DistributedError as exc:
        return str(exc), time.monotonic() - started
    return 'completed'


@pytest.mark.reliability(
    fault='a collective that never completes (a rank hangs or takes '
          'another path)',
    behaviour='ended by the timeout with an error naming the operation, '
              'and the rank if it reported its failure')
@pytest.mark.parametrize('report', [False, True])
def test_a_collective_that_never_completes_is_ended_by_the_timeout(report):
    results = run_ranks(_skip_collective, 2, report)
    message, seconds = results[0][1]
    assert "collective 'agree on the steps per epoch' did not complete " \
        "within 2s" in message
    assert seconds < 10
    if report:
        assert 'rank 1: ValueError: bad batch 7' in message
    else:
        assert 'no rank reported a failure' in message


def _killed(rank, world):
    coll = _collectives(seconds=20)
    if rank == 1:
        os._exit(3)  # killed: no report, no goodbye
    started = time.monotonic()
    try:
        coll.max_int(1, 'agree on the steps per epoch')
    except DistributedError as exc:
        return str(exc), time.monotonic() - started
    return 'completed'


@pytest.mark.reliability(
    fault='a rank killed mid-epoch',
    behaviour='the other ranks stop with an error naming the collective '
              'within the timeout')
def test_a_killed_rank_ends_the_others_within_the_timeout():
    results = run_ranks(_killed, 2)
    assert 1 not in results
    message, seconds = results[0][1]
    assert "'agree on the steps per epoch' did not complete" in message
    assert seconds < 25


@pytest.fixture(scope='module')
def hash_parts(tmp_path_factory, tiny_dir):
    dataset_dir, _ = tiny_dir
    root = tmp_path_factory.mktemp('dist')
    for name in ('a', 'b'):
        partition_dataset(dataset_dir, root / name, 2, 'hash',
                          progress=False)
    partition_dataset(dataset_dir, root / 'four', 4, 'hash', progress=False)
    return dataset_dir, root


def _remote_rows(rank, world, parts_dir):
    coll = _collectives()
    features, _, book, _ = open_rank_part(parts_dir, coll, progress=False)
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
        assert stats == {'requests': mine, 'bytes': mine * row_bytes}
        assert 0 < mine < 300


def _open(rank, world, dirs):
    coll = _collectives()
    try:
        open_rank_part(dirs[rank], coll, progress=False)
    except DistributedError as exc:
        return str(exc)
    return 'opened'


@pytest.mark.reliability(
    fault='ranks pointed at different partitionings, a missing part, or a '
          'world size that is not the number of parts',
    behaviour='a clear error on every rank at start-up, not a hang')
def test_start_up_checks_fail_on_every_rank(hash_parts, tmp_path):
    import shutil
    _, root = hash_parts
    results = run_ranks(_open, 2, [root / 'a', root / 'b'])
    for rank in range(2):
        assert 'different partitionings' in results[rank][1]
    results = run_ranks(_open, 2, [root / 'four', root / 'four'])
    for rank in range(2):
        assert 'has 4 parts but there are 2 ranks' in results[rank][1]
    broken = tmp_path / 'broken'
    shutil.copytree(root / 'a', broken)
    shutil.rmtree(broken / 'part-1')
    results = run_ranks(_open, 2, [broken, broken])
    for rank in range(2):
        message = results[rank][1]
        assert 'rank(s) [1] could not open their part' in message
        assert 'part 1 is not in this directory' in message


def _any_ids(rank, world, parts_dir, dataset_dir):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from pyg_fastload.config import FeatureCache
    coll = _collectives()
    cache = FeatureCache(host_budget='8KiB', policy='out_degree')
    features, _, book, _ = open_rank_part(parts_dir, coll, cache,
                                          progress=False)
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
