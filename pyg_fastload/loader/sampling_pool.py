r"""The sampling stage's worker pool: ByteGNN's two-level scheduling
(sections 3.1-3.2) of sampling work on CPU threads.

Every batch's sampling is a task graph (:mod:`pyg_fastload.sampling.
tasks`): its hops' draws (one task per hop, or per chunk of a large hop),
each hop's relabelling (run by the thread finishing the hop's last draw)
and, with a :class:`~pyg_fastload.loader.feature_join.RowFetch`, a feature
fetch per hop for the rows the hop reached first, which runs while the
next hop samples. Coarse level: the sampling stage launches batches by the
launch score and sets the pool's :attr:`SamplingPool.width`, the number of
workers that may work at once (all of them only while the trainer waits
for data). Fine level: ready tasks wait in one queue (:class:`ReadyTasks`),
the oldest batch's first, its cheapest first (ByteGNN's order; ``'fifo'``:
in the order they became ready); a free worker takes the first, and a
worker waiting for its own batch runs ready tasks meanwhile. torch's
sampling and gather ops release the GIL, so the threads run in parallel.

A batch's random streams come from its index (and a chunk's from the
batch's), never from the thread that runs it, so the batches are the same
whatever the number of workers and the order of the tasks.
"""
from __future__ import annotations

import heapq
import itertools
import os
import threading
import time
from concurrent.futures import CancelledError, Future
from typing import Any, Callable, Iterator, List, NamedTuple, Optional, Tuple

import torch
from torch import Tensor

from ..sampling.tasks import Steps, TaskRunner, Work, use_runner
from .feature_join import Arena, RowFetch

__all__ = ['SamplingPool', 'ReadyTasks', 'Sampled', 'isolate_thread',
           'TASK_ORDERS']

#: The orders :class:`ReadyTasks` serves ready tasks in.
TASK_ORDERS = ('priority', 'fifo')


def isolate_thread(niceness: int) -> None:
    r"""One intra-op thread and a lower CPU priority (:obj:`niceness`
    added) for the calling thread (PaGraph's resource isolation on a
    shared CPU)."""
    torch.set_num_threads(1)
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
    except (AttributeError, OSError):  # not Linux, or not permitted
        pass


class Sampled(NamedTuple):
    r"""What a launched batch's future holds."""
    #: The batch (what its sampling returned).
    out: Any
    #: Seconds from its launch to its task graph's end (fetches included).
    seconds: float
    #: Per sampler call, the ``(ids, fetched)`` of every step's rows.
    rows: List[List[Tuple[Tensor, Any]]]


class ReadyTasks:
    r"""Ready tasks in ByteGNN's order: the oldest batch's (smallest
    :obj:`dag`) first, within a batch the cheapest first; ``'fifo'``: in
    the order they were pushed.

    Args:
        order (str): ``'priority'`` or ``'fifo'``.
        counter (iterator, optional): push numbers, shared by queues whose
            heads are compared (:meth:`head`).

    Example:
        >>> queue = ReadyTasks('priority')
        >>> for dag, cost, name in ((1, 1.0, 'a'), (0, 9.0, 'b'),
        ...                         (0, 2.0, 'c')):
        ...     queue.push(dag, cost, name)
        >>> [queue.pop() for _ in range(3)]
        ['c', 'b', 'a']
    """
    def __init__(self, order: str = 'priority',
                 counter: Optional[Iterator[int]] = None):
        if order not in TASK_ORDERS:
            raise ValueError(f"'order' = {order!r} must be one of "
                             f"{TASK_ORDERS}")
        self.priority = order == 'priority'
        self._counter = counter if counter is not None else itertools.count()
        self._heap: List[Tuple[Tuple[float, ...], int, Any]] = []

    def push(self, dag: int, cost: float, task: Any) -> None:
        r"""Queues :obj:`task` of batch :obj:`dag` costing :obj:`cost`."""
        key = (dag, cost) if self.priority else ()
        heapq.heappush(self._heap, (key, next(self._counter), task))

    def head(self) -> Optional[Tuple[Tuple[float, ...], int]]:
        r"""The first task's rank (``None``: empty)."""
        return self._heap[0][:2] if self._heap else None

    def pop(self) -> Any:
        r"""Takes the first task."""
        return heapq.heappop(self._heap)[2]

    def drain(self) -> List[Any]:
        r"""Takes every task."""
        tasks, self._heap = [task for *_, task in self._heap], []
        return tasks

    def __len__(self) -> int:
        return len(self._heap)


