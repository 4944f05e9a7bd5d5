r"""A rank that fails before the process group forms, told to the others;
the process group of a rank that ``torchrun --max-restarts`` restarted,
formed on keys of its attempt's own (:func:`form_restarted_group`).

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
from typing import Any, Callable, Mapping, Optional, Tuple

import torch.distributed as dist

__all__ = ['StartupWatch', 'form_restarted_group']

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


#: The prefix of the keys a restarted attempt's process group forms on.
_GROUP_KEY = 'pyg_fastload/attempt/{attempt}'


def form_restarted_group(backend: str, timeout: timedelta,
                         device_id: Any = None,
                         env: Optional[Mapping[str, str]] = None) -> bool:
    r"""Forms the default process group of a rank that ``torchrun
    --max-restarts`` restarted, on the launcher's store under a prefix of
    the attempt's own; whether it did (not under torchrun's shared store,
    or in its first attempt: the caller forms the group as usual).

    torchrun keeps one key-value store across restarts, and ranks form
    their group on it without a prefix (torch 2.13): a restarted rank may
    read the address a killed rank of the attempt before wrote there and
    wait for that process until the timeout (gloo: ``connectFullMesh
    failed ... Connection refused``), and would read the failures and
    heartbeats of that attempt too.

    Args:
        backend (str): the group's backend (``'gloo'``, ``'nccl'``).
        timeout (timedelta): its collectives' timeout.
        device_id (optional): ``init_process_group``'s ``device_id``.
        env (mapping, optional): the environment (default: this
            process's).
    """
    env = os.environ if env is None else env
    attempt = env.get('TORCHELASTIC_RESTART_COUNT', '0')
    if env.get('TORCHELASTIC_USE_AGENT_STORE') != 'True' or attempt == '0' \
            or dist.is_initialized():
        return False
    world_size = int(env['WORLD_SIZE'])
    store = dist.TCPStore(env['MASTER_ADDR'], int(env['MASTER_PORT']),
                          world_size, False, timeout)
    dist.init_process_group(
        backend, store=dist.PrefixStore(_GROUP_KEY.format(attempt=attempt),
                                        store),
        rank=int(env['RANK']), world_size=world_size, timeout=timeout,
        device_id=device_id)
    return True
