r"""ByteGNN's per-batch task graphs on the sampling pool: ready tasks served
oldest batch first and cheapest first (or FIFO), a hop's feature fetch run
while the next hop samples, failures and closing surfaced to the batch,
and the same batches as the single-thread path (node, heterogeneous, link;
hop-wise samplers of any kind)."""
import threading
from concurrent.futures import CancelledError

import pytest
import torch

from pyg_fastload import (FastLinkNeighborLoader, FastNeighborLoader,
                          FastNeighborSampler)
from pyg_fastload.loader import feature_join
from pyg_fastload.loader.pipeline import StageError
from pyg_fastload.loader.sampling_pool import ReadyTasks, SamplingPool
from pyg_fastload.sampling import neighbor_sampler as engine
from pyg_fastload.sampling.tasks import Work, current_runner

from ..helpers import random_graph, random_hetero_graph

WAIT = 20  # seconds any event is waited for at most (never reached)


@pytest.fixture
def data():
    return random_graph(num_nodes=400, num_edges=4000)


def test_ready_tasks_come_oldest_batch_first_then_cheapest():
    queue = ReadyTasks('priority')
    for dag, cost, name in ((2, 1.0, 'new cheap'), (0, 9.0, 'old dear'),
                            (1, 3.0, 'mid'), (0, 2.0, 'old cheap')):
        queue.push(dag, cost, name)
    assert [queue.pop() for _ in range(4)] == [
        'old cheap', 'old dear', 'mid', 'new cheap']
    fifo = ReadyTasks('fifo')
    for dag, cost, name in ((2, 1.0, 'a'), (0, 9.0, 'b'), (1, 3.0, 'c')):
        fifo.push(dag, cost, name)
    assert [fifo.pop() for _ in range(3)] == ['a', 'b', 'c']
    with pytest.raises(ValueError, match="'order' = 'lifo'"):
        ReadyTasks('lifo')


def _two_step_batch(order):
    r"""A batch whose graph has two steps of three draws each, recording
    the order the draws run in."""
    def steps():
        first = yield Work([lambda i=i: order.append(('hop 0', i))
                            for i in range(3)], [9.0, 1.0, 5.0])
        second = yield Work([lambda i=i: order.append(('hop 1', i))
                             for i in range(3)], [2.0, 7.0, 3.0])
        return len(first) + len(second)
    return lambda: current_runner().drive(steps())


@pytest.mark.parametrize('task_order,expected', [
    ('priority', [1, 2, 0, 0, 2, 1]),  # cheapest first, hop by hop
    ('fifo', [0, 1, 2, 0, 1, 2]),
])
def test_the_pool_runs_a_graphs_ready_tasks_in_its_order(task_order,
                                                         expected):
    order = []
    pool = SamplingPool(1, 0, order=task_order)
    try:
        assert pool.submit(0, _two_step_batch(order)).result(
            timeout=WAIT).out == 6
    finally:
        pool.close(timeout=5)
    assert [hop for hop, _ in order] == ['hop 0'] * 3 + ['hop 1'] * 3
    assert [i for _, i in order] == expected


class _Fetch:
    r"""A row fetch that records the ids it was given and signals its
    second call (the first hop's new rows)."""
    width = 4

    def __init__(self):
        self.ids, self.second = [], threading.Event()

    def begin(self, seeds):
        return None

    def __call__(self, ids, offset, arena):
        self.ids.append(ids)
        if len(self.ids) == 2:
            self.second.set()
        return {}


class _WaitingSampler(FastNeighborSampler):
    r"""Its second hop's draw waits for the first hop's rows to be
    fetched (and records whether they were)."""
    def expand(self, hop, frontier, generator):
        if hop == 1:
            self.fetched_meanwhile = self.fetch.second.wait(WAIT)
        return super().expand(hop, frontier, generator)


