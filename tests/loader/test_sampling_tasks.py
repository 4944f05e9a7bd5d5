r"""ByteGNN's sampling tasks: a large hop is drawn as chunk tasks, the same
batch whichever threads run them, spread over the pool's workers only as
wide as the pool's width, cheapest first, failures and closing surfaced."""
import threading
import time
from concurrent.futures import CancelledError

import pytest
import torch

from pyg_fastload import FastNeighborLoader, FastNeighborSampler
from pyg_fastload.loader.sampling_pool import SamplingPool
from pyg_fastload.sampling import LayerWiseSampler
from pyg_fastload.sampling import neighbor_sampler as engine

from ..helpers import random_graph


@pytest.fixture
def data():
    return random_graph(num_nodes=400, num_edges=4000)


@pytest.fixture
def small_chunks(monkeypatch):
    r"""Chunks of 16 frontier nodes, so small graphs are split too."""
    monkeypatch.setattr(engine, 'CHUNK_NODES', 16)


def _same(a, b):
    return all(torch.equal(x, y) for x, y in zip(
        (a.node, a.row, a.col, a.edge), (b.node, b.row, b.col, b.edge)))


@pytest.mark.reliability(
    fault="a batch's chunk tasks drawing from the running thread's stream "
          "(batches that depend on the number of workers)",
    behaviour='the same batch inline, on a pool of 2 and through the '
              'pipelined loader with 1 or 2 workers')
def test_chunked_batches_are_the_same_on_any_threads(data, small_chunks):
    sampler = FastNeighborSampler(data, [4, 3])
    seeds = torch.arange(0, 400, 7)

    def sample():
        return sampler.sample(seeds, torch.Generator().manual_seed(3))

    inline = sample()
    pool = SamplingPool(2, 0)
    try:
        pooled = [pool.submit(0, sample).result(timeout=30)[0]
                  for _ in range(3)]
    finally:
        pool.close(timeout=5)
    assert all(_same(inline, out) for out in pooled)
    unchunked = FastNeighborSampler(data, [4, 3])
    unchunked.hop_tasks = False  # one draw per hop: another stream
    assert not _same(inline, unchunked.sample(
        seeds, torch.Generator().manual_seed(3)))

    def epoch(**kwargs):
        loader = FastNeighborLoader(
            data, [4, 3], batch_size=64, shuffle=True,
            generator=torch.Generator().manual_seed(0), **kwargs)
        return [(b.n_id, b.edge_index, b.e_id) for b in loader]

    plain = epoch(pipeline=False)
    for workers in (1, 2):
        pooled = epoch(pipeline=True, sampling_workers=workers)
        assert len(pooled) == len(plain) == 7
        for a, b in zip(plain, pooled):
            assert all(torch.equal(x, y) for x, y in zip(a, b))


def _chunk_threads(data, width, hold):
    r"""The threads that drew each chunk of one batch sampled on a pool of
    2 at :obj:`width`; every chunk calls :obj:`hold` first."""
    sampler = FastNeighborSampler(data, [-1])
    threads, expand = [], sampler.expand

    def recorded(hop, frontier, gen):
        threads.append(threading.get_ident())
        hold()
        return expand(hop, frontier, gen)

    sampler.expand = recorded
    pool = SamplingPool(2, 0)
    pool.set_width(width)
    try:
        pool.submit(0, lambda: sampler.sample(torch.arange(64))).result(
            timeout=30)
    finally:
        pool.close(timeout=5)
    return threads


def test_chunks_spread_over_the_pool_as_wide_as_it_allows(data,
                                                          small_chunks):
    # width 2: a free worker draws chunks beside the batch's own worker;
    # the barrier breaks (and the batch fails) if only one thread draws
    meet = threading.Barrier(2, timeout=20)
    threads = _chunk_threads(data, 2, meet.wait)
    assert len(threads) == 4 and len(set(threads)) == 2
    # width 1 (the trainer is busy): the batch's worker draws them all,
    # though each chunk leaves the idle worker time to take the next
    threads = _chunk_threads(data, 1, lambda: time.sleep(0.1))
    assert len(threads) == 4 and len(set(threads)) == 1


def test_a_batch_runs_its_cheapest_chunks_first():
    pool = SamplingPool(1, 0)
    order = []

    def batch():
        from pyg_fastload.sampling.tasks import current_runner
        tasks = [lambda i=i: order.append(i) or i for i in range(5)]
        return current_runner().run(tasks, [9.0, 1.0, 5.0, 3.0, 4.0])

    try:
        result = pool.submit(0, batch).result(timeout=30).out
    finally:
        pool.close(timeout=5)
    assert result == [0, 1, 2, 3, 4]  # results in task order
    assert order == [1, 3, 4, 2, 0]  # ByteGNN: cheapest first


@pytest.mark.reliability(
    fault="a failing chunk task lost, or a batch waiting forever for "
          "chunks a closing pool dropped",
    behaviour="the chunk's error fails the batch's future; closing the "
              "pool fails a waiting batch with CancelledError")
def test_chunk_failures_and_closing_reach_the_batch():
    pool = SamplingPool(1, 0)

    def failing():
        from pyg_fastload.sampling.tasks import current_runner

        def boom():
            raise RuntimeError('chunk 2 failed')
        return current_runner().run([lambda: 0, lambda: 1, boom],
                                    [1.0, 1.0, 1.0])

    try:
        with pytest.raises(RuntimeError, match='chunk 2 failed'):
            pool.submit(0, failing).result(timeout=30)
    finally:
        pool.close(timeout=5)

    pool = SamplingPool(1, 0)
    started, release = threading.Event(), threading.Event()

    def waiting():
        from pyg_fastload.sampling.tasks import current_runner

        def first():
            started.set()
            release.wait(20)
        return current_runner().run([first, lambda: 1], [1.0, 1.0])

    future = pool.submit(0, waiting)
    assert started.wait(20)
    pool.close()  # drops the queued second chunk
    release.set()
    with pytest.raises(CancelledError):
        future.result(timeout=30)


def test_layer_wise_draws_are_never_split(data, small_chunks):
    seeds = torch.arange(0, 400, 3)
    split = LayerWiseSampler(data, [200, 300])
    whole = LayerWiseSampler(data, [200, 300])
    whole.hop_tasks = True  # would split each layer's single draw
    a = split.sample(seeds, torch.Generator().manual_seed(1))
    b = whole.sample(seeds, torch.Generator().manual_seed(1))
    # one draw of 200 edges over the whole frontier, not 200 per chunk
    assert a.num_sampled_edges[0] <= 200 < b.num_sampled_edges[0]
