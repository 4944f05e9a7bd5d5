r"""Asynchronous, prioritized requests between ranks (ByteGNN 3.2-3.3): a
rank asks an owner for something (rows of a feature) the moment a task
needs it, and the owner serves it between its own tasks, so no rank waits
for the others to reach the same step.

Each rank runs one service (:class:`RequestService`) on a gloo process
group of its own, with point-to-point messages: a receiving thread per
peer takes its requests, a serving thread answers the waiting ones in
priority order (the oldest batch first, then the cheapest), and a
collecting thread per peer takes this rank's answers as they come (so no
owner waits for a requester to read its answer; a peer that dies fails
its threads' receives at once). Every wait of a requester is
bounded by the collectives' timeout and names the operation and the peer.

The service stops when every rank has closed it (:meth:`close`: each rank
tells every peer it will ask no more, and serves until every peer has
said so too)."""
from __future__ import annotations

import heapq
import itertools
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.distributed as dist
from torch import Tensor

from .collectives import Collectives, digest
from .context import DistributedError

__all__ = ['RequestService', 'Pending', 'REMOTE_MODES']

#: How the partitioned modes reach other ranks' rows (``mode_options.
#: remote``): ``'async'`` requests (:class:`RequestService`) or ``'sync'``
#: collectives (every rank in lockstep).
REMOTE_MODES = ('async', 'sync')

#: How long the receiving thread may wait for the next request (an idle
#: owner is normal: the group's own timeout must not end it).
_IDLE = timedelta(days=1)
#: The tags of every request's header and every answer's; payloads have
#: their own.
_REQUEST_TAG, _ANSWER_TAG = 1, 2
#: A header: op, request id, requester, batch, cost, then the payload's
#: status (0 ok, 1 error text), dtype, number of dims and up to 4 dims.
_HEADER = 13
_STOP = -1
_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
           torch.float16, torch.bfloat16, torch.float32, torch.float64,
           torch.bool)

#: A handler: ``(requester, payload) -> answer``.
Handler = Callable[[int, Tensor], Tensor]
#: An owner's cost of a request: ``payload -> cost`` (what it orders the
#: waiting requests of a batch by, cheapest first).
Cost = Callable[[Tensor], int]


def _tag(request: int, part: int) -> int:
    r"""The tag of part :obj:`part` (0: the payload, 1: the answer) of
    request :obj:`request` of a requester."""
    return 16 + 2 * (request % 2**29) + part


def _header(op: int, request: int, rank: int, batch: int, cost: int,
            tensor: Tensor, status: int = 0) -> Tensor:
    if tensor.dim() > 4:
        raise ValueError(f'a request carries tensors of at most 4 dims, '
                         f'got {tuple(tensor.shape)}')
    shape = list(tensor.shape) + [0] * (4 - tensor.dim())
    return torch.tensor([op, request, rank, batch, cost, status,
                         _DTYPES.index(tensor.dtype), tensor.dim(), *shape,
                         0], dtype=torch.long)


def _empty_like_header(header: Tensor) -> Tensor:
    r"""An empty tensor of the dtype and shape a header describes."""
    dims = int(header[7])
    return torch.empty(header[8:8 + dims].tolist(),
                       dtype=_DTYPES[int(header[6])])


def _bytes(tensor: Tensor) -> Tensor:
    r""":obj:`tensor`'s bytes (what travels: gloo sends flat tensors)."""
    return tensor.contiguous().view(-1).view(torch.uint8) \
        if tensor.numel() else torch.empty(0, dtype=torch.uint8)


@dataclass(order=True)
class _Waiting:
    r"""A request waiting at its owner, ordered as it is served."""
    batch: int
    cost: int
    arrived: int
    requester: int = field(compare=False)
    request: int = field(compare=False)
    op: int = field(compare=False)
    payload: Tensor = field(compare=False)


class Pending:
    r"""A request on its way: :meth:`result` waits for the answer."""
    def __init__(self, service: 'RequestService', peer: int, name: str,
                 answer: 'Future[Tensor]',
                 sends: List[Tuple[dist.Work, Tensor]]):
        self.service, self.peer, self.name = service, peer, name
        self._answer, self._sends = answer, sends

    def result(self) -> Tensor:
        r"""The owner's answer (a :class:`DistributedError` naming the op
        and the owner if it fails, or does not come within the
        timeout)."""
        service = self.service
        for work, _ in self._sends:  # (the tensors live until sent)
            service.wait(work, self.name, self.peer)
        try:
            return self._answer.result(service.timeout.total_seconds())
        except DistributedError:
            raise
        except Exception as exc:  # the timeout, or the owner's failure
            raise service.failure(self.name, self.peer, exc) from None