@pytest.mark.reliability(
    fault="features fetched only after the whole batch is sampled",
    behaviour="the first hop's rows are fetched while the second hop "
              "samples; every slice of n_id is fetched once, in order")
def test_a_hops_rows_are_fetched_while_the_next_hop_samples(data):
    fetch = _Fetch()
    sampler = _WaitingSampler(data, [4, 3])
    sampler.fetch = fetch
    seeds = torch.arange(0, 400, 9)
    pool = SamplingPool(2, 0, fetch=fetch)
    try:
        out = pool.submit(0, lambda: sampler.sample(
            seeds, torch.Generator().manual_seed(0))).result(
                timeout=WAIT).out
    finally:
        pool.close(timeout=5)
    assert sampler.fetched_meanwhile
    assert len(fetch.ids) == 3  # seeds, hop 1's and hop 2's new rows
    assert torch.equal(torch.cat(fetch.ids), out.node)
    assert torch.equal(fetch.ids[0], seeds)


class _FailingSampler(FastNeighborSampler):
    def expand(self, hop, frontier, generator):
        if hop == 1:
            raise ValueError('hop 1 failed')
        return super().expand(hop, frontier, generator)


@pytest.mark.reliability(
    fault="a failing hop or fetch task lost in a worker",
    behaviour="its error fails the batch's future and reaches the loader's "
              "consumer as a StageError")
def test_a_failing_task_reaches_the_batchs_consumer(data):
    seeds = torch.arange(0, 400, 9)
    pool = SamplingPool(2, 0)
    try:
        with pytest.raises(ValueError, match='hop 1 failed'):
            pool.submit(0, lambda: _FailingSampler(data, [4, 3]).sample(
                seeds)).result(timeout=WAIT)
    finally:
        pool.close(timeout=5)

    class Broken(_Fetch):
        def __call__(self, ids, offset, arena):
            raise OSError('fetch failed')
    pool = SamplingPool(2, 0, fetch=Broken())
    try:
        with pytest.raises(OSError, match='fetch failed'):
            pool.submit(0, lambda: FastNeighborSampler(data, [4]).sample(
                seeds)).result(timeout=WAIT)
    finally:
        pool.close(timeout=5)

    loader = FastNeighborLoader(
        data, [4, 3], batch_size=8, pipeline=True, sampling_workers=2,
        neighbor_sampler=_FailingSampler(data, [4, 3]))
    with pytest.raises(StageError, match='sampling stage') as info:
        for _ in loader:
            pass
    assert isinstance(info.value.__cause__, ValueError)


def test_closing_with_graphs_in_flight_fails_them_without_hanging(data):
    started, release = threading.Barrier(3, timeout=WAIT), threading.Event()

    class Held(FastNeighborSampler):
        def expand(self, hop, frontier, generator):
            if hop == 1:
                started.wait()
                release.wait(WAIT)
            return super().expand(hop, frontier, generator)

    sampler = Held(data, [4, 3])
    pool = SamplingPool(2, 0)
    futures = [pool.submit(b, lambda: sampler.sample(torch.arange(b, 40)))
               for b in range(3)]
    started.wait()  # both workers hold a graph at its second hop
    pool.close(timeout=0.1)  # bounded: the held draws keep running
    release.set()
    for future in futures:
        with pytest.raises(CancelledError):
            future.result(timeout=WAIT)
    for thread in pool.threads:
        thread.join(WAIT)
    assert not any(thread.is_alive() for thread in pool.threads)


def _slices_used(monkeypatch):
    r"""Counts the batches joined from fetched slices."""
    used = []
    slices = feature_join._slices

    def spy(*args, **kwargs):
        got = slices(*args, **kwargs)
        used.append(got is not None)
        return got
    monkeypatch.setattr(feature_join, '_slices', spy)
    return used


