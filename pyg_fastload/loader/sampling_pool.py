r"""The sampling stage's worker pool: ByteGNN's two-level scheduling
(section 4) of sampling work on CPU threads.

A batch's sampling is a task; a hop whose frontier is large is split into
chunk tasks (:mod:`pyg_fastload.sampling.tasks`) that the batch's relabel
joins before its next hop. Coarse level: the sampling stage launches
batches by the launch score and sets the pool's :attr:`SamplingPool.width`,
the number of workers that may work at once (all of them only while the
trainer waits for data). Fine level: a free worker takes the ready chunk
task of the oldest batch, the costliest first, then the oldest batch's
task; a worker waiting for its batch's chunks runs ready chunks meanwhile.
torch's sampling ops release the GIL, so the threads run in parallel.

A batch's random streams come from its index (and a chunk's from the
batch's), never from the thread that runs it, so the batches are the same
whatever the number of workers.
"""
from __future__ import annotations

import heapq
import os
import threading
import time
from concurrent.futures import CancelledError, Future
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch

from ..sampling.tasks import TaskRunner, use_runner

__all__ = ['SamplingPool', 'isolate_thread']


def isolate_thread(niceness: int) -> None:
    r"""One intra-op thread and a lower CPU priority (:obj:`niceness`
    added) for the calling thread (PaGraph's resource isolation on a
    shared CPU)."""
    torch.set_num_threads(1)
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
    except (AttributeError, OSError):  # not Linux, or not permitted
        pass


class _Group:
    r"""The chunk tasks of one hop of one batch: their results and how many
    are still to finish."""

    def __init__(self, count: int):
        self.results: List[Any] = [None] * count
        self.pending = count
        self.error: Optional[BaseException] = None


class _PoolRunner(TaskRunner):
    r"""Runs a batch's chunk tasks on the pool: the first in the calling
    worker, the rest queued for free workers, while the caller runs ready
    chunks until its own are done."""

    def __init__(self, pool: 'SamplingPool'):
        self.pool = pool
        #: The batch the worker is sampling (its chunks' priority).
        self.batch = 0

    def run(self, tasks: Sequence[Callable[[], Any]],
            costs: Sequence[float]) -> List[Any]:
        if len(tasks) < 2:
            return super().run(tasks, costs)
        pool, group = self.pool, _Group(len(tasks))
        with pool._cond:
            for i in range(1, len(tasks)):
                heapq.heappush(pool._chunks, (self.batch, -costs[i],
                                              pool._submitted, i, tasks[i],
                                              group))
                pool._submitted += 1
            pool._cond.notify_all()
        pool._run_chunk(tasks[0], group, 0)
        while True:
            with pool._cond:
                while group.pending and group.error is None and \
                        not pool._chunks:
                    pool._cond.wait()
                if not group.pending or group.error is not None:
                    break
                _, _, _, i, task, owner = heapq.heappop(pool._chunks)
            pool._run_chunk(task, owner, i)
        if group.error is not None:
            raise group.error
        return group.results


class SamplingPool:
    r"""Threads running batches' sampling tasks and their chunk tasks, the
    oldest batch first.

    Args:
        workers (int): threads.
        niceness (int): CPU priority each thread lowers itself by.
    """
    def __init__(self, workers: int, niceness: int):
        if isinstance(workers, bool) or not isinstance(workers, int) or \
                workers < 1:
            raise ValueError(f"'workers' = {workers!r} must be an int >= 1")
        self._ready: List[Tuple[int, int, Callable[[], Any], Future]] = []
        self._chunks: List[Tuple[int, float, int, int, Callable[[], Any],
                                 _Group]] = []
        self._submitted = 0
        self._busy = 0
        #: Workers that may work at once (the coarse level sets it).
        self.width = workers
        self._cond = threading.Condition()
        self._closed = False
        self.threads = [
            threading.Thread(target=self._work, args=(niceness, ),
                             daemon=True, name=f'pyg_fastload-sampling-{i}')
            for i in range(workers)]
        for thread in self.threads:
            thread.start()

    def submit(self, batch: int, task: Callable[[], Any]) -> Future:
        r"""Queues :obj:`task`, the sampling of batch number :obj:`batch`;
        its future holds ``(result, seconds it ran)``."""
        future: Future = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError('the sampling pool is closed')
            heapq.heappush(self._ready, (batch, self._submitted, task,
                                         future))
            self._submitted += 1
            self._cond.notify_all()
        return future

    def set_width(self, width: int) -> None:
        r"""Lets :obj:`width` workers work at once."""
        with self._cond:
            if width != self.width:
                self.width = width
                self._cond.notify_all()

    def _run_chunk(self, task: Callable[[], Any], group: _Group,
                   index: int) -> None:
        try:
            result = task()
        except BaseException as error:  # raised in the batch's worker
            with self._cond:
                group.error = group.error or error
                group.pending -= 1
                self._cond.notify_all()
            return
        with self._cond:
            group.results[index] = result
            group.pending -= 1
            self._cond.notify_all()

    def _work(self, niceness: int) -> None:
        isolate_thread(niceness)
        runner = _PoolRunner(self)
        use_runner(runner)
        while True:
            with self._cond:
                while not self._closed and not self._ready and not (
                        self._chunks and self._busy < self.width):
                    self._cond.wait()
                if self._closed:
                    return
                self._busy += 1
                chunk = bool(self._chunks) and self._busy <= self.width
                if chunk:
                    _, _, _, i, task, group = heapq.heappop(self._chunks)
                else:
                    batch, _, task, future = heapq.heappop(self._ready)
            try:
                if chunk:
                    self._run_chunk(task, group, i)
                else:
                    runner.batch = batch
                    self._run_batch(task, future)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    @staticmethod
    def _run_batch(task: Callable[[], Any], future: Future) -> None:
        if not future.set_running_or_notify_cancel():
            return
        started = time.perf_counter()
        try:
            result = task()
        except BaseException as error:  # handed to the stage
            future.set_exception(error)
        else:
            future.set_result((result, time.perf_counter() - started))

    def close(self, timeout: float = 0.0) -> None:
        r"""Stops the workers once their running tasks return (queued tasks
        are dropped, a batch waiting for dropped chunks fails); waits up to
        :obj:`timeout` seconds per thread."""
        with self._cond:
            self._closed = True
            dropped, self._ready = self._ready, []
            chunks, self._chunks = self._chunks, []
            for *_, group in chunks:
                group.error = group.error or CancelledError()
                group.pending -= 1
            self._cond.notify_all()
        for *_, future in dropped:
            future.cancel()
        if timeout > 0:
            for thread in self.threads:
                thread.join(timeout)