class _Dag:
    r"""One batch's task graph in flight."""

    def __init__(self, steps: Steps, batch: int, home: ReadyTasks):
        self.steps, self.batch, self.home = steps, batch, home
        self.driver = threading.get_ident()
        self.result: Any = None
        self.error: Optional[BaseException] = None
        self.sampled = False  # the generator returned
        self.fetches = 0  # fetch tasks not yet done
        self.rows: List[Tuple[Tensor, Any]] = []
        self.fetched = 0  # rows queued for fetching
        self.arena: Optional[Arena] = None


class _Task:
    r"""A queued task: :obj:`run` for :obj:`dag`."""
    __slots__ = ('dag', 'run')

    def __init__(self, dag: _Dag, run: Callable[[], None]):
        self.dag, self.run = dag, run


class _PoolRunner(TaskRunner):
    r"""Runs the task graphs of the batches a worker launches on the pool:
    their tasks queued for every worker, the worker running ready tasks
    until its batch's graph is done."""
    wants_costs = True

    def __init__(self, pool: 'SamplingPool'):
        self.pool = pool
        #: The batch the worker launched (its tasks' priority).
        self.batch = 0
        #: The fetched rows of every graph driven for that batch.
        self.rows: List[List[Tuple[Tensor, Any]]] = []
        self.home = ReadyTasks(pool.order, pool._counter)

    def drive(self, steps: Steps) -> Any:
        dag = _Dag(steps, self.batch, self.home)
        self.pool._advance(dag, None)
        self.pool._help_until(dag, self.home)
        self.rows.append(dag.rows)
        return dag.result


