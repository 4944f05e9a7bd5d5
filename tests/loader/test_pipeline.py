import gc
import itertools
import threading
import time

import pytest
import torch

from pyg_fastload import FastNeighborLoader, FastNeighborSampler
from pyg_fastload.caching import configure_caches
from pyg_fastload.config import FeatureCache
from pyg_fastload.graph.topology import CSCTopology
from pyg_fastload.loader import auto_pipeline
from pyg_fastload.loader.auto_pipeline import (AUTO_MIN_BATCHES,
                                              PIPELINE_TOLERANCE)
from pyg_fastload.loader.pipeline import (DeviceTransfer, StageError,
                                          map_tensors)
from pyg_fastload.storage import CSCGraphStore, TieredFeatureStore

from ..helpers import (random_graph, requires_cuda, stage_threads,
                       wait_for_no_stage_threads)


@pytest.fixture
def data():
    return random_graph(num_nodes=400, num_edges=4000)


def batches(data, pipeline, seed=0, **kwargs):
    torch.manual_seed(seed)
    loader = FastNeighborLoader(data, [4, 3], batch_size=32, shuffle=True,
                                pipeline=pipeline, **kwargs)
    return [(b.n_id, b.edge_index, b.x) for b in loader]


def test_pipelined_equals_sequential(data):
    a, b = batches(data, True), batches(data, False)
    assert len(a) == len(b) == 13
    for (n1, e1, x1), (n2, e2, x2) in zip(a, b):
        assert torch.equal(n1, n2) and torch.equal(e1, e2)
        assert torch.equal(x1, x2)
    c = batches(data, True, seed=1)
    assert not all(torch.equal(x[0], y[0]) for x, y in zip(a, c))


