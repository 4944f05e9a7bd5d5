import math
import os

import pytest
import torch

from pyg_fastload import FastNeighborLoader, FastNeighborSampler
from pyg_fastload.loader import priority
from pyg_fastload.loader.pipeline import (
    DeviceTransfer,
    PipelineIterator,
    new_breakdown,
)
from pyg_fastload.loader.priority import SAMPLING_NICENESS, STAGE_NICENESS
from pyg_fastload.loader.scheduler import (
    LAUNCH_THRESHOLD,
    RunAheadScheduler,
    launch_score,
)

from ..helpers import random_graph


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_launch_score_formula():
    # 10 ms gap, idle CPU (f = 100), sampling half as long as training,
    # two batches queued: 10 * 100 * 0.02 / (0.04 * 2) = 250.
    assert launch_score(10, 0, 0.02, 0.04, 2) == pytest.approx(250)
    # At 50% CPU, f = 101 - e^(50 ln 101 / 100) = 101 - sqrt(101).
    assert launch_score(1, 50, 1, 1, 1) == pytest.approx(101 - 101**0.5)
    assert launch_score(1000, 100, 1, 1, 1) == pytest.approx(0, abs=1e-9)
    assert launch_score(1000, 130, 1, 1, 1) == 0  # clamped to 100%
    assert launch_score(0.5, 0, 1, 1, 0) == math.inf  # empty queue
    assert launch_score(0.5, 0, 1, 0, 3) == math.inf  # model takes no time
    # The default threshold: a 5 ms gap at 50% CPU and balance 1 launches.
    assert launch_score(5, 50, 1, 1, 1) == pytest.approx(LAUNCH_THRESHOLD)


def test_cpu_utilisation_is_normalised_to_the_cores():
    wall, cpu = FakeClock(), FakeClock()
    scheduler = RunAheadScheduler(cores=2, wall_clock=wall, cpu_clock=cpu)
    wall.now, cpu.now = 1.0, 1.0  # one core busy out of two
    scheduler.score()
    assert scheduler.cpu_util == pytest.approx(50)
    wall.now, cpu.now = 1.01, 1.5  # shorter than the measuring window
    scheduler.score()
    assert scheduler.cpu_util == pytest.approx(50)
    wall.now, cpu.now = 2.0, 4.0  # more CPU than cores: clamped
    scheduler.score()
    assert scheduler.cpu_util == 100


def test_launches_once_the_score_reaches_the_threshold():
    wall, cpu = FakeClock(), FakeClock()
    scheduler = RunAheadScheduler(min_ahead=1, max_ahead=4, threshold=500,
                                  avg_sample=0.02, avg_train=0.04, cores=1,
                                  wall_clock=wall, cpu_clock=cpu)
    scheduler.launched(started=0.0, seconds=0.02)
    assert scheduler.in_flight == 1
    # CPU idle: score = gap_ms * 100 * 0.02 / (0.04 * 1) = 50 * gap_ms.
    wall.now = 0.0099
    assert not scheduler.should_launch()
    wall.now = 0.0101
    assert scheduler.should_launch()
    # The CPU saturated: the score is 0 however long the gap.
    cpu.now = wall.now = 10.0
    assert not scheduler.should_launch()


def test_never_starves_and_never_exceeds_the_bound():
    wall, cpu = FakeClock(), FakeClock()
    scheduler = RunAheadScheduler(min_ahead=2, max_ahead=3, threshold=0,
                                  cores=1, wall_clock=wall, cpu_clock=cpu)
    cpu.now = wall.now = 1.0  # saturated CPU: the score is 0 ...
    scheduler.consumed(None)
    scheduler.launches = 1
    assert scheduler.should_launch()  # ... but fewer than min_ahead in flight
    for _ in range(5):
        if scheduler.should_launch():
            scheduler.launched(wall.now, 0.01)
    assert scheduler.in_flight == 3  # threshold 0 launches up to the bound
    scheduler.consumed(0.1)
    assert scheduler.in_flight == 2 and scheduler.should_launch()


def test_an_adaptive_scheduler_learns_the_model_time():
    scheduler = RunAheadScheduler(smoothing=0.5)
    assert scheduler.score() == math.inf  # nothing measured yet
    scheduler.consumed(None)
    scheduler.consumed(0.2)
    scheduler.consumed(0.4)
    assert scheduler.avg_train == pytest.approx(0.3)


@pytest.mark.parametrize('kwargs, match', [
    (dict(min_ahead=0), 'min_ahead'),
    (dict(min_ahead=3, max_ahead=2), 'max_ahead'),
    (dict(threshold=-1), 'threshold'),
    (dict(smoothing=0), 'smoothing'),
])
def test_invalid_scheduler_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        RunAheadScheduler(**kwargs)


