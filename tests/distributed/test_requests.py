r"""The request service: answers come back, the waiting requests are served
oldest batch first then cheapest, a failing handler or a dead owner is a
named error, and closing ends every thread."""
import os
import signal
import time
from datetime import timedelta

import pytest
import torch

from pyg_fastload.distributed import Collectives, DistContext
from pyg_fastload.distributed.context import DistributedError
from pyg_fastload.distributed.requests import RequestService

from .ranks import run_ranks

pytestmark = pytest.mark.timeout(120)


def _service(seconds=20):
    coll = Collectives(DistContext.current(timedelta(seconds=seconds)))
    return RequestService(coll)


def _order(rank, world):
    service = _service()
    served = []

    def record(src, payload):
        if payload.numel() == 1:  # the first request holds the owner up
            deadline = time.monotonic() + 10  # until the others wait
            while service.waiting() < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
        served.append(payload.tolist())
        return payload * 2

    op = service.register('record', record)
    service.start()
    answers = []
    if rank == 0:
        first = service.request(1, op, torch.tensor([7]), 'record', 0, 0)
        # (batch, cost): the owner serves (3, 2), (3, 9), then (5, 1)
        later = [service.request(1, op, torch.full((n, ), float(b)),
                                 'record', batch=b, cost=c)
                 for b, c, n in ((5, 1, 2), (3, 9, 3), (3, 2, 4))]
        answers = [p.result().tolist() for p in [first, *later]]
    service.close()
    alive = [t.name for t in service._threads if t.is_alive()]
    return served, answers, alive


def test_requests_are_answered_oldest_batch_then_cheapest_first():
    results = run_ranks(_order, 2)
    assert results[0] == ('ok', ([], [[14], [10.0] * 2, [6.0] * 3,
                                      [6.0] * 4], []))
    assert results[1] == ('ok', ([[7], [3.0] * 4, [3.0] * 3, [5.0] * 2],
                                 [], []))


def _failing(rank, world, kill):
    service = _service(seconds=10)

    def fail(src, payload):
        if kill:  # the owner dies while the request is outstanding
            os.kill(os.getpid(), signal.SIGKILL)
        raise ValueError(f'no rows {payload.tolist()}')

    op = service.register('fail', fail)
    service.start()
    message = None
    if rank == 0:
        try:
            service.request(1, op, torch.tensor([1, 2]), "rows 'x'").result()
        except DistributedError as error:
            message = str(error)
    service.close()  # rank 1 serves until rank 0 closes
    return message


@pytest.mark.parametrize('kill', [False, True])
def test_a_failing_owner_is_named_not_waited_for(kill):
    results = run_ranks(_failing, 2, kill, timeout=40)
    message = results[0][1]
    assert "request 'rows 'x''" in message
    assert 'rank 1' in message
    if kill:  # its connection closed: named at once
        assert 'rank 1 died, hangs or stopped serving' in message
        assert 1 not in results  # (killed: reports nothing)
    else:  # the owner's own error, and it serves on
        assert 'at rank 1: ValueError: no rows [1, 2]' in message
        assert results[1] == ('ok', None)


def _priced(rank, world):
    service = _service()
    served = []

    def record(src, payload):
        if payload.numel() == 1:  # holds the owner up until both wait
            deadline = time.monotonic() + 10
            while service.waiting() < 2 and time.monotonic() < deadline:
                time.sleep(0.01)
        served.append(payload.numel())
        return payload

    def price(payload):  # the owner's own cost: the payload's size
        return payload.numel()

    op = service.register('priced', record, cost=price)
    service.start()
    if rank == 0:
        first = service.request(1, op, torch.ones(1), 'priced')
        # the requester's costs say 5 first; the owner's say 2 first
        big = service.request(1, op, torch.ones(5), 'priced', cost=0)
        small = service.request(1, op, torch.ones(2), 'priced', cost=9)
        [p.result() for p in (first, big, small)]
    service.close()
    return served


def test_an_owner_prices_requests_itself_when_told_to():
    results = run_ranks(_priced, 2)
    assert results[1] == ('ok', [1, 2, 5])
