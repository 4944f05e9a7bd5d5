r"""ByteGNN's sampling tasks (section 4): a hop of a batch whose frontier
is large is drawn as several tasks, one per chunk of :data:`CHUNK_NODES`
frontier nodes; the batch's relabelling joins them before the next hop.

Each chunk draws from its own random stream, seeded from the batch's
generator, the hop and the chunk's index, never from the thread that runs
it, so a batch is the same whether its chunks run in order in one thread
(:class:`TaskRunner`, the default) or at once on a pool's threads (a
runner the pool installs in its threads with :func:`use_runner`).
"""
from __future__ import annotations

import threading
from typing import Callable, List, Optional, Sequence, TypeVar

__all__ = ['CHUNK_NODES', 'TaskRunner', 'use_runner', 'current_runner',
           'chunk_bounds']

T = TypeVar('T')

#: Frontier nodes per sampling task (a hop with more is split).
CHUNK_NODES = 65536


class TaskRunner:
    r"""Runs one batch's tasks: here in order in the calling thread."""

    def run(self, tasks: Sequence[Callable[[], T]],
            costs: Sequence[float]) -> List[T]:
        r"""The results of :obj:`tasks` in their order (:obj:`costs`: each
        task's estimated cost, which a pool may order them by)."""
        return [task() for task in tasks]


_INLINE = TaskRunner()
_local = threading.local()


def use_runner(runner: Optional[TaskRunner]) -> None:
    r"""Makes :obj:`runner` run the tasks of the batches this thread
    samples (``None``: back to running them in order)."""
    _local.runner = runner


def current_runner() -> TaskRunner:
    r"""The runner of the calling thread."""
    return getattr(_local, 'runner', None) or _INLINE


def chunk_bounds(size: int, chunk: int) -> List[range]:
    r"""``[0, size)`` cut into ranges of :obj:`chunk` (the last shorter)."""
    return [range(lo, min(lo + chunk, size)) for lo in range(0, size, chunk)]