class CountingSampler(FastNeighborSampler):
    def __init__(self, *args, fail_at=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0
        self.fail_at = fail_at

    def sample_from_nodes(self, inputs, **kwargs):
        self.calls += 1
        if self.calls == self.fail_at:
            raise ValueError('bad batch')
        return super().sample_from_nodes(inputs, **kwargs)


def test_queues_bound_the_batches_in_flight(data):
    sampler = CountingSampler(data, [4, 3])
    loader = FastNeighborLoader(data, [4, 3], batch_size=8,
                                neighbor_sampler=sampler, queue_capacity=2,
                                pipeline=True)
    iterator = iter(loader)
    for consumed in range(1, 6):
        next(iterator)
        time.sleep(0.1)  # a slow model: the stages run ahead and block
        # In flight: 2 in each queue plus one in each stage's hands.
        assert sampler.calls <= consumed + 2 + 2 + 2
    assert iterator.shared.loaded.qsize() <= 2
    assert iterator.shared.sampled.qsize() <= 2
    iterator.close()
    assert not wait_for_no_stage_threads()


@pytest.mark.reliability(
    fault='an exception inside the sampling stage',
    behaviour='`StageError` naming the stage, the original chained')
def test_sampling_failure_names_the_stage(data):
    sampler = CountingSampler(data, [4, 3], fail_at=3)
    loader = FastNeighborLoader(data, [4, 3], batch_size=8,
                                neighbor_sampler=sampler, pipeline=True)
    with pytest.raises(StageError, match='sampling stage') as info:
        for _ in loader:
            pass
    assert info.value.stage == 'sampling'
    assert isinstance(info.value.__cause__, ValueError)
    assert not wait_for_no_stage_threads()


def test_loading_failure_names_the_stage(data):
    def transform(batch):
        raise KeyError('no such feature')

    loader = FastNeighborLoader(data, [4, 3], batch_size=8,
                                transform=transform, pipeline=True)
    with pytest.raises(StageError, match='feature loading stage'):
        next(iter(loader))
    assert not wait_for_no_stage_threads()


@pytest.mark.reliability(
    fault='`break`, an exception in the loop, or dropping the iterator',
    behaviour='both stage threads stop')
def test_break_interrupt_and_deletion_stop_every_thread(data):
    loader = FastNeighborLoader(data, [4, 3], batch_size=8, pipeline=True)
    for i, _ in enumerate(loader):
        if i == 2:
            break
    assert not wait_for_no_stage_threads()
    with pytest.raises(KeyboardInterrupt):
        for i, _ in enumerate(loader):
            if i == 1:
                raise KeyboardInterrupt
    assert not wait_for_no_stage_threads()
    iterator = iter(loader)
    next(iterator)
    del iterator, loader
    assert not wait_for_no_stage_threads()


@pytest.mark.parametrize('pipeline', [True, False])
def test_time_breakdown_sums_to_the_epoch(data, pipeline):
    loader = FastNeighborLoader(data, [4, 3], batch_size=16,
                                pipeline=pipeline)
    start = time.perf_counter()
    for _ in loader:
        time.sleep(0.01)  # the "model"
    wall = time.perf_counter() - start
    times = loader.time_breakdown
    assert times['batches'] == len(loader)
    assert times['sampling'] > 0 and times['feature_loading'] > 0
    assert times['model'] >= 0.01 * (len(loader) - 1)
    assert times['epoch'] == pytest.approx(times['waiting'] + times['model'])
    assert abs(times['epoch'] - wall) <= 0.1 * wall + 0.05


AUTO_SWITCH_AT = AUTO_MIN_BATCHES + 2  # the first batch is not judged
#: The batch before which 'auto' judges the pipeline (its first batch
#: fills it).
AUTO_JUDGED_AT = AUTO_SWITCH_AT + 1 + AUTO_MIN_BATCHES


def _loading_takes(seconds, where='anywhere'):
    r"""A transform that makes loading a batch take :obj:`seconds` longer
    anywhere, or only in the pipeline's threads ('stage')."""
    def transform(batch):
        stage = threading.current_thread().name.startswith('pyg_fastload')
        if where == 'anywhere' or stage:
            time.sleep(seconds)
        return batch
    return transform


class FakeClock:
    r"""What ``'auto'`` judges by (:func:`read_epoch`), on a fake clock, so
    the tests decide on given costs instead of measured ones: every batch
    the consumer takes costs :obj:`load` seconds of sampling and loading,
    and the consumer its model step (:obj:`model` seconds, the first
    :obj:`first_step`) plus the loading when it ran in its own thread, or
    :obj:`wait` seconds waiting for a pipelined batch."""
    def __init__(self, monkeypatch, load, model=0.0, wait=0.0,
                 first_step=None):
        self.load, self.model, self.wait = load, model, wait
        self.first_step = model if first_step is None else first_step
        self.spent = {}  # id(breakdown): [batches, loading, consumer]
        monkeypatch.setattr(auto_pipeline, 'read_epoch', self.read)

    def took(self, epoch):
        r"""The consumer took a batch of :obj:`epoch` (an AutoIterator) and
        ran its step."""
        spent = self.spent.setdefault(id(epoch.first.breakdown), [0, 0., 0.])
        spent[1] += self.load
        spent[2] += (self.first_step if spent[0] == 0 else self.model) + (
            self.wait if epoch.pipelined else self.load)
        spent[0] += 1

    def read(self, breakdown, clock):
        batches, loading, consumer = self.spent.get(id(breakdown), (0, 0, 0))
        assert breakdown['batches'] == batches  # every batch accounted
        return batches, loading, consumer


def _epoch(loader, clock):
    r"""Runs an epoch of :obj:`loader` on :obj:`clock`: the batches, and
    whether each came from the pipeline's threads."""
    epoch = iter(loader)
    served, pipelined = [], []
    for batch in epoch:
        served.append((batch.n_id, batch.edge_index, batch.x))
        pipelined.append(epoch.pipelined)
        clock.took(epoch)
    return served, pipelined


def _sequential_batches(data, seed, **kwargs):
    torch.manual_seed(seed)
    return [(b.n_id, b.edge_index, b.x) for b in FastNeighborLoader(
        data, [4, 3], shuffle=True, pipeline=False, **kwargs)]


def _same(served, expected):
    assert len(served) == len(expected)
    for got, want in zip(served, expected):
        assert all(torch.equal(a, b) for a, b in zip(got, want))


def test_auto_stays_in_the_consumers_thread_beside_a_slow_model(
        data, monkeypatch):
    slow = FastNeighborLoader(data, [4, 3], batch_size=64)
    assert len(slow) >= AUTO_SWITCH_AT
    assert slow.pipeline == 'auto'
    # One batch first, too few to judge: its one-off costs (first-call
    # allocations) stay out of the judged epoch, as in a long real epoch.
    next(iter(slow))
    assert slow._auto_decision is None
    # a model far slower than loading: loading is 2 % of the epoch
    _, pipelined = _epoch(slow, FakeClock(monkeypatch, load=0.01, model=0.5))
    assert not any(pipelined) and slow._auto_decision is False
    assert type(iter(slow)).__name__ == 'SequentialIterator'
    with pytest.raises(ValueError, match="'pipeline'"):
        FastNeighborLoader(data, [4, 3], pipeline='sometimes')


@pytest.mark.parametrize('workers', [1, 2])
def test_auto_moves_to_the_pipeline_when_it_hides_loading(data, workers,
                                                          monkeypatch):
    torch.manual_seed(3)
    loader = FastNeighborLoader(data, [4, 3], batch_size=32, shuffle=True,
                                sampling_workers=workers)
    assert len(loader) > AUTO_JUDGED_AT
    # Loading and the model take 30 ms each: overlapped in the pipeline.
    served, pipelined = _epoch(loader, FakeClock(monkeypatch, load=0.03,
                                                 model=0.03))
    assert pipelined == [i + 1 >= AUTO_SWITCH_AT for i in range(len(loader))]
    assert loader._auto_decision is True
    assert type(iter(loader)).__name__ == 'PipelineIterator'
    # The same batches as an epoch in the consumer's thread, across the
    # switch (one source of batches, in order):
    _same(served, _sequential_batches(data, 3, batch_size=32))


# The consumer's time per batch in the pipeline over its own thread's:
# kept within the tolerance, given up past it.
@pytest.mark.parametrize('slower, kept', [
    (1 + PIPELINE_TOLERANCE / 2, True), (1 + 2 * PIPELINE_TOLERANCE, False),
    (5.0, False)])
def test_auto_keeps_the_pipeline_within_its_tolerance(data, monkeypatch,
                                                      slower, kept):
    loader = FastNeighborLoader(data, [4, 3], batch_size=24)
    # in its own thread the consumer only loads (10 ms a batch)
    clock = FakeClock(monkeypatch, load=0.01, wait=0.01 * slower)
    _, pipelined = _epoch(loader, clock)
    # batches AUTO_SWITCH_AT to AUTO_JUDGED_AT - 1 were judged in the
    # pipeline (then, given up, what it had in flight is served)
    assert pipelined.index(True) == AUTO_SWITCH_AT - 1
    assert all(pipelined[AUTO_SWITCH_AT - 1:AUTO_JUDGED_AT - 1])
    assert pipelined[-1] == kept and loader._auto_decision is kept


@pytest.mark.parametrize('workers', [1, 2])
def test_auto_returns_to_the_consumers_thread_if_the_pipeline_is_slower(
        data, workers, monkeypatch):
    torch.manual_seed(4)
    loader = FastNeighborLoader(data, [4, 3], batch_size=24, shuffle=True,
                                sampling_workers=workers)
    assert len(loader) > AUTO_JUDGED_AT + 3
    # 10 ms in the consumer's thread, 50 ms waiting for the pipeline
    served, pipelined = _epoch(loader, FakeClock(monkeypatch, load=0.01,
                                                 wait=0.05))
    # judged in the pipeline; then what it had in flight is served
    assert pipelined[AUTO_SWITCH_AT - 1:AUTO_JUDGED_AT - 1] == \
        [True] * (AUTO_JUDGED_AT - AUTO_SWITCH_AT)
    assert not any(pipelined[:AUTO_SWITCH_AT - 1])
    assert not pipelined[-1] and loader._auto_decision is False
    # The batches in flight were served, in order, before going back:
    _same(served, _sequential_batches(data, 4, batch_size=24))
    assert loader.time_breakdown['batches'] == len(loader)
    assert type(iter(loader)).__name__ == 'SequentialIterator'


@pytest.mark.parametrize('stop', ['close', 'drop'])
def test_auto_stops_the_pipeline_it_started(data, stop, monkeypatch):
    before = set(stage_threads())  # earlier tests' threads may still stop
    loader = FastNeighborLoader(data, [4, 3], batch_size=16)
    clock = FakeClock(monkeypatch, load=0.01)  # loading is all the time
    epoch = iter(loader)
    for _ in range(AUTO_SWITCH_AT + 1):
        next(epoch)
        clock.took(epoch)
    assert epoch.pipelined and set(stage_threads()) - before
    if stop == 'close':
        epoch.close(timeout=5.0)
    else:
        del epoch
    deadline = time.monotonic() + 10.0
    while set(stage_threads()) - before and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.02)
    assert not set(stage_threads()) - before


