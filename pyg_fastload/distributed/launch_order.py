r"""DSP's collective communication coordinator: concurrent stages (sampling,
feature loading) that share one communicator must launch their collectives
in the same order on every rank, or rank 0's "batch 3, hop 1" meets rank
1's "batch 2, features" and both wait forever.

Every collective gets an id that is the same on all ranks, ``(batch,
stage, hop, phase)``. A stage hands its collective to the coordinator with
:meth:`LaunchCoordinator.run`; one coordinator thread per rank launches
them: the leader (rank 0) takes the smallest id among those its own stages
have submitted and broadcasts it on a control group; followers wait until
their own stages have submitted that id and launch it. Every rank thus
launches the same sequence, whatever its threads' timing.

Why the followers' stages always get there: each stage submits its
collectives one at a time in increasing id order, so when the leader's
stage submits an id, that stage's earlier collectives were launched (on
every rank) already; and ids are batch-major, so a stage's collective for
batch ``b`` (which a bounded queue may make another stage wait for) comes
before any for a later batch.

The coordinator orders launches only: a collective started asynchronously
runs while the next ones launch (:meth:`Collectives.exchange` hands it the
start of each all-to-all and waits in the stage's own thread), as DSP's
coordinator launches and moves on.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any, Callable, Dict, Optional, Tuple

import torch
import torch.distributed as dist

from .collectives import Collectives
from .context import DistributedError

__all__ = ['LaunchCoordinator', 'CollectiveId']

#: ``(batch, stage, hop, phase)``: the same on every rank.
CollectiveId = Tuple[int, int, int, int]

_STOP: CollectiveId = (-1, -1, -1, -1)


class LaunchCoordinator:
    r"""Launches the collectives of concurrent stages in one order that the
    leader decides.

    Args:
        control (Collectives): a process group of its own for the leader's
            decisions (``Collectives.new_stage()``).
        leader (int): the deciding rank.
    """
    def __init__(self, control: Collectives, leader: int = 0):
        self.control = control
        self.leader = leader
        self._pending: Dict[CollectiveId, Tuple[Callable[[], Any],
                                                Future]] = {}
        self._cond = threading.Condition()
        self._closed = False
        self.launched = 0
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name='pyg_fastload-launch-order')
        self._thread.start()

    def run(self, cid: CollectiveId, fn: Callable[[], Any],
            timeout: Optional[float] = None) -> Any:
        r"""Runs :obj:`fn` with id :obj:`cid` when the leader's order
        reaches it; returns its result (or raises its error). DSP only
        orders launches: an :obj:`fn` that starts its collective
        (``async_op=True``) and returns the work handle, for the caller to
        wait on, lets the next collective launch while it runs; one that
        waits holds the order until it completes."""
        future: Future = Future()
        with self._cond:
            if self._closed:
                raise DistributedError('the launch coordinator is closed')
            if cid in self._pending:
                raise ValueError(f'collective id {cid} submitted twice')
            self._pending[cid] = (fn, future)
            self._cond.notify_all()
        if timeout is None:
            timeout = self.control.context.timeout.total_seconds() * 2
        return future.result(timeout=timeout)

    def close(self) -> None:
        r"""Stops the coordinator once every rank closes (a collective)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=self.control.context.timeout.total_seconds()
                          + 5)

    def _next_id(self) -> CollectiveId:
        with self._cond:
            while not self._pending and not self._closed:
                self._cond.wait()
            if not self._pending:
                return _STOP
            return min(self._pending)

    def _decide(self) -> CollectiveId:
        choice = self._next_id() if self.control.rank == self.leader else \
            _STOP
        if not self.control.context.is_distributed:
            return choice
        value = torch.tensor(choice, dtype=torch.long,
                             device=self.control.device)
        self.control.wait('launch order: broadcast the next collective',
                           dist.broadcast(value, self.leader,
                                          group=self.control.group,
                                          async_op=True))
        return tuple(int(v) for v in value.cpu())  # type: ignore[return-value]

    def _loop(self) -> None:
        while True:
            try:
                cid = self._decide()
            except DistributedError as exc:
                self._fail_all(exc)
                return
            if cid == _STOP:
                self._fail_all(DistributedError('the launch coordinator '
                                                'stopped'))
                return
            with self._cond:  # a follower waits for its own stage
                while cid not in self._pending and not self._closed:
                    self._cond.wait()
                entry = self._pending.pop(cid, None)
            if entry is None:
                self._fail_all(DistributedError(
                    f'rank {self.control.rank} closed before collective '
                    f'{cid} that the leader launched'))
                return
            fn, future = entry
            try:
                future.set_result(fn())
            except BaseException as exc:  # handed to the waiting stage
                future.set_exception(exc)
            self.launched += 1

    def _fail_all(self, error: Exception) -> None:
        with self._cond:
            pending, self._pending = self._pending, {}
        for _, future in pending.values():
            future.set_exception(error)
