r"""The loader pipeline (DSP, PaGraph): a sampling thread and a feature-loading
thread joined to the trainer by bounded queues, so batch ``t + 2`` is
sampled and batch ``t + 1`` loaded while the model works on batch ``t``.

Both threads run torch ops, which release the GIL; each uses one intra-op
thread at a lower CPU priority, so the stages take the CPU time the model
leaves instead of slowing its parallel kernels (PaGraph's resource
isolation). The sampling stage starts a batch when a
:class:`~pyg_fastload.loader.scheduler.RunAheadScheduler` says so (ByteGNN's
coarse-grained scheduling), in its own thread or on a pool of sampling
threads (:class:`~pyg_fastload.loader.sampling_pool.SamplingPool`), which
samples several batches at once only while the trainer waits for data
(with ``run_ahead='trainer_first'``, while the trainer works, only on the
cores it leaves: :class:`~pyg_fastload.loader.trainer_load.TrainerLoad`).
Batches come out in order; any stage failure is raised in the consumer
with the stage named; dropping the iterator stops every thread.
"""
from __future__ import annotations

import atexit
import queue
import threading
import time
from collections import deque
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable, Dict, Iterator, List, Optional

from . import priority
from .feature_join import RowFetch
from .sampling_pool import SamplingPool, isolate_thread
from .scheduler import POLL_SECONDS, RunAheadScheduler
from .sequential import (
    TIERS,
    ConsumerClock,
    SequentialIterator,
    new_breakdown,
    step_done,
)
from .trainer_load import TrainerLoad, hold, launch_width
from .transfer import DeviceTransfer, map_tensors

__all__ = ['StageError', 'SequentialIterator', 'PipelineIterator',
           'DeviceTransfer', 'map_tensors', 'new_breakdown', 'TIERS']

_POLL = 0.05  # seconds between checks of the stop flag while blocked


#: Seconds the interpreter's exit waits for each running stage thread.
EXIT_JOIN_SECONDS = 5.0

# The stop flag and threads of every pipeline started, pruned as they end.
_running: list = []
_running_lock = threading.Lock()


def _register(stop: threading.Event, threads: list) -> None:
    with _running_lock:
        _running[:] = [(e, ts) for e, ts in _running
                       if any(t.is_alive() for t in ts)]
        _running.append((stop, threads))


@atexit.register
def _stop_all_stages() -> None:
    r"""At interpreter exit (a finished script, Ctrl-C), stops every stage
    thread still running and waits for it: a daemon thread killed inside a
    torch op aborts the process ("terminate called without an active
    exception")."""
    with _running_lock:
        running = list(_running)
    for stop, _ in running:
        stop.set()
    for _, threads in running:
        for thread in threads:
            thread.join(EXIT_JOIN_SECONDS)


class StageError(RuntimeError):
    r"""A pipeline stage failed; :attr:`stage` names it and the original
    exception is chained as ``__cause__``."""
    def __init__(self, stage: str, error: BaseException):
        super().__init__(f"the {stage} stage of the loader failed: "
                         f"{type(error).__name__}: {error}")
        self.stage = stage


class _Failure:
    def __init__(self, stage: str, error: BaseException):
        self.stage, self.error = stage, error


_END = object()
class _Shared:
    r"""What the stage threads share; the threads never reference the
    iterator itself, so dropping it triggers the shutdown."""
    def __init__(self, sample_capacity: int, load_capacity: int,
                 breakdown: Dict[str, float], load: Optional[TrainerLoad]):
        self.sampled: queue.Queue = queue.Queue(sample_capacity)
        self.loaded: queue.Queue = queue.Queue(load_capacity)
        self.stop = threading.Event()
        self.breakdown = breakdown
        #: Set while the consumer waits for a batch (the trainer starves).
        self.starved = threading.Event()
        #: ``(loading, sampling)`` niceness of this epoch's stage threads.
        self.niceness = priority.stage_niceness()
        #: The trainer's CPU use (``None``: sampling ignores it).
        self.load = load
        #: Seconds from each batch's launch to its task graph's end (a
        #: sampling pool's batches, in order).
        self.dag_seconds: List[float] = []

    def launches(self, workers: int, in_flight: int) -> int:
        r"""Batches the sampling stage may sample at once now."""
        return launch_width(self.load, workers, in_flight,
                            self.starved.is_set())

    def pause(self, workers: int) -> bool:
        r"""Waits to check again whether to launch (``True``: stopped)."""
        return hold(self.load, workers, self.starved, self.stop,
                    POLL_SECONDS, _POLL)

    def put(self, box: queue.Queue, item: Any) -> bool:
        while not self.stop.is_set():
            try:
                box.put(item, timeout=_POLL)
                return True
            except queue.Full:
                continue
        return False

    def get(self, box: queue.Queue) -> Any:
        while not self.stop.is_set():
            try:
                return box.get(timeout=_POLL)
            except queue.Empty:
                continue
        return _END