def test_auto_leaves_the_first_step_out_of_its_judgement(data, monkeypatch):
    loader = FastNeighborLoader(data, [4, 3], batch_size=32)
    # a first step's one-off cost (e.g. lazy set-up: judged with the
    # others, loading would be 7 % of the time), then 30 ms steps
    _, pipelined = _epoch(loader, FakeClock(
        monkeypatch, load=0.03, model=0.03, first_step=2.0))
    assert pipelined[-1] and loader._auto_decision is True


@pytest.mark.parametrize('where', ['anywhere', 'stage'])
def test_auto_serves_the_batches_sampled_ahead_across_switches(
        where, monkeypatch):
    data = random_graph(num_features=8)
    store = TieredFeatureStore()
    store.put_tensor(data.x, group_name=None, attr_name='x', index=None)
    configure_caches(store, FeatureCache(device_budget=0.2,
                                         device_cache='window', window=3),
                     reserve_bytes=2**30)
    graph = CSCGraphStore(
        CSCTopology.from_edge_index(data.edge_index, data.num_nodes))
    loader = FastNeighborLoader((store, graph), [3, 2], batch_size=10)
    assert len(loader) > AUTO_JUDGED_AT + 6
    # loading (60 ms) hidden behind the model (20 ms) in the pipeline, or
    # only slower there ('stage')
    clock = FakeClock(monkeypatch, load=0.06, model=0.02) \
        if where == 'anywhere' else FakeClock(monkeypatch, load=0.01,
                                              wait=0.06)
    epoch = iter(loader)
    seen, pipelined = [], []
    for batch in epoch:
        assert torch.equal(batch.x, data.x[batch.n_id])
        seen.append(batch.n_id[:batch.batch_size])
        pipelined.append(epoch.pipelined)
        clock.took(epoch)
    # The 3 batches sampled ahead for the window came first:
    assert pipelined.index(True) == AUTO_SWITCH_AT - 1 + 3
    assert pipelined[-1] == (where == 'anywhere')  # kept, or slower
    assert torch.equal(torch.cat(seen), torch.arange(data.num_nodes))
    cache = store._entries[(None, 'x')].device
    assert int(cache.pending.sum()) == 0  # every announced batch retired


