import threading

import pytest
import torch

from pyg_fastload import (FastLinkNeighborLoader, FastNeighborLoader,
                          FastNeighborSampler)
from pyg_fastload.config import SettingError, usable_cores
from pyg_fastload.loader.pipeline import StageError
from pyg_fastload.loader.sampling_pool import SamplingPool

from ..helpers import random_graph, wait_for_no_stage_threads


@pytest.fixture
def data():
    return random_graph(num_nodes=400, num_edges=4000)


def _node_batches(data, **kwargs):
    loader = FastNeighborLoader(data, [4, 3], batch_size=16, shuffle=True,
                                generator=torch.Generator().manual_seed(0),
                                **kwargs)
    return [(b.n_id, b.edge_index, b.x) for b in loader]


def test_batches_are_the_same_for_any_number_of_workers(data):
    plain = _node_batches(data, pipeline=False)
    for workers in range(1, usable_cores() + 1):
        pooled = _node_batches(data, pipeline=True, sampling_workers=workers)
        assert len(pooled) == len(plain) == 25
        for a, b in zip(plain, pooled):
            assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not wait_for_no_stage_threads()


def test_link_batches_are_the_same_with_a_pool(data):
    def epoch(**kwargs):
        loader = FastLinkNeighborLoader(
            data, [4, 3], edge_label_index=data.edge_index[:, :200],
            batch_size=32, neg_sampling='binary', shuffle=True,
            generator=torch.Generator().manual_seed(1), **kwargs)
        return [(b.n_id, b.edge_label_index, b.edge_label) for b in loader]

    plain, pooled = epoch(pipeline=False), epoch(pipeline=True,
                                                 sampling_workers=2)
    assert len(plain) == len(pooled) == 7
    for a, b in zip(plain, pooled):
        assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_a_free_worker_takes_the_oldest_batch_first():
    pool = SamplingPool(1, 0)
    release, order = threading.Event(), []
    blocked = pool.submit(0, lambda: release.wait(10))
    futures = [pool.submit(b, lambda b=b: order.append(b) or b)
               for b in (5, 3, 4, 1)]
    release.set()
    assert blocked.result(timeout=10)[0] is True
    assert [f.result(timeout=10)[0] for f in futures] == [5, 3, 4, 1]
    assert order == [1, 3, 4, 5]
    pool.close(timeout=5)
    assert not any(t.is_alive() for t in pool.threads)


class FailingSampler(FastNeighborSampler):
    def sample(self, seeds, generator=None, seed_time=None):
        raise ValueError('bad batch')


def test_a_failing_task_names_the_sampling_stage(data):
    loader = FastNeighborLoader(
        data, [4, 3], batch_size=8, pipeline=True, sampling_workers=2,
        neighbor_sampler=FailingSampler(data, [4, 3]))
    with pytest.raises(StageError, match='sampling stage') as info:
        for _ in loader:
            pass
    assert isinstance(info.value.__cause__, ValueError)
    assert not wait_for_no_stage_threads()


def test_leaving_an_epoch_early_stops_the_pool(data):
    loader = FastNeighborLoader(data, [4, 3], batch_size=8, pipeline=True,
                                sampling_workers=2)
    for i, _ in enumerate(loader):
        if i == 2:
            break
    assert not wait_for_no_stage_threads()


class OneOrderSampler(FastNeighborSampler):
    concurrent_batches = False


@pytest.mark.reliability(
    fault='`sampling_workers` below 1, or above 1 with a sampler that '
          'issues collectives (DSP, HopGNN)',
    behaviour='SettingError naming `sampling_workers` and the fix')
def test_bad_sampling_workers_name_the_argument(data):
    with pytest.raises(SettingError, match='sampling_workers'):
        FastNeighborLoader(data, [4, 3], sampling_workers=0)
    with pytest.raises(SettingError, match='use sampling_workers=1'):
        FastNeighborLoader(data, [4, 3], sampling_workers=2,
                           neighbor_sampler=OneOrderSampler(data, [4, 3]))
    loader = FastNeighborLoader(data, [4, 3], sampling_workers=1,
                                neighbor_sampler=OneOrderSampler(data,
                                                                 [4, 3]))
    assert loader.settings.sampling_workers == 1


class ThreadRecordingSampler(FastNeighborSampler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.threads = set()

    def sample(self, seeds, generator=None, seed_time=None):
        self.threads.add(threading.current_thread().name)
        return super().sample(seeds, generator, seed_time)


def test_the_pools_threads_sample(data):
    sampler = ThreadRecordingSampler(data, [4, 3])
    loader = FastNeighborLoader(data, [4, 3], batch_size=8, pipeline=True,
                                sampling_workers=2, run_ahead=4,
                                neighbor_sampler=sampler)
    assert sum(1 for _ in loader) == 50
    assert sampler.threads and sampler.threads <= {
        'pyg_fastload-sampling-0', 'pyg_fastload-sampling-1'}