@pytest.mark.parametrize('task_order', ['priority', 'fifo'])
@pytest.mark.parametrize('chunks', [False, True])
def test_graph_batches_equal_the_single_thread_ones(data, monkeypatch,
                                                    task_order, chunks):
    if chunks:  # several draw tasks per hop
        monkeypatch.setattr(engine, 'CHUNK_NODES', 16)
    used = _slices_used(monkeypatch)

    def epoch(sampler, **kwargs):
        loader = FastNeighborLoader(
            data, [1, 1] if sampler == 'random_walk' else [4, 3],
            batch_size=16, shuffle=True,
            neighbor_sampler=sampler,
            generator=torch.Generator().manual_seed(0), **kwargs)
        loader.task_order = task_order
        return [(b.n_id, b.edge_index, b.e_id, b.x) for b in loader]

    for sampler in (None, 'labor', 'random_walk'):
        plain = epoch(sampler, pipeline=False)
        used.clear()
        pooled = epoch(sampler, pipeline=True, sampling_workers=2)
        assert len(pooled) == len(plain) == 25
        assert all(used) and len(used) == 25  # x joined from hop slices
        for a, b in zip(plain, pooled):
            assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_heterogeneous_graph_batches_equal_the_single_thread_ones(
        monkeypatch):
    data = random_hetero_graph()
    used = _slices_used(monkeypatch)

    def epoch(**kwargs):
        loader = FastNeighborLoader(
            data, [3, 2], input_nodes=('paper', None), batch_size=16,
            shuffle=True, generator=torch.Generator().manual_seed(0),
            **kwargs)
        return [(b['paper'].n_id, b['author'].n_id, b['paper'].x,
                 b['author'].x, b['author', 'writes', 'paper'].edge_index)
                for b in loader]

    plain = epoch(pipeline=False)
    used.clear()
    pooled = epoch(pipeline=True, sampling_workers=2)
    assert len(plain) == len(pooled) == 8
    assert used and all(used)  # every typed x joined from hop slices
    for a, b in zip(plain, pooled):
        assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_link_graph_batches_equal_the_single_thread_ones(data, monkeypatch):
    used = _slices_used(monkeypatch)

    def epoch(**kwargs):
        loader = FastLinkNeighborLoader(
            data, [4, 3], edge_label_index=data.edge_index[:, :200],
            batch_size=32, neg_sampling='binary', shuffle=True,
            generator=torch.Generator().manual_seed(1), **kwargs)
        return [(b.n_id, b.x, b.edge_label_index, b.edge_label)
                for b in loader]

    plain = epoch(pipeline=False)
    used.clear()
    pooled = epoch(pipeline=True, sampling_workers=2)
    assert len(plain) == len(pooled) == 7
    assert all(used) and len(used) == 7
    for a, b in zip(plain, pooled):
        assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_without_hop_tasks_the_loading_stage_gathers(data, monkeypatch):
    used = _slices_used(monkeypatch)

    def epoch(hop_tasks, **kwargs):
        loader = FastNeighborLoader(
            data, [4, 3], batch_size=16, shuffle=True,
            generator=torch.Generator().manual_seed(0), **kwargs)
        loader.hop_tasks = hop_tasks
        return [(b.n_id, b.x) for b in loader]

    plain = epoch(True, pipeline=False)
    used.clear()
    pooled = epoch(False, pipeline=True, sampling_workers=2)
    assert used == [False] * 25
    for a, b in zip(plain, pooled):
        assert all(torch.equal(x, y) for x, y in zip(a, b))


def test_a_replaced_feature_matrix_is_gathered_not_sliced(data):
    fetch = feature_join.RowFetch(data)
    ids = torch.tensor([3, 1, 4])
    rows = [(ids, fetch(ids, 0, None))]
    assert feature_join._slices(rows, ids, data, ['x'])[0]['x'][1].equal(
        data.x[ids])
    assert feature_join._slices(rows, ids.flip(0), data, ['x']) is None
    data.x = data.x + 1  # replaced after the fetch
    assert feature_join._slices(rows, ids, data, ['x']) is None
