import os
import threading
import time
from types import SimpleNamespace

import pytest
import torch
from torch_geometric.data import Data

from pyg_fastload import FastNeighborLoader
from pyg_fastload.loader.trainer_load import (
    TrainerLoad,
    _runqueue_wait,
    hold,
    launch_width,
    thread_cpu,
)


class _Clocks:
    def __init__(self):
        self.wall = self.cpu = 0.0
        self.threads = {}
        self.waits = {}  # native thread id: seconds waited for a CPU

    def load(self, cores: int) -> TrainerLoad:
        return TrainerLoad(cores=cores, decay=0.5, min_seconds=0.05,
                           cpu_clock=lambda: self.cpu,
                           wall_clock=lambda: self.wall,
                           thread_clock=self.threads.get,
                           wait_clock=self.waited)

    def waited(self, excluded) -> float:
        return sum(v for k, v in self.waits.items() if k not in excluded)


def _thread(ident: int) -> SimpleNamespace:
    return SimpleNamespace(ident=ident, native_id=1000 + ident)


def test_trainer_cores_exclude_the_stage_threads():
    clocks = _Clocks()
    clocks.threads = {7: 0.0}
    load = clocks.load(cores=4)
    load.watch([_thread(7)])
    assert load.cores_used is None and load.training_width(3) is None
    # unknown load: nothing beside the trainer, every worker while it
    # waits (a loop that trains for no time keeps its run-ahead)
    assert launch_width(load, 3, 2, starved=False) == 0
    assert launch_width(load, 3, 2, starved=True) == 3
    load.handed()
    # 0.1 s of training: the process used 0.3 CPU s, 0.1 of them the stage's
    clocks.wall, clocks.cpu, clocks.threads[7] = 0.1, 0.3, 0.1
    load.asked()
    assert load.cores_used == pytest.approx(2.0)
    assert load.training_width(3) == 2  # 4 cores, 2 busy
    assert load.training_width(1) == 1
    # waiting for data is not training: none of this counts
    clocks.wall, clocks.cpu = 0.5, 1.0
    load.handed()
    clocks.wall, clocks.cpu, clocks.threads[7] = 0.6, 1.4, 0.1
    load.asked()  # 4 cores busy, averaged with the 2 before
    assert load.cores_used == pytest.approx((0.5 * 0.2 + 0.4) /
                                            (0.5 * 0.1 + 0.1))
    assert load.training_width(3) == 1  # 0.67 spare cores round to 1
    load.handed()
    clocks.wall, clocks.cpu = 0.7, 1.8
    load.asked()  # 3.7 cores busy on average: nothing to spare
    assert load.cores_used == pytest.approx(0.65 / 0.175)
    assert load.training_width(3) == 0
    # a stage thread that ended (its clock gone) never makes CPU negative
    load.handed()
    del clocks.threads[7]
    clocks.wall = 0.8
    load.asked()  # its 0.1 s no longer subtracted: the trainer used 0
    before = load.cores_used
    assert before == pytest.approx((0.5 * 0.65) / (0.5 * 0.175 + 0.1))
    load.watch([], reset=True)
    clocks.wall, clocks.cpu = 0.9, 2.5
    load.asked()  # no batch handed since the reset: nothing measured
    assert load.cores_used == before


def test_time_the_trainer_waited_for_a_core_counts_as_its_demand():
    # A stage that takes a core from the model lowers the model's CPU
    # time; counted alone, that would read as a spare core.
    clocks = _Clocks()
    clocks.threads = {7: 0.0}
    clocks.waits = {1: 0.0, 1007: 0.0}  # the main thread's, the stage's
    load = clocks.load(cores=2)
    load.watch([_thread(7)])
    load.handed()
    # 0.1 s: the trainer ran 0.1 CPU s and waited 0.1 s for a core the
    # stage held for 0.1 CPU s (the stage's own waits are not the trainer's)
    clocks.wall, clocks.cpu, clocks.threads[7] = 0.1, 0.2, 0.1
    clocks.waits = {1: 0.1, 1007: 0.05}
    load.asked()
    assert load.cores_used == pytest.approx(2.0)
    assert load.training_width(2) == 0  # not 1: the trainer wants both


def test_runqueue_waits_are_read_for_the_other_threads():
    if not os.path.exists(f'/proc/self/task/{threading.get_native_id()}'
                          '/schedstat'):
        pytest.skip('no per-thread scheduler statistics here')
    me = threading.get_native_id()
    others = _runqueue_wait({me})
    with open(f'/proc/self/task/{me}/schedstat') as file:
        mine = int(file.read().split()[1]) / 1e9
    total = _runqueue_wait(())
    # waits only grow, so the later total holds at least this thread's
    # earlier waits on top of the other threads' earlier ones
    assert total - others >= mine - 1e-9
    assert _runqueue_wait({int(t) for t in os.listdir('/proc/self/task')}
                          ) == 0.0


class _Fixed:
    def __init__(self, spare: int):
        self.spare = spare

    def training_width(self, workers: int) -> int:
        return min(workers, self.spare)


def test_a_held_stage_sleeps_until_the_trainer_asks():
    starved, stop = threading.Event(), threading.Event()
    timer = threading.Timer(0.2, starved.set)
    timer.start()
    try:  # a busy trainer: no short polls, the trainer's ask wakes it
        assert hold(_Fixed(0), 2, starved, stop, poll=0.001,
                    held_poll=30.0) is False
        assert starved.is_set()
    finally:
        timer.cancel()
    starved.clear()
    # a spare core, or no trainer load: the short poll
    for load in (_Fixed(1), None):
        assert hold(load, 2, starved, stop, poll=0.001,
                    held_poll=30.0) is False
        assert not starved.is_set()
    stop.set()
    assert hold(_Fixed(0), 2, starved, stop, poll=0.001, held_poll=0.01)
    assert hold(None, 2, starved, stop, poll=0.001, held_poll=0.01)