def _sampling_stage(shared: _Shared, source: Iterator,
                    on_sampled: Callable[[Any], None],
                    scheduler: RunAheadScheduler) -> None:
    isolate_thread(shared.niceness[1])
    try:
        while True:
            t = time.perf_counter()
            while not (shared.launches(1, scheduler.in_flight) and
                       scheduler.should_launch()):
                if shared.pause(1):
                    return
            now = time.perf_counter()
            shared.breakdown['throttled'] += now - t
            t = now
            try:
                out = next(source)
            except StopIteration:
                break
            on_sampled(out)
            seconds = time.perf_counter() - t
            scheduler.launched(t, seconds)
            shared.breakdown['sampling'] += seconds
            if not shared.put(shared.sampled, out):
                return
        shared.put(shared.sampled, _END)
    except BaseException as error:  # surfaced in the consumer
        shared.put(shared.sampled, _Failure('sampling', error))


def _pooled_sampling_stage(shared: _Shared, tasks: Iterator,
                           on_sampled: Callable[[Any], None],
                           scheduler: RunAheadScheduler,
                           workers: int, pool_options: Dict[str, Any]
                           ) -> None:
    r"""The sampling stage with a pool: :obj:`tasks` yields each batch's
    sampling (a callable); this thread launches them onto the pool when
    the scheduler says so and passes the results on in order, with the
    rows the pool fetched hop by hop (``fetched_rows``, which the join
    uses). Batches' tasks run on :obj:`workers` threads at once while the
    trainer waits for data; while it works, on the cores it leaves
    (:meth:`_Shared.launches`). :obj:`pool_options`: the
    :class:`SamplingPool`'s ``order``, ``hop_tasks`` and ``fetch``."""
    isolate_thread(shared.niceness[1])
    pool = SamplingPool(workers, shared.niceness[1], **pool_options,
                        fetch_niceness=shared.niceness[0])
    if shared.load is not None:
        shared.load.watch(pool.threads)
    running: deque = deque()
    launched, exhausted = 0, False
    try:
        while running or not exhausted:
            t = time.perf_counter()
            starved = shared.starved.is_set()
            pool.set_width(workers if starved else max(
                shared.launches(workers, scheduler.in_flight), 1))
            while not exhausted and len(running) < shared.launches(
                    workers, scheduler.in_flight) and \
                    scheduler.should_launch():
                try:
                    task = next(tasks)
                except StopIteration:
                    exhausted = True
                    break
                scheduler.started(time.perf_counter())
                running.append(pool.submit(launched, task))
                launched += 1
            if not running:
                if exhausted:
                    break
                if shared.pause(workers):
                    return
                shared.breakdown['throttled'] += time.perf_counter() - t
                continue
            try:  # short waits: launch more as the scheduler allows
                out, seconds, rows = running[0].result(
                    timeout=POLL_SECONDS)
            except FutureTimeout:
                if shared.stop.is_set():
                    return
                continue
            running.popleft()
            if len(rows) == 1 and rows[0]:  # one graph: its hops' rows
                out.fetched_rows = rows[0]
            shared.dag_seconds.append(seconds)
            on_sampled(out)
            scheduler.sampled(seconds)
            shared.breakdown['sampling'] += seconds
            if not shared.put(shared.sampled, out):
                return
        shared.put(shared.sampled, _END)
    except BaseException as error:  # surfaced in the consumer
        shared.put(shared.sampled, _Failure('sampling', error))
    finally:  # the workers finish their running task before exit
        pool.close(timeout=EXIT_JOIN_SECONDS)


def _loading_stage(shared: _Shared, join: Callable[[Any], Any],
                   transfer: DeviceTransfer) -> None:
    isolate_thread(shared.niceness[0])
    while True:
        item = shared.get(shared.sampled)
        if item is _END or isinstance(item, _Failure):
            shared.put(shared.loaded, item)
            return
        t = time.perf_counter()
        try:
            data = join(item)
            now = time.perf_counter()
            shared.breakdown['feature_loading'] += now - t
            data = transfer.start(data)
        except BaseException as error:
            shared.put(shared.loaded, _Failure('feature loading', error))
            return
        shared.breakdown['transfer'] += time.perf_counter() - now
        if not shared.put(shared.loaded, data):
            return