def test_auto_decides_on_an_epoch_cut_short(data):
    # Lightning's limit_train_batches stops every epoch early.
    loader = FastNeighborLoader(data, [4, 3], batch_size=8)
    assert len(loader) > AUTO_SWITCH_AT
    list(itertools.islice(iter(loader), 2))  # too few batches to judge
    assert loader._auto_decision is None
    assert type(iter(loader)).__name__ == 'AutoIterator'
    # Too few to judge within the epoch, enough to judge after it:
    list(itertools.islice(iter(loader), AUTO_MIN_BATCHES))
    assert loader._auto_decision is None
    assert type(iter(loader)).__name__ == 'PipelineIterator'
    assert loader._auto_decision is True


def test_map_tensors_reaches_every_tensor(data):
    nested = (torch.ones(2), [torch.zeros(1), 3], {'a': torch.ones(1)}, 'x')
    doubled = map_tensors(nested, lambda t: t + 1)
    assert torch.equal(doubled[0], torch.full((2, ), 2.0))
    assert torch.equal(doubled[1][0], torch.ones(1)) and doubled[1][1] == 3
    assert torch.equal(doubled[2]['a'], torch.full((1, ), 2.0))
    assert doubled[3] == 'x'
    copy = data.clone()
    assert map_tensors(copy, lambda t: t * 0) is copy  # in place
    assert not copy.x.any() and not copy.edge_index.any()