def test_launch_width():
    # the default: one batch beside the trainer, every worker while it waits
    assert launch_width(None, 3, 2, starved=False) == 1
    assert launch_width(None, 3, 2, starved=True) == 3
    # the trainer leaves two cores
    assert launch_width(_Fixed(2), 3, 2, starved=False) == 2
    assert launch_width(_Fixed(2), 3, 2, starved=True) == 3
    # the trainer keeps every core busy: nothing beside it, and while it
    # waits only its own batch
    assert launch_width(_Fixed(0), 3, 0, starved=False) == 0
    assert launch_width(_Fixed(0), 3, 0, starved=True) == 3
    assert launch_width(_Fixed(0), 3, 1, starved=True) == 0


def test_decay_is_checked():
    with pytest.raises(ValueError, match="'decay=1'"):
        TrainerLoad(decay=1)


@pytest.fixture
def data():
    g = torch.Generator().manual_seed(0)
    n = 400
    return Data(edge_index=torch.randint(0, n, (2, 4000), generator=g),
                x=torch.randn(n, 4), num_nodes=n)


def _wait_for(predicate, seconds=10.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


@pytest.mark.parametrize('workers', [1, 2])
def test_a_busy_trainer_is_not_sampled_beside(data, monkeypatch, workers):
    r"""``run_ahead='trainer_first'``: while a model that keeps every core
    busy works on a batch, no batch is launched; a model that leaves a
    core gets the next one sampled beside it."""
    spare = {'cores': 0}
    monkeypatch.setattr(TrainerLoad, 'training_width',
                        lambda self, w: min(w, spare['cores']))
    loader = FastNeighborLoader(data, [4, 3], batch_size=8, pipeline=True,
                                run_ahead='trainer_first',
                                sampling_workers=workers)
    iterator = iter(loader)
    next(iterator)
    scheduler = iterator.scheduler
    assert scheduler.launches == 1  # only the batch the trainer waited for
    time.sleep(0.3)  # the trainer works
    assert scheduler.launches == 1
    next(iterator)  # the trainer waits: its batch is sampled
    assert scheduler.launches == 2
    spare['cores'] = 1
    assert _wait_for(lambda: scheduler.launches > 2)
    iterator.close()


def test_the_default_run_ahead_samples_beside_the_trainer(data):
    loader = FastNeighborLoader(data, [4, 3], batch_size=8, pipeline=True)
    iterator = iter(loader)
    next(iterator)
    assert _wait_for(lambda: iterator.scheduler.launches > 1)
    assert loader._trainer_load is None
    iterator.close()


def test_the_loader_measures_the_trainer_s_cores():
    r"""Stage threads that sample while the trainer sleeps do not count as
    the trainer's; a trainer that computes does."""
    g = torch.Generator().manual_seed(0)
    n = 20000
    data = Data(edge_index=torch.randint(0, n, (2, 400000), generator=g),
                x=torch.randn(n, 4), num_nodes=n)
    loader = FastNeighborLoader(data, [25, 25], batch_size=256,
                                pipeline=True, run_ahead='trainer_first',
                                sampling_workers=2)
    for _ in zip(range(8), loader):
        time.sleep(0.03)
    assert loader._trainer_load.cores_used < 0.25
    loader._trainer_load = None  # a new measurement
    for _ in zip(range(10), loader):
        began = time.thread_time()  # 30 ms of this thread's CPU time
        while time.thread_time() - began < 0.03:
            pass
    # one core's worth, less what other processes take from it
    assert loader._trainer_load.cores_used > 0.3


@pytest.mark.reliability(
    fault="`run_ahead` of a wrong type or value ('eager', True, 0, 1.5), "
          "or two epochs of one `'trainer_first'` loader iterated at once "
          "(they share its trainer measurement)",
    behaviour="a SettingError naming `run_ahead` and its values; both "
              "epochs yield every batch, in order")
def test_run_ahead_values_and_two_epochs_at_once(data):
    for bad in ('eager', True, 0, 1.5):
        with pytest.raises(ValueError, match="'run_ahead'.*'trainer_first'"):
            FastNeighborLoader(data, [4, 3], run_ahead=bad)
    loader = FastNeighborLoader(data, [4, 3], batch_size=40, pipeline=True,
                                run_ahead='trainer_first',
                                sampling_workers=2)
    pairs = list(zip(loader, loader))
    assert len(pairs) == 10
    for i, (a, b) in enumerate(pairs):  # the seeds in order, both epochs
        assert torch.equal(a.input_id, torch.arange(40 * i, 40 * i + 40))
        assert torch.equal(b.input_id, a.input_id)


def test_a_threads_cpu_is_read_while_it_runs_and_none_once_it_ended():
    started, stop = threading.Event(), threading.Event()

    def spin():
        started.set()
        while not stop.is_set():
            sum(range(1000))

    thread = threading.Thread(target=spin)
    thread.start()
    started.wait(10)
    first = later = thread_cpu(thread.ident)
    deadline = time.monotonic() + 10
    while later == first and time.monotonic() < deadline:
        later = thread_cpu(thread.ident)  # it runs: its clock moves
    stop.set()
    thread.join(10)
    assert isinstance(first, float) and later > first
    # an ended thread's clock is not read (its pthread clock would crash)
    assert thread_cpu(thread.ident) is None
