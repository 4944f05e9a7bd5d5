r"""``pipeline='auto'`` decided within the first epoch
(:class:`AutoIterator`), by measuring both ways of running it on the epoch's
own batches:

1. the first batches are sampled and loaded in the consumer's thread; once
   :data:`AUTO_MIN_BATCHES` batches after the first were measured, the
   epoch stays there if sampling and loading took less than
   :data:`PIPELINE_MIN_LOAD_SHARE` of the consumer's time (nothing to hide);
2. otherwise the next batches come from the pipeline's threads, and once
   :data:`AUTO_MIN_BATCHES` of them (after one that fills the pipeline) were
   measured, the pipeline stays unless the consumer's wall time per batch
   (waits for data and model steps) grew by more than
   :data:`PIPELINE_TOLERANCE` over the consumer's thread's: then the batches
   in flight are served and the epoch goes back to the consumer's thread.

The batches are the same either way: every part of the epoch draws the
next batches, in order, from one :class:`Gate`d source. The times judged
are read by :func:`read_epoch`, the one place the clock is read (a test
replaces it to decide on a fake clock).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from .pipeline import PipelineIterator
from .sequential import ConsumerClock, SequentialIterator

__all__ = ['AutoIterator', 'Gate', 'PIPELINE_MIN_LOAD_SHARE',
           'AUTO_MIN_BATCHES', 'PIPELINE_TOLERANCE', 'load_share',
           'read_epoch']

#: ``pipeline='auto'`` tries the pipeline once sampling + loading took at
#: least this share of the consumer's time ...
PIPELINE_MIN_LOAD_SHARE = 0.1
#: ... measured over at least this many batches (within an epoch: after its
#: first, whose one-off costs would skew the share; or a whole shorter
#: epoch, judged when the next one starts).
AUTO_MIN_BATCHES = 4
#: The pipeline is kept unless it made the consumer's time per batch
#: longer than in its own thread by more than this share.
PIPELINE_TOLERANCE = 0.1


def load_share(breakdown: Dict[str, float]) -> float:
    r"""The share of an epoch's time (waits for data and model steps) that
    sampling and feature loading took."""
    return (breakdown['sampling'] + breakdown['feature_loading']) / max(
        breakdown['epoch'], 1e-9)


def read_epoch(breakdown: Dict[str, float], clock: ConsumerClock
               ) -> Tuple[float, float, float]:
    r"""What ``'auto'`` judges an epoch by, read as the consumer asks for
    a batch: ``(batches served, seconds sampling and loading took, the
    consumer's seconds)`` so far (its waits for data and its model steps,
    the step since the last batch included).

    Args:
        breakdown (dict): the epoch's time breakdown.
        clock (ConsumerClock): the consumer's clock (a batch returned).
    """
    since_last = time.perf_counter() - clock.returned_at
    return (breakdown['batches'],
            breakdown['sampling'] + breakdown['feature_loading'],
            breakdown['waiting'] + breakdown['model'] + since_last)


class Gate:
    r"""Passes on the items of :obj:`source` while open; closed, it ends
    the iteration of whoever reads it, without taking an item (the source
    keeps the rest for the next reader)."""
    def __init__(self, source: Iterator):
        self.source = source
        self.closed = threading.Event()

    def __iter__(self) -> 'Gate':
        return self

    def __next__(self) -> Any:
        if self.closed.is_set():
            raise StopIteration
        return next(self.source)


class _Probe:
    r"""The consumer's seconds per batch, and the share of them loading
    took, over the batches served since :meth:`start` (the step since the
    last batch included)."""
    def __init__(self, breakdown: Dict[str, float], clock: ConsumerClock):
        self.breakdown, self.clock = breakdown, clock
        self.mark: Optional[Tuple[float, float, float]] = None

    def _now(self) -> Tuple[float, float, float]:
        return read_epoch(self.breakdown, self.clock)

    def start(self) -> None:
        self.mark = self._now()

    def measured(self) -> Optional[Tuple[float, float]]:
        r"""``(seconds per batch, loading share)`` once
        :data:`AUTO_MIN_BATCHES` batches were served since the mark."""
        now = self._now()
        batches = now[0] - self.mark[0]
        if batches < AUTO_MIN_BATCHES:
            return None
        spent = max(now[2] - self.mark[2], 1e-9)
        return spent / batches, (now[1] - self.mark[1]) / spent


class AutoIterator:
    r"""Serves an undecided ``pipeline='auto'`` epoch (see the module).

    Args:
        source (Gate): the epoch's batches not yet drawn, read by every
            part of the epoch in turn.
        start_sequential (callable): the consumer's-thread iterator over
            :obj:`source`.
        start_pipeline (callable): the pipeline over :obj:`source`.
        decided (callable): told the decision (``True``: pipelined), once.
    """
    def __init__(self, source: Gate,
                 start_sequential: Callable[[], SequentialIterator],
                 start_pipeline: Callable[[], PipelineIterator],
                 decided: Callable[[bool], None]):
        self.source = source
        self.start_sequential = start_sequential
        self.start_pipeline = start_pipeline
        self.decided = decided
        self.first = start_sequential()
        self.current: Any = self.first
        self._probe = _Probe(self.first.breakdown, self.first.clock)
        #: The consumer's seconds per batch in its own thread.
        self._sequential_time: Optional[float] = None
        self._judging = True

    @property
    def after_first_step(self) -> Optional[Callable[[], None]]:
        return self.first.after_first_step

    @after_first_step.setter
    def after_first_step(self, callback: Optional[Callable[[], None]]
                         ) -> None:
        self.first.after_first_step = callback

    @property
    def pipelined(self) -> bool:
        r"""Whether batches now come from the pipeline's threads."""
        return isinstance(self.current, PipelineIterator)

    def __iter__(self) -> 'AutoIterator':
        return self

    def __next__(self) -> Any:
        if self._judging and not self.source.closed.is_set() and \
                self.current.clock.returned_at is not None:
            self._judge()
        while True:
            try:
                return next(self.current)
            except StopIteration:
                if not self.source.closed.is_set():
                    raise  # the epoch's end
            # What the part before drew was served: the next part goes on,
            # measured from its second batch (its first fills a pipeline).
            self.source.closed.clear()
            following = (self.start_sequential() if self.pipelined
                         else self.start_pipeline())
            following.clock = self.current.clock  # the model's time goes on
            self.current = following
            self._probe.mark = None

    def _judge(self) -> None:
        probe = self._probe
        if probe.mark is None:
            probe.start()
            return
        measured = probe.measured()
        if measured is None:
            return
        seconds, share = measured
        if self._sequential_time is None:  # the consumer's thread measured
            if share < PIPELINE_MIN_LOAD_SHARE:
                self._decide(False)
            else:
                self._sequential_time = seconds
                self.source.closed.set()  # serve what it drew, then pipeline
            return
        pipelined = seconds <= self._sequential_time * (
            1 + PIPELINE_TOLERANCE)
        self._decide(pipelined)
        if not pipelined:
            self.source.closed.set()  # serve what is in flight, then back

    def _decide(self, pipelined: bool) -> None:
        self._judging = False
        self.decided(pipelined)

    def close(self, timeout: float = 1.0) -> None:
        r"""Stops the pipeline's threads, if it runs."""
        if self.pipelined:
            self.current.close(timeout)