@pytest.mark.parametrize('device', [None, torch.device('cpu')])
def test_transfer_without_cuda_is_a_no_op(device):
    transfer = DeviceTransfer(device)
    assert not transfer.active
    batch = torch.arange(3)
    moved = transfer.start(batch)
    assert moved == (batch, None)
    assert transfer.finish(moved) is batch


@pytest.mark.parametrize('pipeline', [True, False])
def test_cpu_device_leaves_batches_unchanged(data, pipeline):
    plain = batches(data, pipeline)
    on_cpu = batches(data, pipeline, device='cpu')
    for a, b in zip(plain, on_cpu, strict=True):
        assert all(torch.equal(x, y) and y.device.type == 'cpu'
                   for x, y in zip(a, b))
    loader = FastNeighborLoader(data, [4, 3], batch_size=32, device='cpu',
                                pipeline=pipeline)
    list(loader)
    assert 0 <= loader.time_breakdown['transfer']


@pytest.mark.parametrize('device, match', [
    ('bogus', 'not a torch device'),
    ('meta', 'not supported'),
    pytest.param('cuda', 'needs CUDA', marks=pytest.mark.skipif(
        torch.cuda.is_available(), reason='CUDA is available')),
])
def test_invalid_device(data, device, match):
    with pytest.raises(ValueError, match=f"'device=.*{match}"):
        FastNeighborLoader(data, [4, 3], device=device)


@requires_cuda
@pytest.mark.parametrize('pipeline', [True, False])
def test_cuda_device_gets_identical_batches(data, pipeline):
    on_cpu = batches(data, pipeline)
    on_cuda = batches(data, pipeline, device='cuda')
    for a, b in zip(on_cpu, on_cuda, strict=True):
        for x, y in zip(a, b):
            assert y.is_cuda
            assert torch.equal(x, y.cpu())
    loader = FastNeighborLoader(data, [4, 3], batch_size=32, device='cuda',
                                pipeline=pipeline)
    for batch in loader:
        # The model's stream reads the batch after the copy completed:
        assert torch.equal(batch.x.cpu(), data.x[batch.n_id.cpu()])
    assert loader.time_breakdown['transfer'] > 0
    with pytest.raises(ValueError, match='num_workers=0'):
        FastNeighborLoader(data, [4, 3], device='cuda', num_workers=1)


@pytest.mark.reliability(
    fault='dropping the iterator while a transform hangs',
    behaviour=('returns at once (was 10 s per thread); the thread ends when '
               'the transform returns'))
def test_dropping_the_iterator_while_a_transform_hangs_is_prompt(
        data, monkeypatch):
    release, hanging, calls = threading.Event(), threading.Event(), []

    def transform(batch):
        calls.append(1)
        if len(calls) > 1:  # every batch after the first hangs
            hanging.set()
            release.wait(30)
        return batch

    loader = FastNeighborLoader(data, [4, 3], batch_size=8, pipeline=True,
                                transform=transform)
    iterator = iter(loader)
    next(iterator)
    assert hanging.wait(30)  # a stage thread is inside the transform
    joined, join = [], threading.Thread.join

    def recorded_join(thread, timeout=None):
        joined.append(thread.name)
        return join(thread, timeout)

    monkeypatch.setattr(threading.Thread, 'join', recorded_join)
    del iterator
    gc.collect()
    # nothing waited for a stage thread (was: a join of 10 s per thread)
    assert not [name for name in joined if name.startswith('pyg_fastload-')]
    assert stage_threads()  # one is still inside the transform
    release.set()  # the transform returns: its thread stops, none leaks
    assert not wait_for_no_stage_threads()


@pytest.mark.reliability(
    fault=('the loader deleted while its iterator is kept; or a temporary '
           'loader, `next(iter(Loader(...)))`'),
    behaviour=('the stage threads never keep the loader alive: dropping the '
               'iterator (or the loader with it) stops them, and a kept '
               'iterator keeps working'))
