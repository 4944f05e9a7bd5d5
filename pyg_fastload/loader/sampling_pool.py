r"""The sampling stage's worker pool (ByteGNN section 4: sampling work runs
on a pool of workers, and ready work of the oldest batch goes first).

Each batch's sampling is one task here, run by one of the pool's threads
(torch's sampling ops release the GIL: on 2 cores the loader with a pool
of 2 samples 1.6x the batches of one sampling thread, ``pyg-fastload bench
sampling``). Tasks wait in a heap ordered by batch: a free worker always
takes the oldest batch's task.
A batch's random stream comes from its index, never from the thread that
samples it, so the batches are the same whatever the number of workers.
"""
from __future__ import annotations

import heapq
import os
import threading
import time
from concurrent.futures import Future
from typing import Any, Callable, List, Tuple

import torch

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


class SamplingPool:
    r"""Threads running batches' sampling tasks, the oldest batch first.

    Args:
        workers (int): threads.
        niceness (int): CPU priority each thread lowers itself by.
    """
    def __init__(self, workers: int, niceness: int):
        if isinstance(workers, bool) or not isinstance(workers, int) or \
                workers < 1:
            raise ValueError(f"'workers' = {workers!r} must be an int >= 1")
        self._ready: List[Tuple[int, int, Callable[[], Any], Future]] = []
        self._submitted = 0
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
            self._cond.notify()
        return future

    def _work(self, niceness: int) -> None:
        isolate_thread(niceness)
        while True:
            with self._cond:
                while not self._ready and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                _, _, task, future = heapq.heappop(self._ready)
            if not future.set_running_or_notify_cancel():
                continue
            started = time.perf_counter()
            try:
                result = task()
            except BaseException as error:  # handed to the stage
                future.set_exception(error)
            else:
                future.set_result((result, time.perf_counter() - started))

    def close(self, timeout: float = 0.0) -> None:
        r"""Stops the workers once their running tasks return (queued tasks
        are dropped); waits up to :obj:`timeout` seconds per thread."""
        with self._cond:
            self._closed = True
            dropped, self._ready = self._ready, []
            self._cond.notify_all()
        for *_, future in dropped:
            future.cancel()
        if timeout > 0:
            for thread in self.threads:
                thread.join(timeout)