class SamplingPool:
    r"""Threads running batches' task graphs, the oldest batch first.

    Args:
        workers (int): threads.
        niceness (int): CPU priority each thread lowers itself by.
        order (str): ready tasks served ``'priority'`` (ByteGNN: oldest
            batch, then cheapest task) or ``'fifo'`` (as they became
            ready; for comparison).
        hop_tasks (bool): every hop a task any worker may run, with its
            feature fetch (:obj:`fetch`) chained after it; ``False``: a
            batch's hops run in its worker's thread one after another (a
            large hop's chunks still spread), features fetched after the
            batch by the loading stage.
        fetch (RowFetch, optional): reads the feature rows of a hop's new
            nodes (ByteGNN's per-hop feature fetching): its tasks are
            served by one more thread, at :obj:`fetch_niceness` (the
            loading stage's priority, which fetched them before), and by
            workers waiting for their batch.
        fetch_niceness (int, optional): that thread's niceness (default:
            :obj:`niceness`).

    Example:
        >>> pool = SamplingPool(2, 0)
        >>> pool.submit(0, lambda: 'sampled').result(timeout=10).out
        'sampled'
        >>> pool.close(timeout=5)
    """
    def __init__(self, workers: int, niceness: int, order: str = 'priority',
                 hop_tasks: bool = True, fetch: Optional[RowFetch] = None,
                 fetch_niceness: Optional[int] = None):
        if isinstance(workers, bool) or not isinstance(workers, int) or \
                workers < 1:
            raise ValueError(f"'workers' = {workers!r} must be an int >= 1")
        self.order, self.hop_tasks = order, bool(hop_tasks)
        self.fetch = fetch if self.hop_tasks else None
        self._counter = itertools.count()
        self._launches: List[Tuple[int, int, Callable[[], Any], Future]] = []
        self._tasks = ReadyTasks(order, self._counter)
        self._fetches = ReadyTasks(order, self._counter)
        self._busy = 0
        #: Workers that may work at once (the coarse level sets it).
        self.width = workers
        self._cond = threading.Condition()
        self._closed = False
        self.threads = [
            threading.Thread(target=self._work, args=(niceness, ),
                             daemon=True, name=f'pyg_fastload-sampling-{i}')
            for i in range(workers)]
        if self.fetch is not None:
            self.threads.append(threading.Thread(
                target=self._fetch_work, daemon=True,
                name='pyg_fastload-fetching',
                args=(niceness if fetch_niceness is None
                      else fetch_niceness, )))
        for thread in self.threads:
            thread.start()

    def submit(self, batch: int, task: Callable[[], Any]) -> Future:
        r"""Queues :obj:`task`, the sampling of batch number :obj:`batch`;
        its future holds a :class:`Sampled`."""
        future: Future = Future()
        with self._cond:
            if self._closed:
                raise RuntimeError('the sampling pool is closed')
            heapq.heappush(self._launches, (batch, next(self._counter),
                                            task, future))
            self._cond.notify_all()
        return future

    def set_width(self, width: int) -> None:
        r"""Lets :obj:`width` workers work at once."""
        with self._cond:
            if width != self.width:
                self.width = width
                self._cond.notify_all()

    # The task graphs #########################################################

    def _fail(self, dag: _Dag, error: BaseException) -> None:
        with self._cond:
            dag.error = dag.error or error
            self._cond.notify_all()

    def _advance(self, dag: _Dag, results: Optional[List[Any]]) -> None:
        r"""Runs :obj:`dag`'s generator to its next draws (sent
        :obj:`results`, the last draws'), queueing them and its rows'
        fetch."""
        while True:
            try:
                work = next(dag.steps) if results is None else \
                    dag.steps.send(results)
            except StopIteration as done:
                with self._cond:
                    dag.result, dag.sampled = done.value, True
                    self._cond.notify_all()
                return
            except BaseException as error:  # raised in the batch's worker
                self._fail(dag, error)
                return
            with self._cond:
                if self._closed:
                    dag.error = dag.error or CancelledError()
                    self._cond.notify_all()
                    return
                queued = 0
                if work.rows is not None and self.fetch is not None:
                    self._queue_fetch(dag, work.rows)
                    self._cond.notify_all()  # the fetching thread
                if work.tasks:
                    queued += self._queue_draws(dag, work)
                # This thread runs one next: wake workers for the rest (a
                # hand-over to a woken thread waits for the GIL).
                if queued > 1:
                    self._cond.notify(queued - 1)
                if work.tasks:
                    return
            results = []

    def _queue_fetch(self, dag: _Dag, ids: Tensor) -> None:
        fetch, at, offset = self.fetch, len(dag.rows), dag.fetched
        if not at:
            dag.arena = fetch.begin(ids.numel())
        dag.rows.append((ids, None))
        dag.fetches += 1
        dag.fetched += ids.numel()

        def run() -> None:
            try:
                rows = fetch(ids, offset, dag.arena)
            except BaseException as error:  # raised in the batch's worker
                self._fail(dag, error)
                rows = None
            with self._cond:
                dag.rows[at] = (ids, rows)
                dag.fetches -= 1
                self._cond.notify_all()
        self._fetches.push(dag.batch, float(ids.numel() * fetch.width),
                           _Task(dag, run))

    def _queue_draws(self, dag: _Dag, work: Work) -> int:
        movable = work.movable and self.hop_tasks
        shared = movable or (work.movable and len(work.tasks) > 1)
        queue = self._tasks if shared else dag.home
        results: List[Any] = [None] * len(work.tasks)
        pending = [len(work.tasks)]

        def draw(i: int, task: Callable[[], Any]) -> Callable[[], None]:
            def run() -> None:
                try:
                    result = task()
                except BaseException as error:  # raised in its worker
                    self._fail(dag, error)
                    return
                with self._cond:
                    results[i] = result
                    pending[0] -= 1
                    if pending[0] or dag.error is not None:
                        return
                    if not movable and \
                            threading.get_ident() != dag.driver:
                        dag.home.push(dag.batch, 0.0, _Task(
                            dag, lambda: self._advance(dag, results)))
                        self._cond.notify_all()
                        return
                self._advance(dag, results)  # the hop's relabelling
            return run

        for i, (task, cost) in enumerate(zip(work.tasks, work.costs)):
            queue.push(dag.batch, cost, _Task(dag, draw(i, task)))
        return len(work.tasks) if shared else 0

    def _next_task(self, *queues: ReadyTasks) -> Optional[_Task]:
        r"""The first ready task of :obj:`queues`, if any (tasks of failed
        graphs dropped); call holding the lock."""
        while True:
            first = min((q for q in queues if len(q)), default=None,
                        key=lambda q: q.head())
            if first is None:
                return None
            task = first.pop()
            if task.dag.error is None:
                return task

    def _help_until(self, dag: _Dag, home: ReadyTasks) -> None:
        r"""Runs ready tasks until :obj:`dag` is done (its error
        raised)."""
        while True:
            with self._cond:
                while True:
                    if dag.error is not None:
                        raise dag.error
                    if dag.sampled and not dag.fetches:
                        return
                    if self._closed:
                        dag.error = CancelledError()
                        raise dag.error
                    task = self._next_task(home, self._tasks) or \
                        self._next_task(self._fetches)
                    if task is not None:
                        break
                    self._cond.wait()
            task.run()

    # The workers #############################################################

    def _work(self, niceness: int) -> None:
        isolate_thread(niceness)
        runner = _PoolRunner(self)
        use_runner(runner)
        while True:
            with self._cond:
                while not self._closed and not self._launches and not (
                        len(self._tasks) and self._busy < self.width):
                    self._cond.wait()
                if self._closed:
                    return
                self._busy += 1
                task = launch = None
                if self._busy <= self.width:
                    task = self._next_task(self._tasks)
                if task is None and self._launches:
                    batch, _, launch, future = heapq.heappop(self._launches)
            try:
                if task is not None:
                    task.run()
                elif launch is not None:
                    runner.batch, runner.rows = batch, []
                    self._run_batch(launch, future, runner)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def _fetch_work(self, niceness: int) -> None:
        isolate_thread(niceness)
        while True:
            with self._cond:
                task = None
                while not self._closed and task is None:
                    task = self._next_task(self._fetches)
                    if task is None:
                        self._cond.wait()
                if self._closed:
                    return
            task.run()

    @staticmethod
    def _run_batch(task: Callable[[], Any], future: Future,
                   runner: _PoolRunner) -> None:
        if not future.set_running_or_notify_cancel():
            return
        started = time.perf_counter()
        try:
            result = task()
        except BaseException as error:  # handed to the stage
            future.set_exception(error)
        else:
            future.set_result(Sampled(result, time.perf_counter() - started,
                                      runner.rows))

    def close(self, timeout: float = 0.0) -> None:
        r"""Stops the workers once their running tasks return (queued
        batches and tasks are dropped, a batch waiting for dropped tasks
        fails with ``CancelledError``); waits up to :obj:`timeout` seconds
        per thread."""
        with self._cond:
            self._closed = True
            dropped, self._launches = self._launches, []
            for task in self._tasks.drain() + self._fetches.drain():
                task.dag.error = task.dag.error or CancelledError()
            self._cond.notify_all()
        for *_, future in dropped:
            future.cancel()
        if timeout > 0:
            for thread in self.threads:
                thread.join(timeout)
