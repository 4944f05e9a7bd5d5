r"""The consumer's side of an epoch: the breakdown of its time
(:func:`new_breakdown`, :class:`ConsumerClock`) and the iterator that
samples and loads every batch in the consumer's own thread
(:class:`SequentialIterator`, ``pipeline=False``)."""
from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, Dict, Iterator, Optional

from .transfer import DeviceTransfer

__all__ = ['TIERS', 'new_breakdown', 'ConsumerClock', 'step_done',
           'SequentialIterator']

#: The feature tiers, fastest first, timed under ``feature_loading.<tier>``.
TIERS = ('device', 'host', 'storage')


def new_breakdown() -> Dict[str, float]:
    r"""Seconds per part of an epoch: ``sampling`` and ``feature_loading``
    (busy time of those stages), ``waiting`` (the trainer starved for data),
    ``model`` (time the consumer spent between batches) and ``epoch``
    (wall time of the epoch, = waiting + model); ``batches`` (count) and:

    * ``feature_loading.device``, ``feature_loading.host``,
      ``feature_loading.storage``: the part of ``feature_loading`` spent
      reading feature rows from each tier of a
      :class:`~pyg_fastload.storage.TieredFeatureStore` (a ``Data``
      object's feature matrices count as storage); the rest is slicing the
      subgraph and its other attributes;
    * ``feature_loading.remote``: seconds spent exchanging rows with other
      ranks (a partitioned store, DSP mode);
    * ``transfer``: host-side seconds spent copying batches to the
      loader's ``device`` (pinning, queueing the copies, and making the
      model's stream wait for them; 0 without a CUDA ``device``);
    * ``throttled``: seconds the sampling stage was held back by the
      run-ahead scheduler (launch score below its threshold, or its
      maximum of batches in flight);
    * ``run_ahead``: batches sampled ahead of the model (the one it takes
      included), averaged over the batches it took."""
    return {'sampling': 0.0, 'feature_loading': 0.0, 'waiting': 0.0,
            'model': 0.0, 'epoch': 0.0, 'batches': 0,
            **{f'feature_loading.{tier}': 0.0 for tier in TIERS},
            'feature_loading.remote': 0.0,
            'transfer': 0.0, 'throttled': 0.0, 'run_ahead': 0.0}


class ConsumerClock:
    r"""Splits the consumer's wall time into waiting and model time."""
    def __init__(self, breakdown: Dict[str, float]):
        self.breakdown = breakdown
        self.returned_at: Optional[float] = None
        #: Seconds the model spent on the last batch (None before one).
        self.last_model: Optional[float] = None
        self.ahead_sum = 0

    def start_wait(self) -> float:
        now = time.perf_counter()
        if self.returned_at is not None:
            self.last_model = now - self.returned_at
            self.breakdown['model'] += self.last_model
        return now

    def count_ahead(self, ahead: int) -> None:
        r"""The batch being returned had :obj:`ahead` batches (itself
        included) sampled ahead of the model."""
        self.ahead_sum += ahead
        self.breakdown['run_ahead'] = self.ahead_sum / (
            self.breakdown['batches'] + 1)

    def end_wait(self, started: float, got_batch: bool) -> None:
        now = time.perf_counter()
        self.breakdown['waiting'] += now - started
        self.breakdown['epoch'] = (self.breakdown['waiting'] +
                                   self.breakdown['model'])
        self.breakdown['batches'] += int(got_batch)
        self.returned_at = now


def step_done(served: int, callback: Optional[Callable[[], None]]) -> int:
    r"""Counts a request for a batch; the second one calls
    :obj:`callback` (the consumer has finished a step with the first)."""
    if served == 1 and callback is not None:
        callback()
    return served + 1


class SequentialIterator:
    r"""Samples up to :obj:`depth` batches ahead (for a window-buffered
    cache or read batching) and joins (and moves) each in the consumer's
    thread."""
    def __init__(self, source: Iterator, on_sampled: Callable[[Any], None],
                 join: Callable[[Any], Any], depth: int,
                 breakdown: Dict[str, float], transfer: DeviceTransfer):
        self.source, self.on_sampled, self.join = source, on_sampled, join
        self.depth = depth
        self.transfer = transfer
        self.window: deque = deque()
        self.exhausted = False
        self.breakdown = breakdown
        self.clock = ConsumerClock(breakdown)
        #: Called when the second batch is asked for (the consumer's first
        #: step is done).
        self.after_first_step: Optional[Callable[[], None]] = None
        self.served = 0

    def __iter__(self) -> 'SequentialIterator':
        return self

    def __next__(self) -> Any:
        self.served = step_done(self.served, self.after_first_step)
        started = self.clock.start_wait()
        try:
            while not self.exhausted and len(self.window) <= self.depth:
                t = time.perf_counter()
                try:
                    out = next(self.source)
                except StopIteration:
                    self.exhausted = True
                    break
                self.on_sampled(out)
                self.breakdown['sampling'] += time.perf_counter() - t
                self.window.append(out)
            if not self.window:
                raise StopIteration
            self.clock.count_ahead(len(self.window))
            t = time.perf_counter()
            data = self.join(self.window.popleft())
            now = time.perf_counter()
            self.breakdown['feature_loading'] += now - t
            data = self.transfer.finish(self.transfer.start(data))
            self.breakdown['transfer'] += time.perf_counter() - now
        except StopIteration:
            self.clock.end_wait(started, False)
            raise
        self.clock.end_wait(started, True)
        return data
