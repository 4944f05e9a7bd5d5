r"""ByteGNN's sampling tasks (sections 3.1-3.2): a batch's sampling is a
task graph of one-hop tasks.

A hop-wise sampler writes a batch's sampling as a generator of
:class:`Work` steps: each step hands its runner the draws of one hop (one
task, or one per chunk of :data:`CHUNK_NODES` frontier nodes when the
frontier is large) and the rows the previous hop reached for the first
time (a slice of the batch's ``n_id``, which a feature fetch can read at
once); the runner sends the draws' results back, and the generator's next
step relabels them and builds the following hop. So hop ``k + 1`` depends
on hop ``k``, each hop's fetch on its hop only, and the batch's end on
every fetch: ByteGNN's DAG of a supervised batch.

:class:`TaskRunner` (the default) runs the steps in order in the calling
thread; a sampling pool installs a runner in its threads
(:func:`use_runner`) that queues every task of every batch in flight and
serves the oldest batch first, its cheapest task first. Every draw reads
a random stream seeded from the batch (a chunk's from the batch's and its
index), never from the thread or the order that runs it, so a batch is the
same on any runner.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import (Any, Callable, Generator, List, Optional, Sequence,
                    TypeVar)

from torch import Tensor

__all__ = ['CHUNK_NODES', 'Work', 'Steps', 'TaskRunner', 'use_runner',
           'current_runner', 'chunk_bounds']

T = TypeVar('T')

#: Frontier nodes per sampling task (a hop with more is split).
CHUNK_NODES = 65536


@dataclass
class Work:
    r"""One step of a batch's task graph.

    Args:
        tasks (list): the hop's draws (independent; results sent back in
            this order).
        costs (list): each draw's cost, for a runner that orders by it
            (ByteGNN: the draw's input vertices' neighbour count).
        rows (Tensor, optional): node ids reached for the first time by
            the previous hop (the seeds at the first step): the next slice
            of the batch's ``n_id``, ready to fetch.
        movable (bool): whether the generator may be resumed in another
            thread (``False``: a sampler keeping per-thread state).
    """
    tasks: Sequence[Callable[[], Any]]
    costs: Sequence[float]
    rows: Optional[Tensor] = None
    movable: bool = True


#: A batch's sampling: :class:`Work` steps, each sent its draws' results;
#: returns the batch.
Steps = Generator[Work, List[Any], T]


class TaskRunner:
    r"""Runs a batch's task graph: here step by step, every task in order,
    in the calling thread."""

    #: Whether the runner reads :attr:`Work.costs` and :attr:`Work.rows`
    #: (a sampler leaves them empty for one that does not).
    wants_costs = False

    def drive(self, steps: Steps) -> T:
        r"""The batch :obj:`steps` returns, its tasks run."""
        try:
            work = next(steps)
            while True:
                work = steps.send([task() for task in work.tasks])
        except StopIteration as done:
            return done.value

    def run(self, tasks: Sequence[Callable[[], T]],
            costs: Sequence[float]) -> List[T]:
        r"""The results of :obj:`tasks` in their order (one step;
        :obj:`costs`: each task's estimated cost)."""
        def once() -> Steps:
            return (yield Work(tasks, costs))
        return self.drive(once())


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
