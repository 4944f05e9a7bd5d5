import pytest
import torch

from pyg_fastload import FastNeighborLoader
from pyg_fastload.caching import open_dataset
from pyg_fastload.storage import DirectStorage, HostBuffer, TieredFeatureStore
from pyg_fastload.storage.read_accumulator import (AccessModel,
                                                   StorageAccumulator)

ROWS, DIM = 3000, 1024  # 4 KiB rows: one block each


@pytest.fixture(scope='module')
def table(tmp_path_factory):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(ROWS, DIM, generator=gen)
    path = tmp_path_factory.mktemp('accumulator') / 'x.bin'
    x.numpy().tofile(path)
    return x, str(path)


def _store(table, batches, model, max_bytes=2**28, host=None):
    x, path = table
    store = TieredFeatureStore()
    store.put_mmap_tensor(path, x.dtype, x.shape, 'x', storage='direct',
                          in_flight=4)
    if host is not None:
        store.fill_caches([(None, 'x')], [HostBuffer(host)])
    store.set_read_ahead(batches, max_pending_bytes=max_bytes)
    storage = store.tiers('x')['storage']
    if batches:
        storage.accumulator.model = model
    return store, storage


def _batches(count, size, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randperm(ROWS, generator=gen)[:size] for _ in range(count)]


def _run(store, batches, announce=True):
    r"""The loader's protocol: every batch announced ahead, then each
    retired and gathered in order; returns the gathered rows."""
    if announce:
        for ids in batches:
            store.announce(ids)
    out = []
    for ids in batches:
        store.retire(ids)
        out.append(store.gather('x', ids))
    return out


def test_the_model_solves_gids_equation_for_the_reads_needed():
    model = AccessModel()
    peak, overhead = 50_000.0, 0.002
    for n in (8, 64, 512, 4096):
        model.observe(n, overhead + n / peak)
    assert model.peak == pytest.approx(peak)
    assert model.overhead == pytest.approx(overhead)
    need = model.required(0.95)  # peak * overhead * 19 = 1900
    assert abs(need - 1900) <= 1
    assert model.rate(need) == pytest.approx(0.95 * peak, rel=1e-3)
    assert model.rate(need // 2) < 0.95 * peak


def test_the_model_needs_two_sizes_and_forgets_on_reset():
    model = AccessModel()
    model.observe(100, 0.01)
    model.observe(100, 0.02)
    assert not model.fitted  # one size: no slope
    with pytest.raises(RuntimeError, match='not fitted'):
        model.required(0.9)
    model.observe(300, 0.03)
    assert model.fitted
    model.reset()
    assert not model.fitted
    fixed = AccessModel(peak=1000.0, overhead=0.01)
    fixed.observe(10, 5.0)
    fixed.observe(20, 1.0)
    fixed.reset()
    assert (fixed.peak, fixed.overhead) == (1000.0, 0.01)


def test_noise_that_hides_the_slope_keeps_the_last_fit():
    model = AccessModel(window=4)
    model.observe(10, 0.011)
    model.observe(100, 0.020)
    before = (model.peak, model.overhead)
    model.observe(1000, 0.001)  # slower-than-nothing: slope < 0
    assert (model.peak, model.overhead) == before


@pytest.mark.reliability(
    fault='accumulator settings out of range (`max_batches`, `max_bytes`, '
          '`share`, a model with only `peak`)',
    behaviour='ValueError naming the argument and the allowed range')
@pytest.mark.parametrize('kwargs, name', [
    (dict(max_batches=0, max_bytes=1), 'max_batches'),
    (dict(max_batches=2, max_bytes=0), 'max_bytes'),
    (dict(max_batches=2, max_bytes=1, share=1.0), 'share'),
])
def test_bad_settings_name_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=f"'{name}'"):
        StorageAccumulator(**kwargs)
    with pytest.raises(ValueError, match="'peak'"):
        AccessModel(peak=1.0)


def test_small_batches_merge_the_next_batches_reads(table):
    x, _ = table
    # 20 reads per batch; 190 needed for 95%: each submission takes its
    # batch and the next (max_batches=3) two, never more.
    store, storage = _store(table, 3, AccessModel(1000.0, 0.01))
    batches = _batches(9, 20)
    for ids, rows in zip(batches, _run(store, batches)):
        assert torch.equal(rows, x[ids])
    stats = store.accumulator_stats()['x']
    assert stats['required_reads'] == 190
    assert stats['submissions'] == 3
    assert stats['merged_submissions'] == 3
    assert stats['merged_batches'] == 6
    assert stats['staged_served'] == 3 * 2 * 20  # batches 1, 2 of a group
    counters = storage.counters
    assert counters.requests == 9 * 20  # every row asked for, once
    # each submission read its three batches' distinct rows once
    assert counters.hits == sum(torch.unique(torch.cat(
        batches[i:i + 3])).numel() for i in (0, 3, 6))


def test_enough_reads_in_one_batch_are_not_merged(table):
    x, _ = table
    store, storage = _store(table, 4, AccessModel(1000.0, 0.001))  # 19
    batches = _batches(5, 50)
    for ids, rows in zip(batches, _run(store, batches)):
        assert torch.equal(rows, x[ids])
    stats = store.accumulator_stats()['x']
    assert stats['required_reads'] == 19
    assert (stats['submissions'], stats['merged_batches']) == (5, 0)


