r"""How many cores the trainer keeps busy, so that sampling takes only the
cores it leaves (the trainer is served first).

Between handing the trainer a batch and its request for the next, the
process's CPU time less the stage threads' own (read from their per-thread
CPU clocks, so intra-op threads of the model count as the trainer's), plus
the time the trainer's threads were ready to run but waited for a core
(Linux's per-thread ``schedstat``), over the wall time gives the cores the
trainer asks for. Counting the waits matters: a stage that takes a core
from the model lowers the CPU time the model gets, which alone would read
as spare cores and invite more sampling beside it. While the trainer works,
the sampling stage launches batches on the spare cores only: none when the
model keeps every core busy (a concurrent sampler would slow its kernels,
and sampling the next batch while the trainer waits for it costs the same
CPU time), all of them when it leaves the CPU idle (a model on a GPU, a
trainer blocked on I/O). Feature loading is never held back: its reads
from storage overlap the model without taking its cores.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Callable, Collection, Iterable, List, Optional, Set

from ..config import usable_cores

__all__ = ['TrainerLoad', 'launch_width', 'hold', 'thread_cpu']


def thread_cpu(ident: int) -> Optional[float]:
    r"""CPU seconds used by the thread :obj:`ident` (``None`` once it has
    ended, or where Linux's per-thread scheduler statistics are not
    available). Read from ``/proc/self/task``, never from the thread's
    pthread clock, which is undefined (a crash) once a thread has
    ended."""
    native = next((thread.native_id for thread in threading.enumerate()
                   if thread.ident == ident), None)
    if native is None:
        return None
    try:
        with open(f'/proc/self/task/{native}/schedstat') as file:
            return int(file.read().split()[0]) / 1e9
    except (OSError, IndexError, ValueError):  # it ended meanwhile
        return None


def _runqueue_wait(excluded: Collection[int]) -> float:
    r"""Seconds the process's threads, except the native thread ids
    :obj:`excluded`, spent ready to run but waiting for a CPU (0 where
    Linux's ``/proc/self/task/*/schedstat`` is not available)."""
    total = 0
    try:
        tasks = os.listdir('/proc/self/task')
    except OSError:
        return 0.0
    for task in tasks:
        if int(task) in excluded:
            continue
        try:
            with open(f'/proc/self/task/{task}/schedstat') as file:
                total += int(file.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # the thread ended, or no scheduler statistics
    return total / 1e9


class TrainerLoad:
    r"""Measures the cores the trainer keeps busy while it works on a batch.

    The consumer calls :meth:`handed` when it hands the trainer a batch
    and :meth:`asked` when the trainer asks for the next one; the stages
    register their threads with :meth:`watch`. Thread safe.

    Args:
        cores (int, optional): cores of the machine the process may use
            (default: :func:`~pyg_fastload.config.usable_cores`).
        decay (float): weight of the older measurements per new interval.
        min_seconds (float): training wall time measured (decayed) before
            the estimate is trusted; a trainer that takes no time between
            batches (a benchmark loop) never reaches it.
        cpu_clock (callable): CPU seconds of the whole process.
        wall_clock (callable): wall seconds.
        thread_clock (callable): CPU seconds of a thread by ident
            (``None`` once it has ended).
        wait_clock (callable): seconds the process's threads, except the
            given native thread ids (the stages'), waited for a CPU while
            ready to run.
    """
    def __init__(self, cores: Optional[int] = None, decay: float = 0.9,
                 min_seconds: float = 0.02,
                 cpu_clock: Callable[[], float] = time.process_time,
                 wall_clock: Callable[[], float] = time.perf_counter,
                 thread_clock: Callable[[int], Optional[float]] = thread_cpu,
                 wait_clock: Callable[[Collection[int]], float] = (
                     _runqueue_wait)):
        if not 0 <= decay < 1:
            raise ValueError(f"'decay={decay}' must be in [0, 1)")
        self.cores = cores or usable_cores()
        self.decay, self.min_seconds = decay, min_seconds
        self.cpu_clock, self.wall_clock = cpu_clock, wall_clock
        self.thread_clock, self.wait_clock = thread_clock, wait_clock
        self._threads: List[int] = []
        self._native: Set[int] = set()
        self._mark: Optional[tuple] = None
        self._cpu = self._wall = 0.0
        self._lock = threading.Lock()

    def watch(self, threads: Iterable[threading.Thread],
              reset: bool = False) -> None:
        r"""Counts the started :obj:`threads` as stages (``reset``: forget
        the previous ones, e.g. a new epoch's)."""
        with self._lock:
            if reset:
                self._threads, self._native, self._mark = [], set(), None
            for thread in threads:
                self._threads.append(thread.ident)
                self._native.add(thread.native_id)

    def _stage_cpu(self) -> float:
        return sum(filter(None, map(self.thread_clock, self._threads)))

    def handed(self) -> None:
        r"""The trainer got a batch: its work starts."""
        with self._lock:
            self._mark = (self.wall_clock(), self.cpu_clock(),
                          self._stage_cpu(), self.wait_clock(self._native))

    def asked(self) -> None:
        r"""The trainer asks for the next batch: its work ends."""
        with self._lock:
            if self._mark is None:
                return
            wall, cpu, stages, waited = self._mark
            self._mark = None
            seconds = self.wall_clock() - wall
            used = self.cpu_clock() - cpu
            trainer = min(max(used - (self._stage_cpu() - stages), 0.0),
                          used)
            trainer += max(self.wait_clock(self._native) - waited, 0.0)
            self._cpu = self.decay * self._cpu + trainer
            self._wall = self.decay * self._wall + seconds

    @property
    def cores_used(self) -> Optional[float]:
        r"""Cores the trainer kept busy, or was ready to keep busy but
        waited for, while working, on average over the recent batches
        (``None`` until measured long enough)."""
        with self._lock:
            if self._wall < self.min_seconds:
                return None
            return self._cpu / self._wall

    def training_width(self, workers: int) -> Optional[int]:
        r"""Sampling workers that may work while the trainer works: the
        spare cores, rounded, at most :obj:`workers` (``None`` until the
        load is known)."""
        used = self.cores_used
        if used is None:
            return None
        return min(workers, max(int(self.cores - used + 0.5), 0))


def launch_width(load: Optional[TrainerLoad], workers: int, in_flight: int,
                 starved: bool) -> int:
    r"""Batches the sampling stage may sample at once. While the trainer
    works: as many as the cores it leaves allow (one without a
    :obj:`load`; none while the load is not yet known, e.g. in the first
    step). While it waits for data (:obj:`starved`): :obj:`workers`, or,
    when the model keeps every core busy, only the batch it waits for (a
    batch sampled ahead would run on into its step; :obj:`in_flight`
    counts those launched and not yet consumed)."""
    spare = min(workers, 1) if load is None else \
        load.training_width(workers)
    if not starved:
        return spare or 0
    return workers if spare is None or spare or not in_flight else 0


def hold(load: Optional[TrainerLoad], workers: int,
         starved: threading.Event, stop: threading.Event, poll: float,
         held_poll: float) -> bool:
    r"""Waits before the sampling stage checks again whether to launch;
    :obj:`True` once :obj:`stop` is set. Held beside a working trainer
    (:func:`launch_width` 0), it sleeps until the trainer asks for data
    (:obj:`starved`; :obj:`held_poll` seconds at most), not in
    :obj:`poll`-second polls that would wake a thread beside the model."""
    if load is not None and not starved.is_set() and \
            not launch_width(load, workers, 0, False):
        starved.wait(held_poll)
        return stop.is_set()
    return stop.wait(poll)
