r"""Adaptive run-ahead for the loader's sampling stage: ByteGNN's
coarse-grained scheduler (Algorithm 1), which decides when to start sampling
another batch from

.. math::

    \mathrm{score} = T_{gap} \cdot (101 - e^{C_{util} / c}) \cdot
    \frac{T_{sample}}{T_{train} \cdot Q_{size}}, \quad c = 100 / \ln 101

(:math:`T_{gap}` in milliseconds since the last launch, :math:`C_{util}` the
process's CPU utilisation in percent of the cores, :math:`T_{sample}` and
:math:`T_{train}` the average seconds to sample a batch and to train on one,
:math:`Q_{size}` the batches launched but not yet consumed). A batch is
launched once the score reaches the threshold, always while fewer than
``min_ahead`` batches are in flight (the model never starves), and never
while ``max_ahead`` are (the memory bound).

ByteGNN launches task graphs onto a pool of sampling workers with this
score and orders ready tasks by batch age, then cost. Here the score
decides when the sampling stage launches a batch: onto one sampling thread
by default, or onto a pool of ``sampling_workers`` threads
(:class:`~pyg_fastload.loader.sampling_pool.SamplingPool`), where the
batch is a task graph of one-hop tasks and per-hop feature fetches, the
oldest batch's ready tasks run first, the cheapest first.
The loading stage (older batches) runs at a higher CPU priority
than sampling. The batches the
scheduler launches are the look-ahead the feature store sees, so the same
run-ahead feeds window buffering and read batching.
"""
from __future__ import annotations

import math
import threading
import time
from typing import Callable, Optional

from ..config import usable_cores

__all__ = ['RunAheadScheduler', 'launch_score', 'LAUNCH_THRESHOLD',
           'POLL_SECONDS']

#: ByteGNN's ``c``: ``101 - e^(C_util / c)`` falls from 100 at 0% CPU to 0
#: at 100%.
_C = 100 / math.log(101)
#: Default launch threshold: a 5 ms gap at 50% CPU with balance 1 launches.
LAUNCH_THRESHOLD = 5.0 * (101 - math.sqrt(101))
#: Seconds the sampling stage sleeps between checks while throttled
#: (ByteGNN: 5 ms).
POLL_SECONDS = 0.005


def launch_score(gap_ms: float, cpu_util: float, avg_sample: float,
                 avg_train: float, queue_size: int) -> float:
    r"""ByteGNN's launch score
    ``gap_ms * (101 - e^(cpu_util / c)) * avg_sample / (avg_train *
    queue_size)``; infinite for an empty queue or a model that takes no
    time (both mean: launch)."""
    if queue_size <= 0 or avg_train <= 0:
        return math.inf
    headroom = max(101 - math.exp(min(max(cpu_util, 0.0), 100.0) / _C), 0.0)
    return gap_ms * headroom * avg_sample / (avg_train * queue_size)


class RunAheadScheduler:
    r"""Decides when the sampling stage starts its next batch.

    The sampling stage asks :meth:`should_launch` before each batch and
    reports :meth:`launched`; the consumer reports :meth:`consumed`. Thread
    safe between those two threads.

    Args:
        min_ahead (int): batches kept in flight regardless of the score
            (``1``: launch whenever nothing is in flight).
        max_ahead (int): batches never exceeded in flight (memory bound).
        threshold (float): launch score that starts a batch.
        smoothing (float): weight of the newest measurement in the moving
            averages of the sampling and training times.
        avg_sample (float, optional): initial average sampling seconds
            (e.g. from the previous epoch).
        avg_train (float, optional): initial average training seconds.
        cores (int, optional): cores the CPU utilisation is normalised to
            (default: those this process may run on).
        cpu_window (float): seconds over which CPU utilisation is measured.
        wall_clock (callable): wall time in seconds.
        cpu_clock (callable): CPU seconds used by this process.
    """
    def __init__(self, min_ahead: int = 1, max_ahead: int = 4,
                 threshold: float = LAUNCH_THRESHOLD, smoothing: float = 0.2,
                 avg_sample: Optional[float] = None,
                 avg_train: Optional[float] = None,
                 cores: Optional[int] = None, cpu_window: float = 0.05,
                 wall_clock: Callable[[], float] = time.perf_counter,
                 cpu_clock: Callable[[], float] = time.process_time):
        if min_ahead < 1:
            raise ValueError(f"'min_ahead={min_ahead}' must be >= 1, or the "
                             f"model could starve")
        if max_ahead < min_ahead:
            raise ValueError(f"'max_ahead={max_ahead}' must be >= "
                             f"'min_ahead={min_ahead}'")
        if threshold < 0:
            raise ValueError(f"'threshold={threshold}' must be >= 0")
        if not 0 < smoothing <= 1:
            raise ValueError(f"'smoothing={smoothing}' must be in (0, 1]")
        self.min_ahead, self.max_ahead = min_ahead, max_ahead
        self.threshold, self.smoothing = threshold, smoothing
        self.avg_sample, self.avg_train = avg_sample, avg_train
        self.cores = cores or usable_cores()
        self.cpu_window = cpu_window
        self.wall_clock, self.cpu_clock = wall_clock, cpu_clock
        self.launches = self.consumptions = 0
        self.cpu_util = 0.0
        now = wall_clock()
        self.last_launch = now
        self._cpu_mark = (now, cpu_clock())
        self._lock = threading.Lock()

    @property
    def in_flight(self) -> int:
        r"""Batches launched and not yet consumed."""
        return self.launches - self.consumptions

    def _measure_cpu(self, now: float) -> float:
        mark_wall, mark_cpu = self._cpu_mark
        if now - mark_wall >= self.cpu_window:
            cpu = self.cpu_clock()
            share = (cpu - mark_cpu) / ((now - mark_wall) * self.cores)
            self.cpu_util = min(max(100.0 * share, 0.0), 100.0)
            self._cpu_mark = (now, cpu)
        return self.cpu_util

    def score(self) -> float:
        r"""The current launch score (infinite until both averages are
        known)."""
        now = self.wall_clock()
        with self._lock:
            util = self._measure_cpu(now)
            if self.avg_sample is None or self.avg_train is None:
                return math.inf
            return launch_score((now - self.last_launch) * 1e3, util,
                                self.avg_sample, self.avg_train,
                                self.in_flight)

    def should_launch(self) -> bool:
        r"""Whether to start sampling another batch now."""
        ahead = self.in_flight
        if ahead < self.min_ahead:
            return True
        if ahead >= self.max_ahead:
            return False
        return self.score() >= self.threshold

    def _average(self, old: Optional[float], new: float) -> float:
        return new if old is None else old + self.smoothing * (new - old)

    def launched(self, started: float, seconds: float) -> None:
        r"""A batch whose sampling started at :obj:`started` (wall clock)
        took :obj:`seconds`."""
        self.started(started)
        self.sampled(seconds)

    def started(self, started: float) -> None:
        r"""A batch's sampling started at :obj:`started` (wall clock; a
        sampling pool reports its time with :meth:`sampled` once done)."""
        with self._lock:
            self.launches += 1
            self.last_launch = started

    def sampled(self, seconds: float) -> None:
        r"""A batch's sampling took :obj:`seconds`."""
        with self._lock:
            self.avg_sample = self._average(self.avg_sample, seconds)

    def consumed(self, train_seconds: Optional[float]) -> None:
        r"""The consumer took a batch, :obj:`train_seconds` after taking the
        previous one (:obj:`None` for its first)."""
        with self._lock:
            self.consumptions += 1
            if train_seconds is not None:
                self.avg_train = self._average(self.avg_train,
                                               train_seconds)