class PipelineIterator:
    r"""Yields joined batches in order from two background stages.

    Args:
        source (Iterator): yields sampled batches in order (runs in the
            sampling thread).
        on_sampled (callable): called in the sampling thread per batch.
        join (callable): sampled batch -> mini-batch (feature-loading
            thread).
        capacity (int): bound of the queue between loading and the trainer
            (DSP: 2).
        sample_capacity (int): bound of the queue between sampling and
            loading (at least :obj:`capacity`; larger for a look-ahead).
        breakdown (dict): where the time breakdown is accumulated.
        scheduler (RunAheadScheduler): decides when the sampling stage
            starts a batch (within the queues' bounds).
        transfer (DeviceTransfer): moves batches to the device (started in
            the loading thread, finished in the consumer's).
        sampling_workers (int): ``1``: :obj:`source` yields sampled
            batches, sampled in the sampling thread; more: it yields each
            batch's sampling (a callable), run on a pool of that many
            threads.
        trainer_load (TrainerLoad, optional): measures the trainer's
            cores; while it works, sampling launches batches only on the
            cores it leaves.
        task_order (str): how the pool orders ready tasks
            (:class:`~pyg_fastload.loader.sampling_pool.ReadyTasks`).
        hop_tasks (bool): every hop a task of the pool, with its feature
            fetch (:obj:`row_fetch`) chained after it
            (:class:`~pyg_fastload.loader.sampling_pool.SamplingPool`).
        row_fetch (RowFetch, optional): fetches a hop's new rows.
    """
    def __init__(self, source: Iterator, on_sampled: Callable[[Any], None],
                 join: Callable[[Any], Any], capacity: int,
                 sample_capacity: int, breakdown: Dict[str, float],
                 scheduler: RunAheadScheduler, transfer: DeviceTransfer,
                 sampling_workers: int = 1,
                 trainer_load: Optional[TrainerLoad] = None,
                 task_order: str = 'priority', hop_tasks: bool = True,
                 row_fetch: Optional[RowFetch] = None):
        if trainer_load is not None:
            trainer_load.watch((), reset=True)
        self.shared = _Shared(sample_capacity, capacity, breakdown,
                              trainer_load)
        self.clock = ConsumerClock(breakdown)
        self.scheduler = scheduler
        self.transfer = transfer
        self.threads = [
            threading.Thread(target=_sampling_stage, daemon=True,
                             name='pyg_fastload-sampling',
                             args=(self.shared, source, on_sampled,
                                   scheduler))
            if sampling_workers == 1 else
            threading.Thread(target=_pooled_sampling_stage, daemon=True,
                             name='pyg_fastload-sampling',
                             args=(self.shared, source, on_sampled,
                                   scheduler, sampling_workers,
                                   {'order': task_order,
                                    'hop_tasks': hop_tasks,
                                    'fetch': row_fetch})),
            threading.Thread(target=_loading_stage, daemon=True,
                             name='pyg_fastload-loading',
                             args=(self.shared, join, transfer)),
        ]
        for thread in self.threads:
            thread.start()
        if trainer_load is not None:
            trainer_load.watch(self.threads)
        _register(self.shared.stop, self.threads)
        self.done = False
        self.owner: Any = None  # what the stages serve; kept alive by us
        #: Called when the second batch is asked for (the consumer's first
        #: step is done).
        self.after_first_step: Optional[Callable[[], None]] = None
        self.served = 0

    @property
    def dag_seconds(self) -> List[float]:
        r"""Seconds from each batch's launch to its task graph's end, in
        order (a sampling pool's batches only)."""
        return self.shared.dag_seconds

    def __iter__(self) -> 'PipelineIterator':
        return self

    def __next__(self) -> Any:
        if self.done or self.shared.stop.is_set():  # closed, or loader gone
            self.done = True
            raise StopIteration
        self.served = step_done(self.served, self.after_first_step)
        started = self.clock.start_wait()
        if self.shared.load is not None:
            self.shared.load.asked()
        try:
            item = self._wait()
        except BaseException:  # Ctrl-C while waiting: stop the stages now,
            self.close(timeout=0.0)  # even if the iterator stays referenced
            raise
        if item is _END:
            self.clock.end_wait(started, False)
            self.close()
            raise StopIteration
        if isinstance(item, _Failure):
            self.close()
            raise StageError(item.stage, item.error) from item.error
        t = time.perf_counter()
        data = self.transfer.finish(item)
        self.shared.breakdown['transfer'] += time.perf_counter() - t
        self.clock.count_ahead(self.scheduler.in_flight)
        self.scheduler.consumed(self.clock.last_model)
        self.clock.end_wait(started, True)
        if self.shared.load is not None:
            self.shared.load.handed()
        return data

    def _wait(self) -> Any:
        try:
            return self.shared.loaded.get_nowait()
        except queue.Empty:
            pass
        self.shared.starved.set()
        try:
            return self._wait_starved()
        finally:
            self.shared.starved.clear()

    def _wait_starved(self) -> Any:
        while True:
            try:
                return self.shared.loaded.get(timeout=_POLL)
            except queue.Empty:
                if self.shared.stop.is_set():  # the loader was deleted
                    self.done = True
                    raise StopIteration from None
                if not any(t.is_alive() for t in self.threads):
                    self.close()
                    raise RuntimeError("the loader pipeline's threads "
                                       "stopped without a result") from None

    def close(self, timeout: float = 1.0) -> None:
        r"""Stops both stages: each notices within ``_POLL`` seconds, or as
        soon as the user code it is running (a transform) returns; waits at
        most :obj:`timeout` seconds per thread for that (they are daemon
        threads that hold no reference to the loader)."""
        self.done = True
        self.shared.stop.set()
        if timeout <= 0:
            return
        for thread in self.threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    def __del__(self) -> None:
        self.close(timeout=0.0)  # never block the code that dropped it