class RequestService:
    r"""This rank's requests to other ranks and its service of theirs
    (a collective to create: every rank makes one, in the same order).

    Register every operation this rank serves (:meth:`register`, the same
    names on every rank), then :meth:`start`; ask with :meth:`request`.
    Besides the owner's threads (receiving, serving) a collecting thread
    takes every answer as it comes, so the order a requester reads its
    answers in holds up no owner.

    Args:
        collectives (Collectives): the rank's collectives (rank, world
            size, timeout, failure reports).

    Example:
        >>> service = RequestService(collectives)
        >>> op = service.register('double', lambda src, t: 2 * t)
        >>> service.start()
        >>> service.request(1 - rank, op, torch.ones(3), 'double').result()
        tensor([2., 2., 2.])
    """
    def __init__(self, collectives: Collectives):
        self.collectives = collectives
        self.rank = collectives.rank
        self.world_size = collectives.world_size
        self.timeout = collectives.context.timeout
        self.group = dist.new_group(timeout=_IDLE, backend='gloo') \
            if collectives.context.is_distributed else None
        self._handlers: Dict[int, Tuple[str, Handler,
                                        Optional[Cost]]] = {}
        self._ids = itertools.count()
        self._arrivals = itertools.count()
        self._lock = threading.Lock()
        self._answers: Dict[int, Tuple[int, 'Future[Tensor]']] = {}
        self._waiting: List[_Waiting] = []
        self._ready = threading.Condition()
        self._gone: set = set()  # requesters that could not be answered
        self._threads: List[threading.Thread] = []
        self._stopped: set = set()
        self._receiving = 0  # peers whose requests may still come
        self._closed = False
        #: Why the service stopped serving or collecting, if it failed.
        self.error: Optional[str] = None

    def register(self, name: str, handler: Handler,
                 cost: Optional[Cost] = None) -> int:
        r"""Serves the operation :obj:`name` with :obj:`handler`
        (``(requester, payload) -> answer``, run on the serving thread);
        returns its op number (the same on every rank). :obj:`cost`
        (``payload -> int``): the owner prices each request itself (e.g.
        the requested nodes' in-degree sum) instead of taking the
        requester's cost."""
        op = digest(name)
        if op in self._handlers:
            raise ValueError(f'operation {name!r} is registered already')
        self._handlers[op] = (name, handler, cost)
        return op

    def register_next(self, prefix: str, handler: Handler,
                      cost: Optional[Cost] = None) -> int:
        r"""As :meth:`register`, named :obj:`prefix` and the number of
        operations of that prefix registered before (objects every rank
        builds in the same order, e.g. samplers, get the same op)."""
        taken = sum(1 for name, _, _ in self._handlers.values()
                    if name.startswith(f'{prefix} #'))
        return self.register(f'{prefix} #{taken}', handler, cost)

    def start(self) -> None:
        r"""Starts serving. An operation registered later must be
        registered on every rank before any rank asks for it (e.g. before a
        collective every rank passes)."""
        if self.group is None or self._threads:
            return
        peers = [p for p in range(self.world_size) if p != self.rank]
        self._receiving = len(peers)
        # One receiving and one collecting thread per peer: a receive from
        # a peer whose connection closed (it died) fails at once.
        targets = [(self._serve, 'serve', ())] + [
            (target, f'{name}-{peer}', (peer, ))
            for peer in peers for target, name in
            ((self._receive, 'receive'), (self._collect, 'collect'))]
        for target, name, args in targets:
            thread = threading.Thread(
                target=target, args=args, daemon=True,
                name=f'pyg_fastload-requests-{name}')
            thread.start()
            self._threads.append(thread)

    # The requester's side ###################################################

    def request(self, peer: int, op: int, payload: Tensor, name: str,
                batch: int = 0, cost: int = 0) -> Pending:
        r"""Asks rank :obj:`peer` for operation :obj:`op` on
        :obj:`payload`, for batch :obj:`batch` at cost :obj:`cost` (what
        the owner orders its waiting requests by); :obj:`name` names it in
        errors. Returns at once, the answer pending."""
        if self._closed or not self._threads:
            raise DistributedError(f"rank {self.rank}: request '{name}' "
                                   f"while the request service is not "
                                   f"running (start it; it closes with "
                                   f"the loaders)")
        if not 0 <= peer < self.world_size or peer == self.rank:
            raise ValueError(f"'peer' = {peer} must be another rank in "
                             f"[0, {self.world_size})")
        answer: 'Future[Tensor]' = Future()
        with self._lock:
            request = next(self._ids)
            self._answers[request] = (peer, answer)
        payload = payload.contiguous()
        header = _header(op, request, self.rank, batch, cost, payload)
        sends = [(header, _REQUEST_TAG)]
        if payload.numel():
            sends.append((_bytes(payload), _tag(request, 0)))
        try:
            started = [(dist.isend(tensor, peer, group=self.group, tag=tag),
                        tensor) for tensor, tag in sends]
        except Exception as exc:  # RuntimeError/DistBackendError
            raise self.failure(name, peer, exc) from None
        return Pending(self, peer, name, answer, started)

    def failure(self, name: str, peer: int,
                exc: BaseException) -> DistributedError:
        r"""The error of request :obj:`name` to rank :obj:`peer` that
        failed with :obj:`exc`: names both, and any failed rank."""
        failed = self.collectives.failed_ranks()
        what = (f'did not complete within '
                f'{self.timeout.total_seconds():g}s' if not str(exc) else
                f'failed ({type(exc).__name__}: '
                f'{str(exc).splitlines()[0][:300]})')
        return DistributedError(
            f"rank {self.rank}: request '{name}' to rank {peer} {what}" +
            ('; failed: ' + '; '.join(failed) if failed else
             f'; rank {peer} died, hangs or stopped serving'))

    def wait(self, work: dist.Work, name: str, peer: int) -> None:
        r"""Waits for :obj:`work` (of request :obj:`name` to rank
        :obj:`peer`) within the timeout; a failure names both."""
        try:
            work.wait(self.timeout)
        except Exception as exc:  # RuntimeError/DistBackendError
            raise self.failure(name, peer, exc) from None

    def send(self, tensor: Tensor, peer: int, tag: int, name: str) -> None:
        r"""Sends :obj:`tensor` (of request :obj:`name`) to rank
        :obj:`peer`, within the timeout; a failure names both."""
        try:
            work = dist.isend(tensor, peer, group=self.group, tag=tag)
        except Exception as exc:  # RuntimeError/DistBackendError
            raise self.failure(name, peer, exc) from None
        self.wait(work, name, peer)

    def _collect(self, owner: int) -> None:
        r"""Takes every answer of rank :obj:`owner` as it comes, until it
        stopped."""
        try:
            while True:
                header = torch.empty(_HEADER, dtype=torch.long)
                dist.irecv(header, src=owner, group=self.group,
                           tag=_ANSWER_TAG).wait(_IDLE)
                request, status = int(header[1]), int(header[5])
                if int(header[0]) == _STOP:
                    return
                answer = _empty_like_header(header)
                if answer.numel():
                    dist.irecv(_bytes(answer), src=owner, group=self.group,
                               tag=_tag(request, 1)).wait(self.timeout)
                with self._lock:
                    _, future = self._answers.pop(request)
                if status:
                    future.set_exception(RuntimeError(
                        f"at rank {owner}: "
                        f"{bytes(answer.tolist()).decode(errors='replace')}"))
                else:
                    future.set_result(answer)
        except Exception as exc:  # the owner died: its answers never come
            self.error = f'{type(exc).__name__}: {str(exc)[:200]}'
            with self._lock:
                pending = {r: a for r, a in self._answers.items()
                           if a[0] == owner}
                for request in pending:
                    del self._answers[request]
            for _, future in pending.values():
                future.set_exception(RuntimeError(self.error))

    # The owner's side #######################################################

    def _receive(self, requester: int) -> None:
        r"""Takes every request of rank :obj:`requester` (and its stop) as
        it comes."""
        try:
            while True:
                header = torch.empty(_HEADER, dtype=torch.long)
                dist.irecv(header, src=requester, group=self.group,
                           tag=_REQUEST_TAG).wait(_IDLE)
                op, request = int(header[0]), int(header[1])
                if op == _STOP:
                    self._stopped.add(requester)
                    return
                payload = _empty_like_header(header)
                if payload.numel():
                    dist.irecv(_bytes(payload), src=requester,
                               group=self.group,
                               tag=_tag(request, 0)).wait(self.timeout)
                price = self._handlers.get(op, ('?', None, None))[2]
                try:
                    cost = int(header[4] if price is None
                               else price(payload))
                except Exception:  # a bad payload: its handler says why
                    cost = 0
                with self._ready:
                    heapq.heappush(self._waiting, _Waiting(
                        int(header[3]), cost,
                        next(self._arrivals), requester, request, op,
                        payload))
                    self._ready.notify()
        except Exception as exc:  # the peer died: nothing more comes
            self.error = f'{type(exc).__name__}: {str(exc)[:200]}'
            self._gone.add(requester)
        finally:
            with self._ready:
                self._receiving -= 1
                self._ready.notify()

    def _serve(self) -> None:
        r"""Answers the waiting requests, the oldest batch (then the
        cheapest) first; then tells every peer no more answers come."""
        while True:
            with self._ready:
                while not self._waiting and self._receiving:
                    self._ready.wait()
                if not self._waiting:
                    break
                item = heapq.heappop(self._waiting)
            _, handler, _ = self._handlers.get(item.op, ('?', None, None))
            status = 0
            try:
                if handler is None:
                    raise ValueError(f'no operation {item.op} registered '
                                     f'at rank {self.rank}')
                answer = handler(item.requester, item.payload).contiguous()
            except Exception as exc:  # told to the requester
                status = 1
                answer = torch.tensor(list(
                    f'{type(exc).__name__}: {exc}'[:500].encode()),
                    dtype=torch.uint8)
            header = _header(item.op, item.request, self.rank, item.batch,
                             item.cost, answer, status)
            self._reply(item.requester, header, answer, item.request)
        stop = torch.zeros(_HEADER, dtype=torch.long)
        stop[0], stop[2] = _STOP, self.rank
        for peer in range(self.world_size):
            if peer != self.rank:
                self._reply(peer, stop, torch.empty(0), 0)

    def _reply(self, peer: int, header: Tensor, answer: Tensor,
               request: int) -> None:
        r"""Sends :obj:`peer` an answer (its collecting thread takes every
        answer as it comes, so this waits for no requester's reading)."""
        if peer in self._gone:
            return
        try:
            dist.isend(header, peer, group=self.group,
                       tag=_ANSWER_TAG).wait(self.timeout)
            if answer.numel():
                dist.isend(_bytes(answer), peer, group=self.group,
                           tag=_tag(request, 1)).wait(self.timeout)
        except Exception as exc:  # the requester is gone: it alone
            self._gone.add(peer)
            self.error = (f'answering rank {peer}: {type(exc).__name__}: '
                          f'{str(exc)[:200]}')

    def waiting(self) -> int:
        r"""How many requests wait at this owner now."""
        with self._ready:
            return len(self._waiting)

    def close(self) -> None:
        r"""Tells every peer this rank asks no more, and serves until every
        peer has said so (bounded by the timeout); the threads end. A peer
        that does not close in time is named (a
        :class:`DistributedError`)."""
        if self._closed or self.group is None or not self._threads:
            self._closed = True
            return
        self._closed = True
        stop = torch.zeros(_HEADER, dtype=torch.long)
        stop[0], stop[2] = _STOP, self.rank
        for peer in range(self.world_size):
            if peer != self.rank and self.error is None:
                try:
                    self.send(stop, peer, _REQUEST_TAG, 'stop')
                except DistributedError as error:
                    self.error = str(error)
        deadline = time.monotonic() + self.timeout.total_seconds()
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        missing = sorted(set(range(self.world_size)) - self._stopped -
                         {self.rank})
        if self.error is None and any(t.is_alive() for t in self._threads):
            raise DistributedError(
                f'rank {self.rank}: the request service did not stop within '
                f'{self.timeout.total_seconds():g}s: rank(s) {missing} '
                f'did not close theirs (every rank closes its loaders)')
