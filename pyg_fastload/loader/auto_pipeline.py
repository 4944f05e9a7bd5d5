r"""``pipeline='auto'`` decided within the first epoch
(:class:`AutoIterator`): its first batches are sampled and loaded in the
consumer's thread; once :data:`AUTO_MIN_BATCHES` batches after the first
have been measured, the rest of the epoch runs in the pipeline's threads if
sampling and loading took at least :data:`PIPELINE_MIN_LOAD_SHARE` of the
consumer's time, and on in its thread otherwise. The batches are the same
either way: both draw the epoch's batches, in order, from one source.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional, Tuple

from .pipeline import PipelineIterator, SequentialIterator

__all__ = ['AutoIterator', 'PIPELINE_MIN_LOAD_SHARE', 'AUTO_MIN_BATCHES',
           'load_share']

#: ``pipeline='auto'`` pipelines once sampling + loading took at least this
#: share of the consumer's time ...
PIPELINE_MIN_LOAD_SHARE = 0.1
#: ... measured over at least this many batches (within an epoch: after its
#: first, whose one-off costs would skew the share; or a whole shorter
#: epoch, judged when the next one starts).
AUTO_MIN_BATCHES = 4


def load_share(breakdown: Dict[str, float]) -> float:
    r"""The share of an epoch's time (waits for data and model steps) that
    sampling and feature loading took."""
    return (breakdown['sampling'] + breakdown['feature_loading']) / max(
        breakdown['epoch'], 1e-9)


class AutoIterator:
    r"""Serves an undecided ``pipeline='auto'`` epoch: batches from
    :obj:`sequential` until the share of the consumer's time that loading
    took is known, then, if it reaches :data:`PIPELINE_MIN_LOAD_SHARE`,
    from the pipeline :obj:`start_pipeline` starts on the batches left
    (after :obj:`sequential` has served the ones it sampled ahead).

    Args:
        sequential (SequentialIterator): the epoch in the consumer's thread.
        start_pipeline (callable): starts the pipeline on the source's
            remaining batches.
        decided (callable): told the decision (``True``: pipelined), once.
    """
    def __init__(self, sequential: SequentialIterator,
                 start_pipeline: Callable[[], PipelineIterator],
                 decided: Callable[[bool], None]):
        self.sequential = sequential
        self.current: Any = sequential
        self.start_pipeline = start_pipeline
        self.decided = decided
        #: ``(batches, loading seconds, consumer seconds)`` after the first
        #: batch; ``None`` before it, or once decided.
        self._mark: Optional[Tuple[float, float, float]] = None
        self._judging = True
        self._switching = False

    @property
    def after_first_step(self) -> Optional[Callable[[], None]]:
        return self.sequential.after_first_step

    @after_first_step.setter
    def after_first_step(self, callback: Optional[Callable[[], None]]
                         ) -> None:
        self.sequential.after_first_step = callback

    @property
    def pipelined(self) -> bool:
        r"""Whether batches now come from the pipeline's threads."""
        return self.current is not self.sequential

    def __iter__(self) -> 'AutoIterator':
        return self

    def __next__(self) -> Any:
        if self._judging:
            self._judge()
        try:
            return next(self.current)
        except StopIteration:
            if not self._switching or self.pipelined:
                raise
        # The batches sampled ahead were served: the pipeline takes over.
        self.current = self.start_pipeline()
        self.current.clock = self.sequential.clock  # the model's time on
        return next(self.current)

    def _judge(self) -> None:
        r"""Marks the consumer's time after the first batch; decides once
        :data:`AUTO_MIN_BATCHES` more were served (their model steps
        included: the one since the last batch is still running)."""
        breakdown, clock = self.sequential.breakdown, self.sequential.clock
        if breakdown['batches'] < 1 or clock.returned_at is None:
            return
        since_last = time.perf_counter() - clock.returned_at
        now = (breakdown['batches'],
               breakdown['sampling'] + breakdown['feature_loading'],
               breakdown['waiting'] + breakdown['model'] + since_last)
        if self._mark is None:
            self._mark = now
            return
        if now[0] - self._mark[0] < AUTO_MIN_BATCHES:
            return
        share = (now[1] - self._mark[1]) / max(now[2] - self._mark[2], 1e-9)
        pipelined = share >= PIPELINE_MIN_LOAD_SHARE
        self._judging = False
        self.decided(pipelined)
        if pipelined:
            self._switching = True
            self.sequential.stop_sampling()

    def close(self, timeout: float = 1.0) -> None:
        r"""Stops the pipeline's threads, if it started."""
        if self.pipelined:
            self.current.close(timeout)
