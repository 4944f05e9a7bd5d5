r"""Liveness of a run's ranks, whatever their main threads are doing: a
thread of each rank beats (a counter in the process group's store) and
watches the others' beats. A rank that stops beating (frozen by SIGSTOP, a
hung machine) is named long before a collective's timeout, reported to the
other ranks, killed if it runs on this machine, and this rank stops too."""
from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

__all__ = ['Heartbeat', 'silence_for']

SEEN = 'pyg_fastload/seen/'
FAILED = 'pyg_fastload/failed/'
#: What a rank writes when it stops beating on purpose (run over).
DONE = 'done'


def silence_for(timeout: float) -> float:
    r"""How long a rank may be silent before it counts as frozen, for a
    collective timeout of :obj:`timeout` seconds: a fifth of it, within
    [10 s, 60 s]."""
    return max(10.0, min(60.0, timeout / 5))


class Heartbeat:
    r"""One rank's beating and watching thread.

    Args:
        store: the process group's key-value store.
        rank (int): this rank.
        world_size (int): the number of ranks.
        silence (float): seconds without a beat after which a rank is
            frozen (:func:`silence_for`).
        grace (float): seconds this rank waits, after naming a frozen rank,
            for its own main thread to fail by itself before it exits with
            status 1.
        exit (callable): how it exits then (default :func:`os._exit`).
    """
    def __init__(self, store: Any, rank: int, world_size: int,
                 silence: float, grace: float = 10.0,
                 exit: Callable[[int], None] = os._exit):
        self.store = store
        self.rank = rank
        self.world_size = world_size
        self.silence = silence
        self.interval = min(2.0, silence / 5)
        self.grace = grace
        self._exit = exit
        #: The step this rank reached (set by whoever trains).
        self.step = 0
        self._count = 0
        self._host = socket.gethostname()
        # rank -> (last value read, local time it last changed)
        self._seen: Dict[int, Tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.frozen: Optional[str] = None

    def start(self) -> None:
        r"""Starts beating and watching (once)."""
        if self._thread is None:
            self._beat()
            self._thread = threading.Thread(target=self._run, daemon=True,
                                            name='pyg-fastload-heartbeat')
            self._thread.start()

    def stop(self) -> None:
        r"""Stops, telling the others this rank is done (not frozen)."""
        self._stop.set()
        try:
            self.store.set(f'{SEEN}{self.rank}', DONE)
        except Exception:  # the store may be gone: nothing to tell
            pass

    def _beat(self) -> None:
        self._count += 1
        self.store.set(f'{SEEN}{self.rank}', f'{self._count} {self.step} '
                       f'{os.getpid()} {self._host} {time.time()}')

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._beat()
                silent = self._silent()
            except Exception:  # the store is gone: the run is ending
                return
            if silent is not None:
                self._end(*silent)
                return

    def _silent(self) -> Optional[Tuple[int, str]]:
        r"""``(rank, message)`` of a rank silent for :attr:`silence`."""
        now = time.monotonic()
        for rank in range(self.world_size):
            key = f'{SEEN}{rank}'
            if rank == self.rank or not self.store.check([key]):
                continue  # not started yet: its start-up is not a beat
            value = self.store.get(key).decode()
            last = self._seen.get(rank)
            if last is None or last[0] != value:
                self._seen[rank] = (value, now)
            elif value != DONE and now - last[1] >= self.silence:
                step = value.split()[1]
                return rank, (f'rank {rank}: last heard {now - last[1]:.0f}s '
                              f'ago at step {step}')
        return None

    def last_heard(self) -> List[str]:
        r"""``'rank R: last heard N s ago at step S'`` for every other rank
        that beat and did not finish, the longest silent first (read from
        the store now, by the beats' wall-clock times)."""
        now = time.time()
        heard = []
        try:
            for rank in range(self.world_size):
                key = f'{SEEN}{rank}'
                if rank != self.rank and self.store.check([key]):
                    value = self.store.get(key).decode()
                    if value != DONE:
                        _, step, _, _, wall = value.split()
                        heard.append((now - float(wall), rank, step))
        except Exception:  # the store is gone
            return []
        return [f'rank {rank}: last heard {ago:.1f}s ago at step {step}'
                for ago, rank, step in sorted(heard, reverse=True)]

    def _end(self, rank: int, message: str) -> None:
        r"""A frozen rank: name it, tell the others, kill it if it is on
        this machine, and stop this rank if its main thread does not."""
        self.frozen = message
        print(f'pyg-fastload: rank {self.rank} stopping: {message} (frozen?)',
              file=sys.stderr, flush=True)
        try:
            self.store.set(f'{FAILED}{rank}', f'frozen: {message}')
            _, _, pid, host, _ = \
                self.store.get(f'{SEEN}{rank}').decode().split()
            if host == self._host and int(pid) != os.getpid():
                os.kill(int(pid), signal.SIGKILL)
        except Exception:  # gone already, or the store with it
            pass
        if not self._stop.wait(self.grace):
            self._exit(1)