def test_a_pipeline_that_never_launches_by_score_still_completes():
    breakdown = new_breakdown()
    scheduler = RunAheadScheduler(1, 4, threshold=math.inf, avg_sample=1.0,
                                  avg_train=1.0)
    iterator = PipelineIterator(iter(range(10)), lambda _: None,
                                lambda x: x, 2, 2, breakdown, scheduler,
                                DeviceTransfer())
    assert list(iterator) == list(range(10))
    # Only launched when nothing was in flight: always exactly one ahead.
    assert breakdown['run_ahead'] == 1.0
    assert breakdown['batches'] == 10


@pytest.fixture
def data():
    return random_graph(num_nodes=400, num_edges=4000)


class CountingSampler(FastNeighborSampler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = 0

    def sample_from_nodes(self, inputs, **kwargs):
        self.calls += 1
        return super().sample_from_nodes(inputs, **kwargs)


@pytest.mark.parametrize('run_ahead, bound', [(1, 1), (3, 3),
                                              ('adaptive', 4)])
def test_run_ahead_bounds_the_batches_sampled_ahead(data, run_ahead, bound):
    sampler = CountingSampler(data, [4, 3])
    loader = FastNeighborLoader(data, [4, 3], batch_size=8,
                                neighbor_sampler=sampler, pipeline=True,
                                queue_capacity=2, run_ahead=run_ahead)
    iterator = iter(loader)
    for consumed in range(1, 8):
        next(iterator)
        for _ in range(20):  # a slow model: the stages may run ahead
            iterator.shared.stop.wait(0.005)
        assert sampler.calls <= consumed + bound
    iterator.close()
    assert 1 <= loader.time_breakdown['run_ahead'] <= bound + 1


@pytest.mark.parametrize('run_ahead', ['adaptive', 1, 3])
def test_run_ahead_keeps_the_batches_identical(data, run_ahead):
    def batches(**kwargs):
        torch.manual_seed(0)
        loader = FastNeighborLoader(data, [4, 3], batch_size=32,
                                    shuffle=True, **kwargs)
        return [(b.n_id, b.edge_index, b.x) for b in loader]

    a = batches(pipeline=True, run_ahead=run_ahead)
    b = batches(pipeline=False)
    assert len(a) == len(b) == 13
    for x, y in zip(a, b):
        assert all(torch.equal(u, v) for u, v in zip(x, y))


@pytest.mark.parametrize('run_ahead', [0, True, 'eager', 1.5])
def test_invalid_run_ahead(data, run_ahead):
    with pytest.raises(ValueError, match="'run_ahead'"):
        FastNeighborLoader(data, [4, 3], run_ahead=run_ahead)


@pytest.mark.skipif(os.getpriority(os.PRIO_PROCESS, 0) + SAMPLING_NICENESS
                    >= 19, reason='the process is already niced too far')
@pytest.mark.parametrize('others', [0, 2])
def test_stage_priority_follows_the_machine_s_load(data, monkeypatch,
                                                   others):
    r"""Idle machine: loading before sampling, both after the trainer;
    other processes runnable as the epoch starts: the trainer's priority
    (niced stages would lose their CPU to them)."""
    monkeypatch.setattr(priority, 'other_runnable', lambda: others)
    loader = FastNeighborLoader(data, [4, 3], batch_size=8, pipeline=True)
    iterator = iter(loader)
    next(iterator)  # both stages have started
    sampling, loading = (os.getpriority(os.PRIO_PROCESS, t.native_id)
                         for t in iterator.threads)
    base = os.getpriority(os.PRIO_PROCESS, 0)
    if others:
        assert sampling == loading == base
    else:
        assert sampling == base + SAMPLING_NICENESS
        assert loading == base + STAGE_NICENESS
    iterator.close()


def test_other_runnable_counts_other_processes_threads(tmp_path):
    path, tasks = tmp_path / 'loadavg', tmp_path / 'task'
    path.write_text('0.52 0.57 0.73 5/345 1234\n')
    for tid, state in ((1, 'R'), (2, 'S'), (3, 'R'), (4, 'D')):
        (tasks / str(tid)).mkdir(parents=True)
        (tasks / str(tid) / 'stat').write_text(
            f'{tid} (py (thread)) {state} 1 2 3')
    # 5 runnable on the machine, 2 of them this process's
    assert priority.other_runnable(samples=2, interval=0, path=str(path),
                                   task_dir=str(tasks)) == 3
    path.write_text('garbled')
    assert priority.other_runnable(samples=1, path=str(path)) is None
    assert priority.other_runnable(path=str(tmp_path / 'none')) is None
    assert priority.stage_niceness(lambda: None) == (STAGE_NICENESS,
                                                     SAMPLING_NICENESS)
    assert priority.stage_niceness(lambda: 1) == (0, 0)
