r"""A rank that fails before the process group forms, told to the others.

Under ``torchrun`` the launcher's key-value store (``MASTER_ADDR``,
``MASTER_PORT``) is up before any rank starts; a rank that fails while it
reads its configuration never joins the process group, and the other ranks
would wait in ``init_process_group`` for the whole timeout, naming nobody
(torchrun ends the other ranks of the same machine, not those of another).
Until its process group forms, each rank watches that store: a failing
rank writes its error there and the others stop within a second or two,
naming it."""
from __future__ import annotations

import os
import sys
import threading
from datetime import timedelta
from typing import Callable, Mapping, Optional, Tuple

import torch.distributed as dist

__all__ = ['StartupWatch']

_KEY = 'pyg_fastload/startup/{attempt}/failed/'


class StartupWatch:
    r"""One rank's watch over the other ranks' start-up.

    Args:
        host (str): the launcher's store (``MASTER_ADDR``).
        port (int): its port (``MASTER_PORT``).
        rank (int): this rank.
        world_size (int): the number of ranks.
        attempt (str): the launcher's restart count (a restarted run's
            ranks do not read the failures of the attempt before).
        formed (callable): whether this rank's process group has formed
            (from then on the collectives and the heartbeat name failures).
        exit (callable): how this rank ends when another failed.
        interval (float): seconds between looks.

    Example:
        >>> watch = StartupWatch.from_env({})  # not under torchrun
        >>> watch is None
        True
    """
    def __init__(self, host: str, port: int, rank: int, world_size: int,
                 attempt: str = '0',
                 formed: Optional[Callable[[], bool]] = None,
                 exit: Callable[[int], None] = os._exit,
                 interval: float = 0.5):
        self.host, self.port = host, port
        self.rank, self.world_size = rank, world_size
        self.prefix = _KEY.format(attempt=attempt)
        self._formed = formed if formed is not None else _group_formed
        self._exit = exit
        self.interval = interval
        self._store = None
        self._connected = threading.Event()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @classmethod
    def from_env(cls, env: Optional[Mapping[str, str]] = None
                 ) -> Optional['StartupWatch']:
        r"""The watch of a rank that ``torchrun`` started with other
        ranks (:obj:`None` otherwise: one process, or a launcher whose
        store does not exist before the ranks start)."""
        env = os.environ if env is None else env
        try:
            world_size = int(env.get('WORLD_SIZE', '1'))
            rank, port = int(env['RANK']), int(env['MASTER_PORT'])
            host = env['MASTER_ADDR']
        except (KeyError, ValueError):
            return None
        if world_size < 2 or env.get('TORCHELASTIC_USE_AGENT_STORE') != \
                'True':
            return None
        return cls(host, port, rank, world_size,
                   env.get('TORCHELASTIC_RESTART_COUNT', '0'))

    def start(self) -> None:
        r"""Starts watching in a thread (once)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, daemon=True,
                name='pyg-fastload-startup-watch')
            self._thread.start()

    def stop(self) -> None:
        r"""Stops watching."""
        self._stop.set()

    def fail(self, message: str, wait: float = 10.0) -> bool:
        r"""Tells the other ranks this rank failed with :obj:`message`
        (waiting up to :obj:`wait` seconds for the store); whether they
        were told."""
        self.stop()
        if not self._connected.wait(wait):
            return False
        try:
            self._store.set(f'{self.prefix}{self.rank}', message[:500])
        except Exception:  # the store is gone: nobody left to tell
            return False
        return True

    def _run(self) -> None:
        while not self._stop.is_set() and self._store is None:
            try:
                self._store = dist.TCPStore(self.host, self.port, None, False,
                                       timedelta(seconds=5),
                                       wait_for_workers=False)
            except Exception:  # not up yet, or refused: look again
                if self._stop.wait(self.interval):
                    return
        self._connected.set()
        while not self._stop.wait(self.interval):
            if self._formed():
                return
            failed = self.failed()
            if failed is not None:
                rank, message = failed
                print(f'pyg-fastload: rank {self.rank} stopping: rank '
                      f'{rank} failed before the ranks connected: '
                      f'{message}', file=sys.stderr, flush=True)
                self._exit(1)
                return

    def failed(self) -> Optional[Tuple[int, str]]:
        r"""``(rank, message)`` of another rank that told its failure."""
        try:
            for rank in range(self.world_size):
                key = f'{self.prefix}{rank}'
                if rank != self.rank and self._store.check([key]):
                    return rank, self._store.get(key).decode(
                        errors='replace')
        except Exception:  # the store is gone: the launcher is ending
            self._stop.set()
        return None


def _group_formed() -> bool:
    return dist.is_available() and dist.is_initialized()
