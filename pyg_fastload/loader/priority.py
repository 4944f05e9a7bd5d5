r"""The stage threads' CPU priority, chosen when an epoch's stages start.

On an idle machine the stages run at a lower priority than the trainer
(niceness :data:`STAGE_NICENESS`, sampling :data:`SAMPLING_NICENESS`): the
trainer comes first and the stages take the CPU time it leaves. When other
processes are runnable as the stages start (a shared machine, preprocessing
beside training, other ranks), niced stages would lose nearly all their CPU
time to them (CFS gives a niceness-10 thread a tenth of a niceness-0
one's share), so they run at the trainer's own priority instead. A thread
cannot lower its niceness again once raised, so the choice is made per
epoch, by the threads that start then.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Optional, Tuple

__all__ = ['STAGE_NICENESS', 'SAMPLING_NICENESS', 'other_runnable',
           'stage_niceness']

#: Niceness of the loading stage on an idle machine: the trainer comes
#: first; the stages take the CPU time it leaves (and all of it while it
#: waits for data).
STAGE_NICENESS = 10
#: Niceness of the sampling stage on an idle machine: it works on newer
#: batches than the loading stage, so it yields to it.
SAMPLING_NICENESS = STAGE_NICENESS + 2


def _own_runnable(task_dir: str) -> int:
    r"""Threads of this process running or runnable now."""
    count = 0
    for task in os.listdir(task_dir):
        try:
            with open(os.path.join(task_dir, task, 'stat')) as f:
                stat = f.read()
        except OSError:  # the thread ended
            continue
        if stat[stat.rfind(')') + 2:].startswith('R'):
            count += 1
    return count


def other_runnable(samples: int = 5, interval: float = 0.002,
                   path: str = '/proc/loadavg',
                   task_dir: str = '/proc/self/task') -> Optional[int]:
    r"""Threads of other processes runnable now: the fewest, over
    :obj:`samples` readings, of the system-wide runnable count
    (``/proc/loadavg``'s fourth field) less this process's runnable threads
    (so its own intra-op threads and stages never count); ``None`` where
    it cannot be read (not Linux)."""
    counts = []
    for i in range(samples):
        try:
            with open(path) as f:
                running = int(f.read().split()[3].split('/')[0])
            counts.append(running - _own_runnable(task_dir))
        except (OSError, IndexError, ValueError):
            return None
        if i + 1 < samples:
            time.sleep(interval)
    return max(min(counts), 0)


def stage_niceness(probe: Optional[Callable[[], Optional[int]]] = None
                   ) -> Tuple[int, int]:
    r"""``(loading, sampling)`` niceness for the stages starting now: the
    idle machine's, or ``(0, 0)`` (the trainer's priority) while other
    threads are runnable (:obj:`probe`, default :func:`other_runnable`)."""
    busy = (probe or other_runnable)()
    if busy:
        return 0, 0
    return STAGE_NICENESS, SAMPLING_NICENESS