def test_merges_stop_at_the_staged_bytes(table):
    x, _ = table
    # room for 30 staged rows of 4 KiB: one more batch of 20, not two
    store, _ = _store(table, 8, AccessModel(1000.0, 1.0),
                      max_bytes=30 * DIM * 4)
    batches = _batches(6, 20, seed=1)
    staged = []
    for ids in batches:
        store.announce(ids)
    for ids in batches:
        store.retire(ids)
        assert torch.equal(store.gather('x', ids), x[ids])
        staged.append(store.accumulator_stats()['x']['staged_bytes'])
    assert max(staged) <= 30 * DIM * 4
    stats = store.accumulator_stats()['x']
    assert stats['merged_batches'] == 3 and stats['submissions'] == 3


def test_cached_rows_count_as_redirected_not_as_reads(table):
    x, _ = table
    hot = torch.arange(0, ROWS, 2)  # the host buffer holds even rows
    store, storage = _store(table, 3, AccessModel(1000.0, 0.01), host=hot)
    batches = _batches(6, 40, seed=2)
    for ids, rows in zip(batches, _run(store, batches)):
        assert torch.equal(rows, x[ids])
    even = sum(int((b % 2 == 0).sum()) for b in batches)
    stats = store.accumulator_stats()['x']
    assert stats['redirected'] == even
    assert storage.counters.requests == 6 * 40 - even


@pytest.mark.reliability(
    fault='an epoch left early while the accumulator holds batches read '
          'ahead (direct storage, `read_ahead`)',
    behaviour='the next epoch gets its own rows; the stale batches and '
              'their staged rows are dropped at its first batch')
def test_batches_of_an_epoch_left_early_are_dropped(table):
    x, _ = table
    store, _ = _store(table, 3, AccessModel(1000.0, 0.01))
    old = _batches(4, 20, seed=3)
    for ids in old:
        store.announce(ids)
    store.retire(old[0])  # merges old[1] and old[2], then the epoch ends
    assert torch.equal(store.gather('x', old[0]), x[old[0]])
    new = _batches(3, 20, seed=4)
    for ids, rows in zip(new, _run(store, new)):
        assert torch.equal(rows, x[ids])
    accumulator = store.tiers('x')['storage'].accumulator
    assert len(accumulator._queue) == 0
    stats = accumulator.stats()
    # the new epoch merged its own batches again (the old ones were dropped)
    assert stats['merged_submissions'] == 2
    assert stats['staged_served'] == 40


def test_the_probe_fits_the_model_without_counting_reads(table):
    x, path = table
    storage = DirectStorage(path, x.dtype, x.shape, in_flight=2)
    accumulator = StorageAccumulator(4, 2**20, probe_sizes=(4, 64, 512),
                                     probe_rounds=2)
    accumulator.probe(storage)
    assert accumulator.model.fitted
    assert storage.counters.requests == storage.counters.disk_bytes == 0


def test_the_loader_gets_the_same_batches_with_the_accumulator(tiny_dir):
    def epoch(read_ahead):
        features, graph = open_dataset(tiny_dir[0], storage='direct',
                                       read_ahead=read_ahead,
                                       host_budget='10%')
        if read_ahead:
            features.tiers('x')['storage'].accumulator.model = \
                AccessModel(1000.0, 1.0)  # always merge, up to 4 batches
        loader = FastNeighborLoader((features, graph), [5, 5],
                                    batch_size=16, shuffle=True,
                                    generator=torch.Generator().manual_seed(
                                        0), pipeline=False)
        return [b.x.clone() for b in loader], features

    plain, _ = epoch(0)
    merged, features = epoch(4)
    assert len(plain) == len(merged)
    assert all(torch.equal(a, b) for a, b in zip(plain, merged))
    stats = features.accumulator_stats()['x']
    # 4 batches sampled ahead: each submission serves its batch and 3 more
    assert stats['merged_batches'] == len(merged) - -(-len(merged) // 4)


def test_a_new_reads_in_flight_setting_refits_the_model(table):
    x, path = table
    storage = DirectStorage(path, x.dtype, x.shape, in_flight=4)
    storage.accumulator = StorageAccumulator(4, 2**20)
    for n in (10, 100):
        storage.accumulator.model.observe(n, 0.001 + n * 1e-5)
    assert storage.accumulator.model.fitted
    storage._set_in_flight(4)
    assert storage.accumulator.model.fitted
    storage._set_in_flight(8)
    assert not storage.accumulator.model.fitted


def test_a_merge_that_promises_little_is_skipped(table):
    x, _ = table
    # 19 reads needed; a batch has about 10: merging two would read at
    # 952 instead of 909 reads/s by the model, less than the 10% asked
    model = AccessModel(1000.0, 0.001)
    store, _ = _store(table, 4, model)
    batches = _batches(4, 10, seed=5)
    for ids, rows in zip(batches, _run(store, batches)):
        assert torch.equal(rows, x[ids])
    assert store.accumulator_stats()['x']['merged_batches'] == 0
    accumulator = store.tiers('x')['storage'].accumulator
    accumulator.min_gain = 0.01  # 4.8% is enough now
    for ids, rows in zip(batches, _run(store, batches)):
        assert torch.equal(rows, x[ids])
    assert store.accumulator_stats()['x']['merged_batches'] == 2


def test_a_run_of_similar_submissions_keeps_the_probes_spread():
    model = AccessModel()
    peak, overhead = 50_000.0, 0.0005
    for n in (4, 16, 64, 256, 1024):  # the probe
        model.observe(n, overhead + n / peak)
    for i in range(100):  # then batches of about 4,800 reads, whose noise
        n = 4700 + 2 * i  # looks like a much steeper slope among them
        model.observe(n, overhead + n / peak + (n - 4800) * 1e-5)
    assert model.peak == pytest.approx(peak, rel=0.1)
    assert model.required(0.95) == pytest.approx(
        peak * overhead * 19, rel=0.3)