def test_threads_do_not_keep_the_loader_alive(data):
    import weakref
    loader = FastNeighborLoader(data, [4, 3], batch_size=8, pipeline=True)
    alive = weakref.ref(loader)
    iterator = iter(loader)
    next(iterator)
    del loader
    gc.collect()
    next(iterator)  # a kept iterator keeps working (and the loader alive)
    kept = alive() is not None
    assert kept
    del iterator
    assert not wait_for_no_stage_threads()  # (a join in flight holds it)
    gc.collect()
    assert alive() is None  # nothing else held it: not the stage threads
    # a temporary loader: the idiom must keep working through collections
    iterator = iter(FastNeighborLoader(data, [4, 3], batch_size=8,
                                       pipeline=True))
    gc.collect()
    assert len(list(iterator)) == 50  # 400 nodes, 8 per batch
    assert not wait_for_no_stage_threads()


@pytest.mark.reliability(
    fault=('Ctrl-C while waiting for a batch, the iterator kept '
           '(interactive session)'),
    behaviour='the stage threads stop')
def test_ctrl_c_while_waiting_stops_the_threads(data):
    import _thread
    release = threading.Event()

    def transform(batch):
        release.wait(30)  # the consumer waits for this batch
        return batch

    loader = FastNeighborLoader(data, [4, 3], batch_size=8, pipeline=True,
                                transform=transform)
    iterator = iter(loader)  # kept, as an interactive session keeps it
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        next(iterator)
    release.set()
    assert not wait_for_no_stage_threads()
    del iterator  # kept alive until here, as an interactive session keeps it


EXIT_SCRIPT = '''
import torch
from torch_geometric.data import Data
from pyg_fastload import FastNeighborLoader
n = 2000
g = Data(x=torch.randn(n, 8), edge_index=torch.randint(n, (2, 20000)))
def slow(batch):  # the loading stage is inside a torch op at exit
    a = torch.randn(1500, 1500)
    for _ in range(3):
        a = a @ a / 1500
    return batch
it = iter(FastNeighborLoader(g, [5, 5], batch_size=64, pipeline=True,
                             transform=slow))
next(it)
'''


@pytest.mark.reliability(
    fault='the interpreter exiting (end of script, Ctrl-C) while a stage '
          'thread runs a torch op: "terminate called without an active '
          'exception", exit 134',
    behaviour='the stages are stopped and joined at exit; the process '
              'exits 0 without an abort')
def test_exit_during_a_pipelined_epoch_does_not_abort():
    import subprocess
    import sys
    for _ in range(2):  # the abort hit about half the exits before
        done = subprocess.run([sys.executable, '-c', EXIT_SCRIPT],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert 'terminate called' not in done.stderr


@pytest.mark.reliability(
    fault="two epochs of one `pipeline='auto'` loader iterated at once",
    behaviour='each yields every batch of its epoch in order, equal to '
              '`pipeline=False`, across its own switch to the pipeline')
def test_two_auto_epochs_at_once_each_serve_their_batches(data, monkeypatch):
    loader = FastNeighborLoader(data, [4, 3], batch_size=16,
                                transform=_loading_takes(0.01))
    torch.manual_seed(5)  # every epoch draws its seed from torch's RNG
    expected = [(b.n_id, b.edge_index, b.x) for b in FastNeighborLoader(
        data, [4, 3], batch_size=16, pipeline=False)]
    torch.manual_seed(5)
    first = iter(loader)
    torch.manual_seed(5)
    second = iter(loader)
    clock = FakeClock(monkeypatch, load=0.01, model=0.01)
    got = ([], [])
    for a, b in zip(first, second):  # interleaved, batch by batch
        got[0].append((a.n_id, a.edge_index, a.x))
        got[1].append((b.n_id, b.edge_index, b.x))
        clock.took(first)
        clock.took(second)
    assert first.pipelined and second.pipelined
    _same(got[0], expected)
    _same(got[1], expected)
    # Each epoch's time breakdown holds its own batches' loading, in both
    # parts (the transform adds 10 ms to every batch's loading):
    for epoch in (first, second):
        breakdown = epoch.first.breakdown
        assert breakdown['batches'] == len(loader)
        assert breakdown['feature_loading'] >= 0.01 * len(loader)
